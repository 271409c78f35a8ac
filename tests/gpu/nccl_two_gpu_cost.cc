// Host time per small NCCL call on two GPUs, for the profiler-plugin figures
// (scripts/gpu_profiler_plugin.sh runs it plain, with the preload, with the plugin, with
// both and under `collwatch run`, interleaved). Two layouts:
//   per-gpu: two processes, one rank each (the parent makes the unique id and forks before
//            touching CUDA), each timing its own calls;
//   one-process: one process drives both GPUs (ncclCommInitAll), each call a group of the
//            two ranks' operations, as nccl-tests does.
// Ops: a 1,024-float all-reduce and reduce-scatter. Prints per op (rank 0's, per-gpu; per
// group of two, one-process):
//   OP_ns MEDIAN          host time per call over long back-to-back runs (bound by the
//                         GPUs if the launch queue fills; on 2 x H100 it did not)
//   OP_burst_ns P50 p10 P10 p90 P90
//                         host time per call in bursts of 16 the GPUs keep up with, each
//                         burst then synchronised (untimed): what a call costs the host
// Then where the timing thread ran and which threads competed (`placement`, `thread` lines);
// COLLWATCH_BENCH_CPUS="a,b" pins rank i's (one-process: the) timing thread to the i-th CPU.
// Last, per repetition: the all-reduce's host time per call and the time of a fixed CPU
// chain run right after it (`repetition R all_reduce_ns X cpu_chain_ns Y`).
// Usage: collwatch_nccl_two_gpu_cost per-gpu|one-process [CALLS] [REPETITIONS]
#include <cuda_runtime.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "tests/gpu/host_timing.h"

namespace {

using collwatch::gpu::PinFromEnvironment;
using collwatch::gpu::Spread;
using collwatch::gpu::ThreadUse;
using collwatch::gpu::TimePerCall;
using collwatch::gpu::TimePerCallInBursts;

constexpr size_t kElements = 1024;
constexpr int kBursts = 2000;
constexpr int kBurstSize = 16;

struct Rank {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* send = nullptr;
  float* recv = nullptr;
};

void Setup(Rank* rank, int device) {
  CHECK(cudaSetDevice(device) == cudaSuccess);
  CHECK(cudaStreamCreateWithFlags(&rank->stream, cudaStreamNonBlocking) == cudaSuccess);
  CHECK(cudaMalloc(&rank->send, kElements * sizeof(float)) == cudaSuccess);
  CHECK(cudaMalloc(&rank->recv, kElements * sizeof(float)) == cudaSuccess);
}

void AllReduce(const Rank& rank) {
  CHECK(ncclAllReduce(rank.send, rank.recv, kElements, ncclFloat32, ncclSum, rank.comm, rank.stream) == ncclSuccess);
}
void ReduceScatter(const Rank& rank) {
  CHECK(ncclReduceScatter(rank.send, rank.recv, kElements / 2, ncclFloat32, ncclSum, rank.comm, rank.stream) ==
        ncclSuccess);
}

void Measure(int calls, int repetitions, const std::function<void(void (*)(const Rank&))>& issue,
             const std::function<void()>& drain, bool print) {
  const ThreadUse use;
  for (int i = 0; i < 500; ++i) issue(AllReduce);  // warm up NCCL's and the driver's first calls
  drain();
  const double all_reduce = TimePerCall(calls, repetitions, [&] { issue(AllReduce); }, drain);
  const double reduce_scatter = TimePerCall(calls, repetitions, [&] { issue(ReduceScatter); }, drain);
  const Spread all_reduce_burst = TimePerCallInBursts(kBursts, kBurstSize, [&] { issue(AllReduce); }, drain);
  const Spread reduce_scatter_burst = TimePerCallInBursts(kBursts, kBurstSize, [&] { issue(ReduceScatter); }, drain);
  // Each repetition's per-call time beside the core's speed just after it (every rank
  // takes part: the collectives need them all).
  std::vector<std::pair<double, double>> paired;
  for (int r = 0; r < repetitions; ++r) {
    const double per_call = TimePerCall(calls, 1, [&] { issue(AllReduce); }, drain);
    paired.emplace_back(per_call, collwatch::gpu::CpuChainNs());
  }
  if (!print) return;
  std::printf("all_reduce_ns %.1f\nreduce_scatter_ns %.1f\n", all_reduce, reduce_scatter);
  std::printf("all_reduce_burst_ns %.1f p10 %.1f p90 %.1f\n", all_reduce_burst.p50, all_reduce_burst.p10,
              all_reduce_burst.p90);
  std::printf("reduce_scatter_burst_ns %.1f p10 %.1f p90 %.1f\n", reduce_scatter_burst.p50, reduce_scatter_burst.p10,
              reduce_scatter_burst.p90);
  use.Print();
  for (size_t r = 0; r < paired.size(); ++r) {
    std::printf("repetition %zu all_reduce_ns %.1f cpu_chain_ns %.0f\n", r, paired[r].first, paired[r].second);
  }
}

int PerGpu(int calls, int repetitions) {
  int pipe_fds[2];
  CHECK(pipe(pipe_fds) == 0);
  const pid_t child = fork();
  CHECK(child >= 0);
  const int me = child == 0 ? 1 : 0;
  ncclUniqueId id{};
  if (me == 0) {
    CHECK(ncclGetUniqueId(&id) == ncclSuccess);
    CHECK(write(pipe_fds[1], &id, sizeof id) == static_cast<ssize_t>(sizeof id));
  } else {
    CHECK(read(pipe_fds[0], &id, sizeof id) == static_cast<ssize_t>(sizeof id));
  }
  Rank rank;
  Setup(&rank, me);
  CHECK(ncclCommInitRank(&rank.comm, 2, id, me) == ncclSuccess);
  PinFromEnvironment(me);
  Measure(
      calls, repetitions, [&](void (*op)(const Rank&)) { op(rank); },
      [&] { CHECK(cudaStreamSynchronize(rank.stream) == cudaSuccess); }, me == 0);
  CHECK(ncclCommDestroy(rank.comm) == ncclSuccess);
  if (me == 1) std::_Exit(0);
  int status = 0;
  CHECK(waitpid(child, &status, 0) == child);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int OneProcess(int calls, int repetitions) {
  Rank ranks[2];
  for (int device = 0; device < 2; ++device) Setup(&ranks[device], device);
  ncclComm_t comms[2];
  const int devices[2] = {0, 1};
  CHECK(ncclCommInitAll(comms, 2, devices) == ncclSuccess);
  for (int i = 0; i < 2; ++i) ranks[i].comm = comms[i];
  PinFromEnvironment(0);
  Measure(
      calls, repetitions,
      [&](void (*op)(const Rank&)) {
        CHECK(ncclGroupStart() == ncclSuccess);
        for (const Rank& rank : ranks) op(rank);
        CHECK(ncclGroupEnd() == ncclSuccess);
      },
      [&] {
        for (const Rank& rank : ranks) CHECK(cudaStreamSynchronize(rank.stream) == cudaSuccess);
      },
      true);
  for (const Rank& rank : ranks) CHECK(ncclCommDestroy(rank.comm) == ncclSuccess);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || (std::strcmp(argv[1], "per-gpu") != 0 && std::strcmp(argv[1], "one-process") != 0)) {
    std::fprintf(stderr, "usage: %s per-gpu|one-process [CALLS] [REPETITIONS]\n", argv[0]);
    return 2;
  }
  const int calls = argc > 2 ? std::atoi(argv[2]) : 20000;
  const int repetitions = argc > 3 ? std::atoi(argv[3]) : 9;
  CHECK(calls > 0 && repetitions > 0);
  return std::strcmp(argv[1], "per-gpu") == 0 ? PerGpu(calls, repetitions) : OneProcess(calls, repetitions);
}
