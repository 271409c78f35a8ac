// CUDA-mode GPU check, the values: every collective and reduce op on device buffers of
// each type against host-computed expectations (integers bit-equal, floats within a
// tolerance), bfloat16, managed and pinned host memory, and host buffers.
// Threading: single-threaded per rank.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "tests/gpu/cpu_nccl_cuda_mode.h"

namespace collwatch::cuda_mode_check {

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

template void CheckCollectives<int32_t>(ncclComm_t, cudaStream_t, ncclDataType_t, const char*, bool);
template void CheckCollectives<int64_t>(ncclComm_t, cudaStream_t, ncclDataType_t, const char*, bool);
template void CheckCollectives<float>(ncclComm_t, cudaStream_t, ncclDataType_t, const char*, bool);
template void CheckCollectives<double>(ncclComm_t, cudaStream_t, ncclDataType_t, const char*, bool);

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

}  // namespace collwatch::cuda_mode_check
