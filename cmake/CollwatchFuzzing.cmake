# libFuzzer targets (-DCOLLWATCH_BUILD_FUZZERS=ON, clang: the asan preset, so that one
# sanitized build serves both the tests and the fuzzers). The project's libraries a fuzzer
# links get the fuzzer's coverage instrumentation (collwatch_instrument_fuzzed_libraries);
# only the fuzzer executables link libFuzzer's main. Sanitizers come from COLLWATCH_SANITIZE.
# Each target's inputs (tests/fuzz/<corpus>/: seeds and regression inputs) are replayed as a
# test: by the fuzzer itself (-runs=0 runs the folder once and fuzzes nothing), or without
# libFuzzer by the target's source built with tests/fuzz/replay_main.cc.
option(COLLWATCH_BUILD_FUZZERS "Build the libFuzzer targets (needs clang)" OFF)

if(COLLWATCH_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "COLLWATCH_BUILD_FUZZERS needs clang (libFuzzer): use the asan preset")
  endif()
  # `cmake --build --preset fuzz` builds this target: the fuzzers and what they link.
  add_custom_target(collwatch_fuzzers)
endif()

# collwatch_add_fuzzer(NAME SOURCE CORPUS LIBRARIES...): a fuzzer executable NAME from
# SOURCE whose inputs live in tests/fuzz/CORPUS/.
function(collwatch_add_fuzzer name source corpus)
  set(inputs ${PROJECT_SOURCE_DIR}/tests/fuzz/${corpus})
  if(COLLWATCH_BUILD_FUZZERS)
    add_executable(${name} ${source})
    # The sanitizer runtime linked statically, after the build's -shared-libsan: with
    # libFuzzer the shared one no longer comes first among the libraries and ASan refuses
    # to start. A fuzzer loads no preload, so nothing else needs the shared one there.
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer-no-link)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer -static-libsan)
    add_dependencies(collwatch_fuzzers ${name})
    set_property(GLOBAL APPEND PROPERTY COLLWATCH_FUZZERS ${name})
    set(replay ${name} -runs=0 -rss_limit_mb=2048 ${inputs})
  elseif(COLLWATCH_BUILD_TESTS)
    add_executable(${name} ${source} ${PROJECT_SOURCE_DIR}/tests/fuzz/replay_main.cc)
    # replay_main.cc asks whether the target defines its weak LLVMFuzzerInitialize: it must
    # not share a unity source with the target's own file.
    set_target_properties(${name} PROPERTIES UNITY_BUILD OFF)
    set(replay ${name} ${inputs})
  else()
    return()
  endif()
  if(COLLWATCH_BUILD_TESTS)
    add_test(NAME ${name}.replay COMMAND ${replay})
    collwatch_test_timeout(timeout 120)
    set_tests_properties(${name}.replay PROPERTIES TIMEOUT ${timeout})
  endif()
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE ${ARGN})
  collwatch_set_warnings(${name})
endfunction()

# Gives every library of this project that a fuzzer links, directly or through another,
# the coverage instrumentation libFuzzer steers by (-fsanitize=fuzzer-no-link). Only those:
# it makes an object about a third slower to compile at -O0 and slower to run, and the
# tests' own code and the programs no fuzzer reaches have no use for it. Called once
# every target exists.
function(collwatch_instrument_fuzzed_libraries)
  if(NOT COLLWATCH_BUILD_FUZZERS)
    return()
  endif()
  get_property(pending GLOBAL PROPERTY COLLWATCH_FUZZERS)
  set(seen "")
  while(pending)
    list(POP_FRONT pending target)
    get_target_property(aliased ${target} ALIASED_TARGET)
    if(aliased)
      set(target ${aliased})
    endif()
    if(target IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${target})
    get_target_property(type ${target} TYPE)
    get_target_property(imported ${target} IMPORTED)
    if(imported OR type STREQUAL "INTERFACE_LIBRARY")
      continue()
    endif()
    if(type MATCHES "^(STATIC|OBJECT)_LIBRARY$")
      target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link)
    endif()
    get_target_property(direct ${target} LINK_LIBRARIES)
    get_target_property(interface ${target} INTERFACE_LINK_LIBRARIES)
    foreach(entry IN LISTS direct interface)
      # A static library's dependencies appear as $<LINK_ONLY:name>.
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" entry "${entry}")
      if(TARGET ${entry})
        list(APPEND pending ${entry})
      endif()
    endforeach()
  endwhile()
endfunction()
