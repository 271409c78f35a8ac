# libFuzzer targets (-DCOLLWATCH_BUILD_FUZZERS=ON, clang; the `fuzz` preset). Every
# object of the build gets the fuzzer's coverage instrumentation; only the fuzzer
# executables link libFuzzer's main. Sanitizers come from COLLWATCH_SANITIZE.
option(COLLWATCH_BUILD_FUZZERS "Build the libFuzzer targets (needs clang)" OFF)

if(COLLWATCH_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "COLLWATCH_BUILD_FUZZERS needs clang (libFuzzer): use the fuzz preset")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
  # `cmake --build --preset fuzz` builds this target: the fuzzers and nothing else.
  add_custom_target(collwatch_fuzzers)
endif()

# collwatch_add_fuzzer(NAME SOURCE LIBRARIES...): a fuzzer executable NAME from SOURCE.
function(collwatch_add_fuzzer name source)
  if(NOT COLLWATCH_BUILD_FUZZERS)
    return()
  endif()
  add_executable(${name} ${source})
  target_link_libraries(${name} PRIVATE ${ARGN})
  target_link_options(${name} PRIVATE -fsanitize=fuzzer)
  collwatch_set_warnings(${name})
  add_dependencies(collwatch_fuzzers ${name})
endfunction()
