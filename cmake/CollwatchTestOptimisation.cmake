# How the test executables (those linking GoogleTest) compile: built three times in CI
# (default, ASan, TSan), their fixed cost per file was most of a clean-clone run.
#
# - RelWithDebInfo (the default preset, CI's first build): the tests' own code at -O0; the
#   libraries they check keep -O2. Measured on the 2-core machine: collector/end_to_end_test
#   13.1 s at -O1 -g1, 9.9 s at -O0 -g1 (and -O1 was a quarter faster than -O2 before).
#   Sanitizer builds are Debug (-O0) already.
# - Under ASan+UBSan, the tests' own code goes without UBSan's checks (-fno-sanitize=
#   undefined; ASan stays): UBSan is for the code under test, which keeps it, and its
#   instrumentation was a third of a test file's compile time (measured on the 2-core
#   machine, Debug: collector end_to_end_test 21.3 CPU-s with ASan+UBSan, 14.3 with ASan
#   alone, 14.3 with neither: ASan's share of the test code is small).
# - One precompiled header for all of them (GoogleTest, GoogleMock, nlohmann/json and the
#   standard headers most tests include), built once by collwatch_test_pch and reused: 20
#   to 30 % of a test file's compile time (analyzer/classification_test 7.1 s -> 5.7 s,
#   cli/trace_loader_test 9.8 s -> 6.7 s). GCC takes a precompiled header only where the
#   flags that change its content match (-O level, sanitizers, -fPIE), hence one level for
#   all tests; -Winvalid-pch says so if one ever does not.
# - Test files that link the same libraries share one executable (125 files in 38
#   executables, from 106), compiled as unity sources in every preset
#   (collwatch_add_test_executable): the headers and templates they have in common are
#   compiled once per batch (one batch per executable: the presets' unity batch size is 0,
#   see CMakePresets.json), and one link replaces many. Each such file keeps its helpers
#   in a namespace named after it (collwatch::analyzer::report_test), so that files
#   compiled together do not collide. Files that TSan leaves out (single-threaded) are
#   not merged with those it runs.
# -DCOLLWATCH_TEST_PCH=OFF compiles every test from its headers.
option(COLLWATCH_TEST_PCH "Share one precompiled header among the test executables" ON)

function(collwatch_compile_tests_fast dir)
  if(COLLWATCH_TEST_PCH AND NOT TARGET collwatch_test_pch)
    find_package(nlohmann_json REQUIRED)
    add_executable(collwatch_test_pch ${PROJECT_SOURCE_DIR}/tests/support/test_pch.cc)
    target_link_libraries(collwatch_test_pch PRIVATE GTest::gmock GTest::gtest_main
      nlohmann_json::nlohmann_json)
    target_precompile_headers(collwatch_test_pch PRIVATE
      <algorithm> <chrono> <cstdint> <filesystem> <fstream> <map> <memory> <optional> <set>
      <sstream> <string> <thread> <vector>
      <gmock/gmock.h> <gtest/gtest.h> <nlohmann/json.hpp>)
    collwatch_set_warnings(collwatch_test_pch)  # -Wpedantic changes predefined macros
    collwatch_compile_as_test(collwatch_test_pch)
  endif()
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    get_target_property(libraries ${target} LINK_LIBRARIES)
    if(type STREQUAL "EXECUTABLE" AND libraries MATCHES "GTest::"
       AND NOT target STREQUAL "collwatch_test_pch")
      collwatch_compile_as_test(${target})
      # LibTorch's tests build with another C++ ABI (_GLIBCXX_USE_CXX11_ABI=0).
      if(COLLWATCH_TEST_PCH AND NOT libraries MATCHES "torch")
        target_precompile_headers(${target} REUSE_FROM collwatch_test_pch)
      endif()
    endif()
  endforeach()
  get_property(subdirectories DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(subdirectory IN LISTS subdirectories)
    collwatch_compile_tests_fast(${subdirectory})
  endforeach()
endfunction()

# collwatch_add_test_executable(NAME SOURCES...): one test executable of several test files,
# compiled together as unity sources (every preset, the default one included), in batches
# of CMAKE_UNITY_BUILD_BATCH_SIZE (the presets: 0, the whole executable at once).
function(collwatch_add_test_executable name)
  add_executable(${name} ${ARGN})
  set_target_properties(${name} PROPERTIES UNITY_BUILD ON)
endfunction()

# collwatch_discover_tests_in(TARGET SOURCE PROPERTY VALUE...): the tests SOURCE (one file
# of the merged executable TARGET) defines, each a ctest test with these properties, as
# gtest_discover_tests would give them for an executable of its own. Its suites are read
# from the file: TEST/TEST_F suites, and the instantiations of TEST_P ones.
function(collwatch_discover_tests_in target source)
  file(STRINGS ${CMAKE_CURRENT_SOURCE_DIR}/${source} lines
    REGEX "^(TEST|TEST_F)\\(|^INSTANTIATE_TEST_SUITE_P\\(")
  set(patterns)
  foreach(line IN LISTS lines)
    if(line MATCHES "^INSTANTIATE_TEST_SUITE_P\\(([A-Za-z0-9_]+), *([A-Za-z0-9_]+)")
      list(APPEND patterns "${CMAKE_MATCH_1}/${CMAKE_MATCH_2}.*")
    elseif(line MATCHES "^TEST(_F)?\\(([A-Za-z0-9_]+),")
      list(APPEND patterns "${CMAKE_MATCH_2}.*")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES patterns)
  if(NOT patterns)
    message(FATAL_ERROR "${source}: no TEST, TEST_F or INSTANTIATE_TEST_SUITE_P at the start of a line")
  endif()
  list(JOIN patterns ":" filter)
  gtest_discover_tests(${target} TEST_FILTER "${filter}" DISCOVERY_TIMEOUT 30 PROPERTIES ${ARGN})
endfunction()

function(collwatch_compile_as_test target)
  target_compile_options(${target} PRIVATE $<$<CONFIG:RelWithDebInfo>:-O0> -Winvalid-pch)
  if(COLLWATCH_SANITIZE MATCHES "undefined")
    target_compile_options(${target} PRIVATE -fno-sanitize=undefined)
  endif()
endfunction()
