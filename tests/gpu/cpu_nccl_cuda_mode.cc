// GPU check of the CPU NCCL backend's CUDA mode: N rank processes (fork+exec of itself)
// share ONE GPU through collwatch's libnccl.so.2. Checks every collective and reduce op
// on device buffers against host-computed expectations (integers bit-equal, floats within
// a tolerance), that calls return before their peers join (stream semantics), that two
// communicators on two streams progress independently, that ncclCommRevoke/Abort release
// a blocked stream, and measures all-gather / reduce-scatter bus bandwidth.
// Usage: collwatch_cpu_nccl_cuda_mode NRANKS RENDEZVOUS_DIR [FIGURES_FILE]
// Single-threaded per rank; built only with COLLWATCH_BUILD_GPU_PROGRAMS.
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/programs/rank_launch.h"

namespace {

int g_rank = -1;
int g_world = 0;
int g_failures = 0;

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

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Small values so that products of up to 8 ranks stay exact in every type checked.
double InputValue(int rank, size_t i) {
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

void Report(const char* name, bool ok) {
  if (!ok) ++g_failures;
  if (g_rank == 0 || !ok) std::printf("rank %d: %-44s %s\n", g_rank, name, ok ? "ok" : "FAILED");
  std::fflush(stdout);
}

// Every collective on device buffers of type T, checked against Expected.
template <typename T>
void CheckCollectives(ncclComm_t comm, cudaStream_t stream, ncclDataType_t type,
                      const char* type_name, bool exact) {
  const size_t count = (1 << 18) + 3;  // several 1 MiB staging chunks, not a multiple
  const size_t n = static_cast<size_t>(g_world);
  std::vector<T> input = RankInput<T>(g_rank, count * n);
  T* send = DeviceCopy(input, stream);
  T* recv = nullptr;
  CUDA(cudaMalloc(&recv, count * n * sizeof(T)));
  char name[96];

  const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  const char* op_names[] = {"sum", "prod", "max", "min", "avg"};
  for (int o = 0; o < 5; ++o) {
    NCCL(ncclAllReduce(send, recv, count, type, ops[o], comm, stream));
    const std::vector<T> got = HostCopy(recv, count, stream);
    bool ok = true;
    for (size_t i = 0; i < count && ok; ++i) {
      ok = Matches(got[i], Expected<T>(ops[o], i), exact && ops[o] != ncclAvg) ||
           (exact && ops[o] == ncclAvg &&
            got[i] == static_cast<T>(Expected<T>(ncclSum, i) / g_world));
    }
    std::snprintf(name, sizeof name, "all-reduce %s %s", op_names[o], type_name);
    Report(name, ok);
  }

  // In place, as FSDP and DDP call it.
  Upload(recv, input, count, stream);
  NCCL(ncclAllReduce(recv, recv, count, type, ncclSum, comm, stream));
  {
    const std::vector<T> got = HostCopy(recv, count, stream);
    bool ok = true;
    for (size_t i = 0; i < count && ok; ++i) ok = Matches(got[i], Expected<T>(ncclSum, i), exact);
    std::snprintf(name, sizeof name, "all-reduce in place %s", type_name);
    Report(name, ok);
  }

  NCCL(ncclAllGather(send, recv, count, type, comm, stream));
  {
    const std::vector<T> got = HostCopy(recv, count * n, stream);
    bool ok = true;
    for (size_t r = 0; r < n && ok; ++r) {
      for (size_t i = 0; i < count && ok; ++i) {
        ok = got[r * count + i] == static_cast<T>(InputValue(static_cast<int>(r), i));
      }
    }
    std::snprintf(name, sizeof name, "all-gather %s", type_name);
    Report(name, ok);
  }

  NCCL(ncclReduceScatter(send, recv, count, type, ncclSum, comm, stream));
  {
    const std::vector<T> got = HostCopy(recv, count, stream);
    bool ok = true;
    for (size_t i = 0; i < count && ok; ++i) {
      ok = Matches(got[i], Expected<T>(ncclSum, static_cast<size_t>(g_rank) * count + i), exact);
    }
    std::snprintf(name, sizeof name, "reduce-scatter sum %s", type_name);
    Report(name, ok);
  }

  const int root = g_world - 1;
  CUDA(cudaMemsetAsync(recv, 0, count * sizeof(T), stream));
  NCCL(ncclBroadcast(send, recv, count, type, 1 % g_world, comm, stream));
  {
    const std::vector<T> got = HostCopy(recv, count, stream);
    bool ok = true;
    for (size_t i = 0; i < count && ok; ++i)
      ok = got[i] == static_cast<T>(InputValue(1 % g_world, i));
    std::snprintf(name, sizeof name, "broadcast from 1 %s", type_name);
    Report(name, ok);
  }

  // Reduce: only the root's output is written; the others keep what they had.
  std::vector<T> sentinel(count, static_cast<T>(-3));
  Upload(recv, sentinel, count, stream);
  NCCL(ncclReduce(send, recv, count, type, ncclMax, root, comm, stream));
  {
    const std::vector<T> got = HostCopy(recv, count, stream);
    bool ok = true;
    for (size_t i = 0; i < count && ok; ++i) {
      ok = g_rank == root ? Matches(got[i], Expected<T>(ncclMax, i), exact) : got[i] == sentinel[i];
    }
    std::snprintf(name, sizeof name, "reduce max to %d %s", root, type_name);
    Report(name, ok);
  }

  // All-to-all as PyTorch does it: a group of sends and receives; then ncclAlltoAll.
  for (int variant = 0; variant < 2; ++variant) {
    CUDA(cudaMemsetAsync(recv, 0, count * n * sizeof(T), stream));
    if (variant == 0) {
      NCCL(ncclGroupStart());
      for (int peer = 0; peer < g_world; ++peer) {
        NCCL(ncclSend(send + peer * count, count, type, peer, comm, stream));
        NCCL(ncclRecv(recv + peer * count, count, type, peer, comm, stream));
      }
      NCCL(ncclGroupEnd());
    } else {
      NCCL(ncclAlltoAll(send, recv, count, type, comm, stream));
    }
    const std::vector<T> got = HostCopy(recv, count * n, stream);
    bool ok = true;
    for (size_t p = 0; p < n && ok; ++p) {
      for (size_t i = 0; i < count && ok; ++i) {
        ok = got[p * count + i] ==
             static_cast<T>(
                 InputValue(static_cast<int>(p), static_cast<size_t>(g_rank) * count + i));
      }
    }
    std::snprintf(name, sizeof name, "%s %s",
                  variant == 0 ? "all-to-all by grouped send/recv" : "ncclAlltoAll", type_name);
    Report(name, ok);
  }

  // A ring of sends and receives.
  {
    const int next = (g_rank + 1) % g_world;
    const int prev = (g_rank + g_world - 1) % g_world;
    NCCL(ncclGroupStart());
    NCCL(ncclSend(send, count, type, next, comm, stream));
    NCCL(ncclRecv(recv, count, type, prev, comm, stream));
    NCCL(ncclGroupEnd());
    const std::vector<T> got = HostCopy(recv, count, stream);
    bool ok = true;
    for (size_t i = 0; i < count && ok; ++i) ok = got[i] == static_cast<T>(InputValue(prev, i));
    std::snprintf(name, sizeof name, "send/recv ring %s", type_name);
    Report(name, ok);
  }
  CUDA(cudaFree(send));
  CUDA(cudaFree(recv));
}

// bfloat16 (FSDP's usual reduce type): reduce-scatter sum and all-gather, bit-exact on
// values whose sums bf16 holds exactly.
void CheckBfloat16(ncclComm_t comm, cudaStream_t stream) {
  auto to_bf16 = [](double v) {
    const float f = static_cast<float>(v);
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return static_cast<uint16_t>(bits >> 16);  // exact: the values have few mantissa bits
  };
  const size_t count = (1 << 17) + 1;
  const size_t n = static_cast<size_t>(g_world);
  std::vector<uint16_t> input(count * n);
  for (size_t i = 0; i < input.size(); ++i) input[i] = to_bf16(InputValue(g_rank, i));
  uint16_t* send = DeviceCopy(input, stream);
  uint16_t* recv = nullptr;
  CUDA(cudaMalloc(&recv, count * n * sizeof(uint16_t)));
  NCCL(ncclReduceScatter(send, recv, count, ncclBfloat16, ncclSum, comm, stream));
  std::vector<uint16_t> got = HostCopy(recv, count, stream);
  bool ok = true;
  for (size_t i = 0; i < count && ok; ++i) {
    ok = got[i] == to_bf16(Expected<float>(ncclSum, static_cast<size_t>(g_rank) * count + i));
  }
  Report("reduce-scatter sum bfloat16", ok);
  NCCL(ncclAllGather(send, recv, count, ncclBfloat16, comm, stream));
  got = HostCopy(recv, count * n, stream);
  ok = true;
  for (size_t r = 0; r < n && ok; ++r) {
    for (size_t i = 0; i < count && ok; ++i) {
      ok = got[r * count + i] == to_bf16(InputValue(static_cast<int>(r), i));
    }
  }
  Report("all-gather bfloat16", ok);
  CUDA(cudaFree(send));
  CUDA(cudaFree(recv));
}

// The call returns before the peers join; the stream holds later work until they do.
void CheckStreamSemantics(ncclComm_t comm, cudaStream_t stream) {
  constexpr size_t kCount = 1024;
  std::vector<int32_t> ones(kCount, 1);
  int32_t* buffer = DeviceCopy(ones, stream);
  if (g_rank == 0) usleep(300 * 1000);  // the others wait for rank 0
  const double start = Seconds();
  NCCL(ncclAllReduce(buffer, buffer, kCount, ncclInt32, ncclSum, comm, stream));
  const double call_seconds = Seconds() - start;
  const bool pending = cudaStreamQuery(stream) == cudaErrorNotReady;
  const std::vector<int32_t> got = HostCopy(buffer, kCount, stream);
  bool ok = got[0] == g_world && got[kCount - 1] == g_world;
  if (g_rank != 0) ok = ok && pending && call_seconds < 0.1;
  Report("call returns at once, stream waits for peers", ok);
  CUDA(cudaFree(buffer));
}

// Managed and pinned host memory are CUDA memory too (stream-ordered); neither can be
// shared through CUDA IPC, so all-gather and reduce-scatter take the staged fallback.
void CheckManagedAndPinned(ncclComm_t comm, cudaStream_t stream) {
  const size_t count = 1 << 16;
  const size_t n = static_cast<size_t>(g_world);
  for (int kind = 0; kind < 2; ++kind) {
    float* send = nullptr;
    float* recv = nullptr;
    if (kind == 0) {
      CUDA(cudaMallocManaged(&send, count * n * sizeof(float)));
      CUDA(cudaMallocManaged(&recv, count * n * sizeof(float)));
    } else {
      CUDA(cudaMallocHost(&send, count * n * sizeof(float)));
      CUDA(cudaMallocHost(&recv, count * n * sizeof(float)));
    }
    for (size_t i = 0; i < count * n; ++i) send[i] = static_cast<float>(InputValue(g_rank, i));
    NCCL(ncclAllGather(send, recv, count, ncclFloat32, comm, stream));
    CUDA(cudaStreamSynchronize(stream));
    bool ok = true;
    for (size_t r = 0; r < n && ok; ++r) {
      for (size_t i = 0; i < count && ok; ++i) {
        ok = recv[r * count + i] == static_cast<float>(InputValue(static_cast<int>(r), i));
      }
    }
    NCCL(ncclReduceScatter(send, recv, count, ncclFloat32, ncclSum, comm, stream));
    CUDA(cudaStreamSynchronize(stream));
    for (size_t i = 0; i < count && ok; ++i) {
      ok = Matches(recv[i], Expected<float>(ncclSum, static_cast<size_t>(g_rank) * count + i),
                   false);
    }
    Report(kind == 0 ? "managed buffers (all-gather, reduce-scatter)"
                     : "pinned host buffers (all-gather, reduce-scatter)",
           ok);
    if (kind == 0) {
      CUDA(cudaFree(send));
      CUDA(cudaFree(recv));
    } else {
      CUDA(cudaFreeHost(send));
      CUDA(cudaFreeHost(recv));
    }
  }
}

// Host buffers still work (synchronously), also after device work on the communicator.
void CheckHostBuffers(ncclComm_t comm, cudaStream_t stream) {
  std::vector<float> host(4096, static_cast<float>(g_rank + 1));
  NCCL(ncclAllReduce(host.data(), host.data(), host.size(), ncclFloat32, ncclSum, comm, stream));
  Report("host buffers", host[0] == static_cast<float>(g_world * (g_world + 1) / 2));
}

// Two communicators on two streams: rank 0 joins B's collective first and A's only after
// B completed; the others issued A first. Progress that is not independent deadlocks.
void CheckIndependentStreams(ncclComm_t comm_a, ncclComm_t comm_b) {
  cudaStream_t stream_a, stream_b;
  CUDA(cudaStreamCreateWithFlags(&stream_a, cudaStreamNonBlocking));
  CUDA(cudaStreamCreateWithFlags(&stream_b, cudaStreamNonBlocking));
  constexpr size_t kCount = 1 << 16;
  std::vector<float> ones(kCount, 1.0f);
  float* a = DeviceCopy(ones, stream_a);
  float* b = DeviceCopy(ones, stream_b);
  if (g_rank != 0) NCCL(ncclAllReduce(a, a, kCount, ncclFloat32, ncclSum, comm_a, stream_a));
  NCCL(ncclAllReduce(b, b, kCount, ncclFloat32, ncclSum, comm_b, stream_b));
  CUDA(cudaStreamSynchronize(stream_b));
  const bool a_pending = g_rank == 0 || cudaStreamQuery(stream_a) == cudaErrorNotReady;
  if (g_rank == 0) {
    usleep(300 * 1000);  // the others look at stream A meanwhile
    NCCL(ncclAllReduce(a, a, kCount, ncclFloat32, ncclSum, comm_a, stream_a));
  }
  const std::vector<float> got_a = HostCopy(a, kCount, stream_a);
  const std::vector<float> got_b = HostCopy(b, kCount, stream_b);
  Report("two communicators on two streams", a_pending && got_a[0] == static_cast<float>(g_world) &&
                                                 got_b[kCount - 1] == static_cast<float>(g_world));
  CUDA(cudaFree(a));
  CUDA(cudaFree(b));
  CUDA(cudaStreamDestroy(stream_a));
  CUDA(cudaStreamDestroy(stream_b));
}

// Rank 0 never joins: revoke (then abort) releases the others' streams with an error.
void CheckAbortReleasesStream(ncclComm_t parent, bool revoke_first) {
  ncclComm_t comm = nullptr;
  NCCL(ncclCommSplit(parent, 0, g_rank, &comm, nullptr));
  cudaStream_t stream;
  CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float* buffer = nullptr;
  CUDA(cudaMalloc(&buffer, 1024 * sizeof(float)));
  bool ok = true;
  if (g_rank != 0) {
    NCCL(ncclAllReduce(buffer, buffer, 1024, ncclFloat32, ncclSum, comm, stream));
    usleep(200 * 1000);
    ncclResult_t async = ncclInternalError;
    NCCL(ncclCommGetAsyncError(comm, &async));
    ok = async == ncclSuccess && cudaStreamQuery(stream) == cudaErrorNotReady;  // still blocked
    if (revoke_first) {
      NCCL(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
      const double start = Seconds();
      while (cudaStreamQuery(stream) == cudaErrorNotReady && Seconds() - start < 10) usleep(1000);
      NCCL(ncclCommGetAsyncError(comm, &async));
      ok = ok && async != ncclSuccess;
    }
  }
  NCCL(ncclCommAbort(comm));
  const double start = Seconds();
  while (cudaStreamQuery(stream) == cudaErrorNotReady && Seconds() - start < 10) usleep(1000);
  ok = ok && cudaStreamQuery(stream) == cudaSuccess;
  Report(revoke_first ? "revoke releases a blocked stream (async error)"
                      : "abort releases a blocked stream",
         ok);
  CUDA(cudaFree(buffer));
  CUDA(cudaStreamDestroy(stream));
}

// The first column of the figures: how the ranks shared the GPU (the script says).
const char* FiguresLabel() {
  const char* label = std::getenv("CUDA_MODE_LABEL");
  return label != nullptr ? label : "time-sliced";
}

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

int Run(const std::string& dir, const char* figures_path) {
  CUDA(cudaSetDevice(0));  // every rank on the one GPU
  const ncclUniqueId id = collwatch::programs::ExchangeUniqueId(g_rank, dir);
  ncclComm_t comm = nullptr;
  NCCL(ncclCommInitRank(&comm, g_world, id, g_rank));
  cudaStream_t stream;
  CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  CheckCollectives<int32_t>(comm, stream, ncclInt32, "int32", true);
  CheckStreamSemantics(comm, stream);  // after the first device call has set the mode up
  CheckCollectives<int64_t>(comm, stream, ncclInt64, "int64", true);
  CheckCollectives<float>(comm, stream, ncclFloat32, "float32", false);
  CheckCollectives<double>(comm, stream, ncclFloat64, "float64", false);
  CheckBfloat16(comm, stream);
  CheckManagedAndPinned(comm, stream);
  CheckHostBuffers(comm, stream);
  ncclComm_t second = nullptr;
  NCCL(ncclCommSplit(comm, 0, g_rank, &second, nullptr));
  CheckIndependentStreams(comm, second);
  CheckAbortReleasesStream(comm, true);
  CheckAbortReleasesStream(comm, false);
  FILE* figures = nullptr;
  if (figures_path != nullptr && g_rank == 0) figures = std::fopen(figures_path, "a");
  MeasureBandwidth(comm, stream, figures);
  if (figures != nullptr) std::fclose(figures);
  NCCL(ncclCommFinalize(second));
  NCCL(ncclCommDestroy(second));
  NCCL(ncclCommFinalize(comm));
  NCCL(ncclCommDestroy(comm));
  std::printf("rank %d: %s (%d failures)\n", g_rank, g_failures == 0 ? "all ok" : "FAILED",
              g_failures);
  return g_failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s NRANKS RENDEZVOUS_DIR [FIGURES_FILE]\n", argv[0]);
    return 2;
  }
  g_world = std::atoi(argv[1]);
  const char* rank = std::getenv("RANK");
  if (rank != nullptr) {
    g_rank = std::atoi(rank);
    return Run(argv[2], argc > 3 ? argv[3] : nullptr);
  }
  return collwatch::programs::LaunchRanks(g_world, argv);
}
