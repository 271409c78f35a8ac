# Cost of NVTX ranges with and without the collwatch injection (interposer/regions.cmake
# defines the libraries). Included from bench/CMakeLists.txt. Run it twice:
#   regions_benchmark            NVTX without a tool: every call a no-op
#   regions_benchmark --inject   NVTX_INJECTION64_PATH = libcollwatch_regions_inject.so
if(NOT TARGET benchmark::benchmark)
  find_package(benchmark REQUIRED)
endif()

add_executable(regions_benchmark ${CMAKE_CURRENT_LIST_DIR}/regions_benchmark.cc)
target_link_libraries(regions_benchmark PRIVATE collwatch_regions_obj collwatch::nvtx_headers
  benchmark::benchmark)
target_compile_definitions(regions_benchmark PRIVATE
  COLLWATCH_INJECTION_LIBRARY="$<TARGET_FILE:collwatch_regions_inject>")
add_dependencies(regions_benchmark collwatch_regions_inject)
collwatch_set_warnings(regions_benchmark)
