// CUDA-mode GPU check, the figures: all-gather and reduce-scatter bus bandwidth (as
// nccl-tests computes it) and small all-reduce latency, with N ranks on the one GPU.
// Threading: single-threaded per rank.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "tests/gpu/cpu_nccl_cuda_mode.h"

namespace collwatch::cuda_mode_check {
namespace {

// The first column of the figures: how the ranks shared the GPU (the script says).
const char* FiguresLabel() {
  const char* label = std::getenv("CUDA_MODE_LABEL");
  return label != nullptr ? label : "time-sliced";
}
}  // namespace

// nccl-tests' bus bandwidth: size is the larger buffer (all-gather output, reduce-scatter
// input); busbw = size / time * (n-1)/n.
void MeasureBandwidth(ncclComm_t comm, cudaStream_t stream, FILE* figures) {
  const size_t sizes[] = {1u << 20, 16u << 20, 64u << 20};
  uint8_t* big = nullptr;
  uint8_t* small = nullptr;
  CUDA(cudaMalloc(&big, 64u << 20));
  CUDA(cudaMalloc(&small, 64u << 20));
  CUDA(cudaMemsetAsync(big, 1, 64u << 20, stream));
  CUDA(cudaMemsetAsync(small, 1, 64u << 20, stream));
  cudaEvent_t begin, end;
  CUDA(cudaEventCreate(&begin));
  CUDA(cudaEventCreate(&end));
  for (int kind = 0; kind < 2; ++kind) {
    for (size_t size : sizes) {
      const size_t per_rank = size / static_cast<size_t>(g_world) / sizeof(float);
      auto run = [&] {
        if (kind == 0) {
          NCCL(ncclAllGather(small, big, per_rank, ncclFloat32, comm, stream));
        } else {
          NCCL(ncclReduceScatter(big, small, per_rank, ncclFloat32, ncclSum, comm, stream));
        }
      };
      // Warm-up as long as the measurement: the staging pool then holds every block the
      // operations in flight need, and no pinned allocation is timed.
      const int iterations = size >= (64u << 20) ? 10 : 20;
      for (int i = 0; i < iterations; ++i) run();
      CUDA(cudaStreamSynchronize(stream));
      CUDA(cudaEventRecord(begin, stream));
      for (int i = 0; i < iterations; ++i) run();
      CUDA(cudaEventRecord(end, stream));
      CUDA(cudaEventSynchronize(end));
      float ms = 0;
      CUDA(cudaEventElapsedTime(&ms, begin, end));
      const double seconds = ms / 1e3 / iterations;
      const double busbw = static_cast<double>(size) / seconds * (g_world - 1) / g_world / 1e9;
      if (g_rank == 0) {
        const char* name = kind == 0 ? "all-gather" : "reduce-scatter";
        std::printf("%s %3zu MiB, %d ranks on one GPU: %8.1f us  busbw %6.2f GB/s\n", name,
                    size >> 20, g_world, seconds * 1e6, busbw);
        if (figures != nullptr) {
          std::fprintf(figures, "%s,%s,%zu,%d,%.1f,%.3f\n", FiguresLabel(), name, size, g_world,
                       seconds * 1e6, busbw);
        }
      }
    }
  }
  // Small-message latency: 1000 all-reduces of one float, back to back.
  float* one = reinterpret_cast<float*>(small);
  for (int i = 0; i < 1000; ++i)
    NCCL(ncclAllReduce(one, one, 1, ncclFloat32, ncclSum, comm, stream));
  CUDA(cudaStreamSynchronize(stream));
  const double start = Seconds();
  for (int i = 0; i < 1000; ++i)
    NCCL(ncclAllReduce(one, one, 1, ncclFloat32, ncclSum, comm, stream));
  CUDA(cudaStreamSynchronize(stream));
  const double per_op_us = (Seconds() - start) / 1000 * 1e6;
  if (g_rank == 0) {
    std::printf("all-reduce 4 B, %d ranks on one GPU: %.1f us per operation\n", g_world, per_op_us);
    if (figures != nullptr) {
      std::fprintf(figures, "%s,all-reduce,4,%d,%.1f,\n", FiguresLabel(), g_world, per_op_us);
    }
  }
  CUDA(cudaFree(big));
  CUDA(cudaFree(small));
}
}  // namespace collwatch::cuda_mode_check
