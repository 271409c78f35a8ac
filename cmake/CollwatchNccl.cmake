# Locates nccl.h (and the CUDA headers it includes) and, where present, the real
# libnccl.so.2. Defaults: /usr/local/cuda; on the GPU machines pass the pip
# nvidia-nccl folder as COLLWATCH_NCCL_ROOT.
set(COLLWATCH_CUDA_ROOT "/usr/local/cuda" CACHE PATH "CUDA toolkit root (headers only)")
set(COLLWATCH_NCCL_ROOT "${COLLWATCH_CUDA_ROOT}" CACHE PATH
    "Folder holding include/nccl.h and lib/libnccl.so.2 (e.g. site-packages/nvidia/nccl)")

find_path(COLLWATCH_NCCL_INCLUDE_DIR nccl.h
  HINTS ${COLLWATCH_NCCL_ROOT}/include NO_DEFAULT_PATH)
find_path(COLLWATCH_CUDA_INCLUDE_DIR cuda_runtime.h
  HINTS ${COLLWATCH_CUDA_ROOT}/include ${COLLWATCH_CUDA_ROOT}/targets/x86_64-linux/include)
if(NOT COLLWATCH_NCCL_INCLUDE_DIR OR NOT COLLWATCH_CUDA_INCLUDE_DIR)
  message(FATAL_ERROR "nccl.h or cuda_runtime.h not found: set COLLWATCH_NCCL_ROOT "
    "(folder with include/nccl.h) and COLLWATCH_CUDA_ROOT (CUDA toolkit root)")
endif()

# Header-only target: the NCCL API types, for code that wraps or implements NCCL.
add_library(collwatch_nccl_headers INTERFACE)
add_library(collwatch::nccl_headers ALIAS collwatch_nccl_headers)
target_include_directories(collwatch_nccl_headers SYSTEM INTERFACE
  ${COLLWATCH_NCCL_INCLUDE_DIR} ${COLLWATCH_CUDA_INCLUDE_DIR})

# NVTX v3 is header-only and ships with the toolkit.
find_path(COLLWATCH_NVTX_INCLUDE_DIR nvtx3/nvToolsExt.h HINTS ${COLLWATCH_CUDA_INCLUDE_DIR})
add_library(collwatch_nvtx_headers INTERFACE)
add_library(collwatch::nvtx_headers ALIAS collwatch_nvtx_headers)
target_include_directories(collwatch_nvtx_headers SYSTEM INTERFACE ${COLLWATCH_NVTX_INCLUDE_DIR})
target_link_libraries(collwatch_nvtx_headers INTERFACE ${CMAKE_DL_LIBS})

# The real NCCL library, where installed (used by tests that run without a GPU).
find_library(COLLWATCH_REAL_NCCL_LIBRARY NAMES libnccl.so.2 nccl
  HINTS ${COLLWATCH_NCCL_ROOT}/lib ${COLLWATCH_NCCL_ROOT}/lib64 NO_DEFAULT_PATH)
