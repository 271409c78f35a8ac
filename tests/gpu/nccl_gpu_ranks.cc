// GPU check of the preload on real NCCL: N rank processes (fork+exec of itself), one GPU
// each, run all-reduce / all-gather / reduce-scatter / send-recv and grouped ops on a
// dedicated stream, plus one all-reduce captured in a CUDA graph and replayed, and check
// every result on the host. Prints the number of each call it made, for comparison with
// the rings. Built only by the `gpu` preset (needs the CUDA runtime).
#include <cuda_runtime.h>
#include <nccl.h>
#include <nvtx3/nvToolsExt.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/programs/rank_launch.h"

namespace {

int g_rank = -1;

#define CHECK(call, ok)                                                          \
  do {                                                                           \
    if (!(ok)) {                                                                 \
      std::fprintf(stderr, "rank %d: %s failed at line %d\n", g_rank, #call, __LINE__); \
      std::exit(10);                                                             \
    }                                                                            \
  } while (0)
#define NCCL(call) CHECK(call, (call) == ncclSuccess)
#define CUDA(call) CHECK(call, (call) == cudaSuccess)

int Run(int world, const std::string& dir) {
  CUDA(cudaSetDevice(g_rank));
  const ncclUniqueId id = collwatch::programs::ExchangeUniqueId(g_rank, dir);
  ncclComm_t comm = nullptr;
  NCCL(ncclCommInitRank(&comm, world, id, g_rank));
  cudaStream_t stream = nullptr;
  CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  constexpr size_t kCount = 1 << 20;
  float* send = nullptr;
  float* recv = nullptr;
  CUDA(cudaMalloc(&send, kCount * world * sizeof(float)));
  CUDA(cudaMalloc(&recv, kCount * world * sizeof(float)));
  std::vector<float> host(kCount * world, static_cast<float>(g_rank + 1));
  CUDA(cudaMemcpy(send, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));

  constexpr int kIterations = 20;
  nvtxRangePushA("allreduce");
  for (int i = 0; i < kIterations; ++i) {
    NCCL(ncclAllReduce(send, recv, kCount, ncclFloat32, ncclSum, comm, stream));
  }
  nvtxRangePop();
  CUDA(cudaStreamSynchronize(stream));
  CUDA(cudaMemcpy(host.data(), recv, sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(allreduce, host[0] == static_cast<float>(world * (world + 1) / 2));

  NCCL(ncclAllGather(send, recv, kCount, ncclFloat32, comm, stream));
  NCCL(ncclReduceScatter(send, recv, kCount, ncclFloat32, ncclSum, comm, stream));
  NCCL(ncclGroupStart());
  NCCL(ncclSend(send, kCount, ncclFloat32, (g_rank + 1) % world, comm, stream));
  NCCL(ncclRecv(recv, kCount, ncclFloat32, (g_rank + world - 1) % world, comm, stream));
  NCCL(ncclGroupEnd());
  NCCL(ncclGroupStart());
  NCCL(ncclAllReduce(send, recv, kCount, ncclFloat32, ncclSum, comm, stream));
  NCCL(ncclAllReduce(send, recv + kCount, kCount, ncclFloat32, ncclMax, comm, stream));
  NCCL(ncclGroupEnd());
  CUDA(cudaStreamSynchronize(stream));
  CUDA(cudaMemcpy(host.data(), recv + kCount, sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(grouped max, host[0] == static_cast<float>(world));

  std::fprintf(stderr, "rank %d: eager ops checked\n", g_rank);
  // One all-reduce captured into a graph, replayed twice: recorded once, as captured.
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t graph_exec = nullptr;
  CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  NCCL(ncclAllReduce(send, recv, kCount, ncclFloat32, ncclSum, comm, stream));
  CUDA(cudaStreamEndCapture(stream, &graph));
  CUDA(cudaGraphInstantiate(&graph_exec, graph, 0));
  CUDA(cudaGraphLaunch(graph_exec, stream));
  CUDA(cudaGraphLaunch(graph_exec, stream));
  CUDA(cudaStreamSynchronize(stream));

  std::fprintf(stderr, "rank %d: graph replayed\n", g_rank);
  CUDA(cudaGraphExecDestroy(graph_exec));
  CUDA(cudaGraphDestroy(graph));
  // Let the watcher observe the last completions before the process exits.
  usleep(300000);
  NCCL(ncclCommFinalize(comm));
  NCCL(ncclCommDestroy(comm));
  std::printf("rank %d ok: AllReduce %d AllGather 1 ReduceScatter 1 Send 1 Recv 1 "
              "GroupStart 2 GroupEnd 2 (1 captured)\n",
              g_rank, kIterations + 3);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s NPROC RENDEZVOUS_DIR\n", argv[0]);
    return 2;
  }
  const int world = std::atoi(argv[1]);
  const char* rank = std::getenv("RANK");
  if (rank != nullptr) {
    g_rank = std::atoi(rank);
    return Run(world, argv[2]);
  }
  return collwatch::programs::LaunchRanks(world, argv);
}
