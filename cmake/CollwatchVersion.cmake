# The version collwatch tells (`collwatch --version`, report.json, run.json, the Chrome
# trace, the .deb): project()'s VERSION and, in a git checkout, the commit at configure
# time. Configure-time only: a commit read at every build would rebuild and relink every
# program after each commit; scripts/test.sh and CI configure before they build, so what
# they ship names its commit. -DCOLLWATCH_COMMIT=... names it where there is no .git (a
# source tarball, a Debian source package).
set(COLLWATCH_COMMIT "" CACHE STRING "Commit the version names (default: git rev-parse HEAD, where there is .git)")
set(COLLWATCH_VERSION_COMMIT "${COLLWATCH_COMMIT}")
if(NOT COLLWATCH_VERSION_COMMIT)
  find_package(Git QUIET)
  if(GIT_FOUND)
    execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=7 HEAD
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} OUTPUT_VARIABLE COLLWATCH_VERSION_COMMIT
      OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE collwatch_git_status)
    if(NOT collwatch_git_status EQUAL 0)
      set(COLLWATCH_VERSION_COMMIT "")
    endif()
  endif()
endif()
# "0.1.0 (commit abc1234)", or "0.1.0" alone: what --version prints after "collwatch ".
if(COLLWATCH_VERSION_COMMIT)
  set(COLLWATCH_VERSION_TEXT "${PROJECT_VERSION} (commit ${COLLWATCH_VERSION_COMMIT})")
else()
  set(COLLWATCH_VERSION_TEXT "${PROJECT_VERSION}")
endif()
message(STATUS "collwatch ${COLLWATCH_VERSION_TEXT}")
