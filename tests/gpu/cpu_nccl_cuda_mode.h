// What the parts of the CUDA-mode GPU check share (cpu_nccl_cuda_mode.cc: ranks, order of
// the checks; _results.cc: values of every collective and buffer kind; _streams.cc: stream
// semantics, independent streams, abort; _bandwidth.cc: the figures): this rank, the
// failure count, the fatal checks, the inputs and their expected reductions, and buffer
// copies on the collective's own stream. Threading: single-threaded per rank.
#ifndef COLLWATCH_TESTS_GPU_CPU_NCCL_CUDA_MODE_H_
#define COLLWATCH_TESTS_GPU_CPU_NCCL_CUDA_MODE_H_

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace collwatch::cuda_mode_check {

inline int g_rank = -1;
inline int g_world = 0;
inline int g_failures = 0;

#define REQUIRE(what, ok)                                                              \
  do {                                                                                 \
    if (!(ok)) {                                                                       \
      std::fprintf(stderr, "rank %d: %s failed at line %d\n", g_rank, what, __LINE__); \
      std::exit(10);                                                                   \
    }                                                                                  \
  } while (0)
#define NCCL(call)                                                                        \
  do {                                                                                    \
    const ncclResult_t nccl_result = (call);                                              \
    if (nccl_result != ncclSuccess) {                                                     \
      std::fprintf(stderr, "rank %d: %s -> %s (%s) at line %d\n", g_rank, #call,          \
                   ncclGetErrorString(nccl_result), ncclGetLastError(nullptr), __LINE__); \
      std::exit(11);                                                                      \
    }                                                                                     \
  } while (0)
#define CUDA(call) REQUIRE(#call, (call) == cudaSuccess)

inline double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Small values so that products of up to 8 ranks stay exact in every type checked.
inline double InputValue(int rank, size_t i) {
  return static_cast<double>((rank * 3 + static_cast<int>(i % 7)) % 4 + 1) +
         (i % 2 == 0 ? 0.0 : 0.25);
}

template <typename T>
std::vector<T> RankInput(int rank, size_t count) {
  std::vector<T> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<T>(InputValue(rank, i));
  return v;
}

template <typename T>
T Combine(ncclRedOp_t op, T a, T b) {
  switch (op) {
    case ncclProd:
      return static_cast<T>(a * b);
    case ncclMax:
      return a > b ? a : b;
    case ncclMin:
      return a < b ? a : b;
    default:
      return static_cast<T>(a + b);
  }
}

// Element i reduced over ranks 0..n-1 as NCCL defines the op (ncclAvg: integer sum then
// divide; floating sum of inputs scaled by 1/n).
template <typename T>
double Expected(ncclRedOp_t op, size_t i) {
  T acc = static_cast<T>(InputValue(0, i));
  for (int r = 1; r < g_world; ++r) acc = Combine<T>(op, acc, static_cast<T>(InputValue(r, i)));
  if (op == ncclAvg) return static_cast<double>(acc) / g_world;
  return static_cast<double>(acc);
}

template <typename T>
bool Matches(T got, double want, bool exact) {
  if (exact) return static_cast<double>(got) == want;
  return std::fabs(static_cast<double>(got) - want) <= 1e-5 * (1.0 + std::fabs(want));
}

// A pageable cudaMemcpy may return before its DMA has landed, and a non-blocking stream
// does not wait for the legacy stream: set buffers up on the collective's own stream.
template <typename T>
void Upload(T* device, const std::vector<T>& host, size_t count, cudaStream_t stream) {
  CUDA(cudaMemcpyAsync(device, host.data(), count * sizeof(T), cudaMemcpyHostToDevice, stream));
  CUDA(cudaStreamSynchronize(stream));
}

template <typename T>
T* DeviceCopy(const std::vector<T>& host, cudaStream_t stream) {
  T* device = nullptr;
  CUDA(cudaMalloc(&device, host.size() * sizeof(T) + 1));
  Upload(device, host, host.size(), stream);
  return device;
}

template <typename T>
std::vector<T> HostCopy(const T* device, size_t count, cudaStream_t stream) {
  std::vector<T> host(count);
  CUDA(cudaStreamSynchronize(stream));
  CUDA(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

inline void Report(const char* name, bool ok) {
  if (!ok) ++g_failures;
  if (g_rank == 0 || !ok) std::printf("rank %d: %-44s %s\n", g_rank, name, ok ? "ok" : "FAILED");
  std::fflush(stdout);
}
// The checks, in the order Run calls them.

// Every collective on device buffers of type T (int32_t, int64_t, float, double), checked
// against Expected.
template <typename T>
void CheckCollectives(ncclComm_t comm, cudaStream_t stream, ncclDataType_t type,
                      const char* type_name, bool exact);
void CheckBfloat16(ncclComm_t comm, cudaStream_t stream);
void CheckStreamSemantics(ncclComm_t comm, cudaStream_t stream);
void CheckManagedAndPinned(ncclComm_t comm, cudaStream_t stream);
void CheckHostBuffers(ncclComm_t comm, cudaStream_t stream);
void CheckIndependentStreams(ncclComm_t comm_a, ncclComm_t comm_b);
void CheckAbortReleasesStream(ncclComm_t parent, bool revoke_first);
// Bus bandwidth of all-gather and reduce-scatter, and small all-reduce latency; rank 0
// prints them and appends them to `figures` when given.
void MeasureBandwidth(ncclComm_t comm, cudaStream_t stream, FILE* figures);

}  // namespace collwatch::cuda_mode_check

#endif  // COLLWATCH_TESTS_GPU_CPU_NCCL_CUDA_MODE_H_
