// CUDA-mode GPU check, the streams: calls return before their peers join while the stream
// holds later work, two communicators on two streams progress independently, and revoke
// or abort release a blocked stream. Threading: single-threaded per rank.
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "tests/gpu/cpu_nccl_cuda_mode.h"

namespace collwatch::cuda_mode_check {

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

}  // namespace collwatch::cuda_mode_check
