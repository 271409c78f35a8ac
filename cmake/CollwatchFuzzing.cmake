# libFuzzer targets (-DCOLLWATCH_BUILD_FUZZERS=ON, clang; the `fuzz` preset). Every
# object of the build gets the fuzzer's coverage instrumentation; only the fuzzer
# executables link libFuzzer's main. Sanitizers come from COLLWATCH_SANITIZE.
# Without it, each fuzz target is built with tests/fuzz/replay_main.cc instead and a
# test replays its inputs (tests/fuzz/<corpus>/: seeds and regression inputs).
option(COLLWATCH_BUILD_FUZZERS "Build the libFuzzer targets (needs clang)" OFF)

if(COLLWATCH_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "COLLWATCH_BUILD_FUZZERS needs clang (libFuzzer): use the fuzz preset")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
  # `cmake --build --preset fuzz` builds this target: the fuzzers and nothing else.
  add_custom_target(collwatch_fuzzers)
endif()

# collwatch_add_fuzzer(NAME SOURCE CORPUS LIBRARIES...): a fuzzer executable NAME from
# SOURCE whose inputs live in tests/fuzz/CORPUS/.
function(collwatch_add_fuzzer name source corpus)
  if(COLLWATCH_BUILD_FUZZERS)
    add_executable(${name} ${source})
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
    add_dependencies(collwatch_fuzzers ${name})
  elseif(COLLWATCH_BUILD_TESTS)
    add_executable(${name} ${source} ${PROJECT_SOURCE_DIR}/tests/fuzz/replay_main.cc)
    # replay_main.cc asks whether the target defines its weak LLVMFuzzerInitialize: it must
    # not share a unity source with the target's own file.
    set_target_properties(${name} PROPERTIES UNITY_BUILD OFF)
    add_test(NAME ${name}.replay COMMAND ${name} ${PROJECT_SOURCE_DIR}/tests/fuzz/${corpus})
    collwatch_test_timeout(timeout 120)
    set_tests_properties(${name}.replay PROPERTIES TIMEOUT ${timeout})
  else()
    return()
  endif()
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE ${ARGN})
  collwatch_set_warnings(${name})
endfunction()
