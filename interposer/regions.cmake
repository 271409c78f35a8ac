# NVTX regions of libcollwatch.so (intern table, per-thread range stack, NVTX injection
# entry points) and their tests. Included from interposer/CMakeLists.txt; the object
# library is linked into libcollwatch.so, whose version script exports the entry points.
set(COLLWATCH_REGIONS_DIR ${CMAKE_CURRENT_LIST_DIR})
cmake_path(GET COLLWATCH_REGIONS_DIR PARENT_PATH COLLWATCH_REGIONS_ROOT)
find_package(Threads REQUIRED)

set(COLLWATCH_REGIONS_SOURCES
  ${COLLWATCH_REGIONS_DIR}/regions.cc
  ${COLLWATCH_REGIONS_DIR}/nvtx_injection.cc
  ${COLLWATCH_REGIONS_DIR}/nvtx_chain.cc)

add_library(collwatch_regions_obj OBJECT ${COLLWATCH_REGIONS_SOURCES})
target_include_directories(collwatch_regions_obj PUBLIC ${COLLWATCH_REGIONS_ROOT})
target_link_libraries(collwatch_regions_obj PRIVATE collwatch::nvtx_headers)
target_compile_options(collwatch_regions_obj PRIVATE -fno-exceptions)
# Built for link-time optimisation with the preload (COLLWATCH_PRELOAD_LTO, set by
# interposer/CMakeLists.txt before including this file).
set_target_properties(collwatch_regions_obj PROPERTIES
  INTERPROCEDURAL_OPTIMIZATION ${COLLWATCH_PRELOAD_LTO})
# As in libcollwatch.so: only the explicitly exported entry points are visible.
set_target_properties(collwatch_regions_obj PROPERTIES
  CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
collwatch_set_warnings(collwatch_regions_obj)

if(COLLWATCH_BUILD_TESTS OR COLLWATCH_BUILD_BENCHMARKS)
  # The injection alone, built exactly like its part of libcollwatch.so: loaded by NVTX
  # in the benchmark, and checked for its exported names by the tests.
  add_library(collwatch_regions_inject SHARED $<TARGET_OBJECTS:collwatch_regions_obj>)
  target_link_options(collwatch_regions_inject PRIVATE -Wl,--no-undefined)
  target_link_libraries(collwatch_regions_inject PRIVATE Threads::Threads)
endif()

if(COLLWATCH_BUILD_TESTS)
  # GoogleTest is included once, at the top (a second include would undo the scaled
  # gtest_discover_tests of cmake/CollwatchTestTime.cmake).
  add_executable(regions_test ${COLLWATCH_REGIONS_DIR}/regions_test.cc)
  target_link_libraries(regions_test PRIVATE collwatch_regions_obj GTest::gtest_main
    Threads::Threads)
  collwatch_set_warnings(regions_test)
  gtest_discover_tests(regions_test)

  # The same sources with default visibility, so that the test program can link them and
  # read the region state that NVTX drives through the injection protocol. NVTX loads it
  # by path (dlopen returns the copy already mapped), exactly as with the preload.
  add_library(collwatch_regions_testlib SHARED ${COLLWATCH_REGIONS_SOURCES})
  target_include_directories(collwatch_regions_testlib PUBLIC ${COLLWATCH_REGIONS_ROOT})
  target_link_libraries(collwatch_regions_testlib PRIVATE collwatch::nvtx_headers)
  collwatch_set_warnings(collwatch_regions_testlib)

  # nvtx_injection_test: NVTX_INJECTION64_PATH names the library (set by the test).
  # nvtx_preinject_test: same source, no variable; NVTX finds the preloaded entry point
  # through InitializeInjectionNvtx2Preinject (needs NVTX_SUPPORT_ALREADY_INJECTED_LIBRARY).
  foreach(variant IN ITEMS injection preinject)
    set(target nvtx_${variant}_test)
    add_executable(${target} ${COLLWATCH_REGIONS_DIR}/nvtx_injection_test.cc)
    target_link_libraries(${target} PRIVATE collwatch_regions_testlib collwatch::nvtx_headers
      GTest::gtest_main Threads::Threads)
    target_compile_definitions(${target} PRIVATE
      COLLWATCH_TEST_INJECTION_LIBRARY="$<TARGET_FILE:collwatch_regions_testlib>"
      COLLWATCH_TEST_EXPORTS_LIBRARY="$<TARGET_FILE:collwatch_regions_inject>")
    add_dependencies(${target} collwatch_regions_inject)
    collwatch_set_warnings(${target})
    gtest_discover_tests(${target} TEST_PREFIX "${variant}:")
  endforeach()
  target_compile_definitions(nvtx_preinject_test PRIVATE
    NVTX_SUPPORT_ALREADY_INJECTED_LIBRARY=1 COLLWATCH_TEST_PREINJECT=1)
endif()
