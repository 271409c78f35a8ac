# One factor for every time limit of the tests, set per build: sanitized code runs several
# times slower (TSan most), more so on a loaded 2-core CI machine, and a limit the default
# build meets with room to spare killed jobs half-way under TSan there (#38 item 12).
# Limits are safety nets against hangs; workloads are counts. The factor reaches the tests'
# code as COLLWATCH_TEST_TIME_SCALE (tests/support/test_time.h: Subprocess::Wait and the
# tests' own deadlines) and multiplies every ctest TIMEOUT.
if(COLLWATCH_SANITIZE MATCHES "thread")
  set(COLLWATCH_TEST_TIME_SCALE 5)
elseif(COLLWATCH_SANITIZE)
  set(COLLWATCH_TEST_TIME_SCALE 3)
else()
  set(COLLWATCH_TEST_TIME_SCALE 1)
endif()

# gtest_discover_tests with the TIMEOUT of its PROPERTIES scaled. It stands in for
# GoogleTest's own (reached as _gtest_discover_tests), so that every test, including those
# added later, gets the factor without a wrapper to remember at each call. Include
# GoogleTest only once, before this file: a second include(GoogleTest) puts its own back.
function(gtest_discover_tests target)
  set(args "${ARGN}")
  list(FIND args TIMEOUT at)  # whole elements: DISCOVERY_TIMEOUT is another keyword
  if(at GREATER -1)
    math(EXPR value_at "${at} + 1")
    list(GET args ${value_at} seconds)
    math(EXPR seconds "${seconds} * ${COLLWATCH_TEST_TIME_SCALE}")
    list(REMOVE_AT args ${value_at})
    list(INSERT args ${value_at} ${seconds})
  endif()
  _gtest_discover_tests(${target} ${args})
endfunction()

# A TIMEOUT for add_test's tests: `seconds` in the default build, scaled for this one.
# (CMake 3.25 cannot set a test's properties from another folder, so each add_test site
# asks.) Tests with no TIMEOUT get the test preset's: 300 s, ASan 900, TSan 1500.
function(collwatch_test_timeout out seconds)
  math(EXPR scaled "${seconds} * ${COLLWATCH_TEST_TIME_SCALE}")
  set(${out} ${scaled} PARENT_SCOPE)
endfunction()

# Run once every target exists: test executables (those linking GoogleTest) and the test
# support library get the factor.
function(collwatch_scale_test_times dir)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    get_target_property(libraries ${target} LINK_LIBRARIES)
    if(target STREQUAL "collwatch_test_support")
      target_compile_definitions(${target} PUBLIC COLLWATCH_TEST_TIME_SCALE=${COLLWATCH_TEST_TIME_SCALE})
    elseif(type STREQUAL "EXECUTABLE" AND libraries MATCHES "GTest::")
      target_compile_definitions(${target} PRIVATE COLLWATCH_TEST_TIME_SCALE=${COLLWATCH_TEST_TIME_SCALE})
    endif()
  endforeach()
  get_property(subdirectories DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(subdirectory IN LISTS subdirectories)
    collwatch_scale_test_times(${subdirectory})
  endforeach()
endfunction()
