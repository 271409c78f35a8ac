# Applies COLLWATCH_SANITIZE to every target of the build (set by the asan/tsan presets).
if(COLLWATCH_SANITIZE)
  # Line tables (-g1) are all a sanitizer report needs (file:line in its stacks), and less
  # to compile and link than -g.
  add_compile_options(-fsanitize=${COLLWATCH_SANITIZE} -fno-omit-frame-pointer -g1)
  add_link_options(-fsanitize=${COLLWATCH_SANITIZE})
  # Clang links its sanitizer runtime statically by default; the preload, loaded into
  # programs that are not sanitized, needs the shared one, as GCC links it. It lies in
  # clang's own folder, not on the loader's path.
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} --print-runtime-dir
      OUTPUT_VARIABLE clang_runtime_dir OUTPUT_STRIP_TRAILING_WHITESPACE)
    add_link_options(-shared-libsan "LINKER:-rpath,${clang_runtime_dir}")
  endif()
  if(COLLWATCH_SANITIZE MATCHES "undefined")
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
endif()

# The sanitizer's runtime, which a sanitized preload needs loaded before it in programs
# that are not sanitized themselves (/bin/sh under `collwatch run` in the tests).
# Empty without a sanitizer.
set(COLLWATCH_SANITIZER_RUNTIME_PATH "")
if(COLLWATCH_SANITIZE MATCHES "address" AND CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libclang_rt.asan-x86_64.so
    OUTPUT_VARIABLE COLLWATCH_SANITIZER_RUNTIME_PATH OUTPUT_STRIP_TRAILING_WHITESPACE)
elseif(COLLWATCH_SANITIZE MATCHES "address")
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libasan.so
    OUTPUT_VARIABLE COLLWATCH_SANITIZER_RUNTIME_PATH OUTPUT_STRIP_TRAILING_WHITESPACE)
elseif(COLLWATCH_SANITIZE MATCHES "thread")
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libtsan.so
    OUTPUT_VARIABLE COLLWATCH_SANITIZER_RUNTIME_PATH OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()

# Test executables a sanitized build leaves out: the lines "PRESETS @TARGET" of
# tests/sanitizer_variants.txt (why each is left out is written there). They are not built
# (a TSan build of single-threaded tests costs minutes of CI for nothing to find), and
# scripts/sanitizers.sh does not run the stand-in test GoogleTest leaves for them. Called
# once every target exists.
function(collwatch_leave_out_of_sanitized_build)
  if(COLLWATCH_SANITIZE MATCHES "thread")
    set(preset tsan)
  elseif(COLLWATCH_SANITIZE MATCHES "address")
    set(preset asan)
  else()
    return()
  endif()
  set(variants ${PROJECT_SOURCE_DIR}/tests/sanitizer_variants.txt)
  set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${variants})
  file(STRINGS ${variants} lines REGEX "^[a-z,]+ @")
  foreach(line IN LISTS lines)
    string(REGEX MATCH "^([a-z,]+) @([A-Za-z0-9_]+)" matched "${line}")
    set(presets ",${CMAKE_MATCH_1},")
    set(target ${CMAKE_MATCH_2})
    string(FIND "${presets}" ",${preset}," at)
    if(at EQUAL -1)
      continue()
    endif()
    if(NOT TARGET ${target})
      message(FATAL_ERROR "tests/sanitizer_variants.txt leaves out ${target}, which is no target")
    endif()
    set_target_properties(${target} PROPERTIES EXCLUDE_FROM_ALL TRUE)
  endforeach()
endfunction()
