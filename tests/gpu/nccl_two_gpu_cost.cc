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
// COLLWATCH_BENCH_PAIRED=1 (with the preload): instead, in each of REPETITIONS rounds, a run
// through NCCL's own entry points (libnccl.so.2's symbols, past the preload) and one
// through the preload's, in alternating order: the same process, core speed and mode for
// both, so what the preload adds per call is measured like for like:
//   paired OP long|burst direct_ns D interposed_ns I added_ns A added_p10 L added_p90 H
// (medians over the rounds; A is the median of each round's difference, per group of two in
// one-process).
// COLLWATCH_BENCH_PROFILE=1: samples where the timing thread's time goes (pc_sampler.h),
// per phase (the all-reduce's long runs and bursts; paired: direct and interposed), with
// every place of the shared object COLLWATCH_BENCH_PROFILE_OBJECT names (e.g. libcollwatch.so).
// Usage: collwatch_nccl_two_gpu_cost per-gpu|one-process [CALLS] [REPETITIONS]
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tests/gpu/host_timing.h"
#include "tests/gpu/pc_sampler.h"

namespace {

using collwatch::gpu::PcSampler;
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

// The NCCL entry points a run goes through.
struct NcclApi {
  decltype(&ncclGroupStart) group_start = &ncclGroupStart;
  decltype(&ncclGroupEnd) group_end = &ncclGroupEnd;
  decltype(&ncclAllReduce) all_reduce = &ncclAllReduce;
  decltype(&ncclReduceScatter) reduce_scatter = &ncclReduceScatter;
};

// The ones this program links: the preload's wrappers where it is preloaded.
const NcclApi kLinked{};

// libnccl.so.2's own, past any preload; false when they are the linked ones (no preload).
bool DirectApi(NcclApi* api) {
  void* nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  if (nccl == nullptr) return false;
  api->group_start = reinterpret_cast<decltype(api->group_start)>(dlsym(nccl, "ncclGroupStart"));
  api->group_end = reinterpret_cast<decltype(api->group_end)>(dlsym(nccl, "ncclGroupEnd"));
  api->all_reduce = reinterpret_cast<decltype(api->all_reduce)>(dlsym(nccl, "ncclAllReduce"));
  api->reduce_scatter = reinterpret_cast<decltype(api->reduce_scatter)>(dlsym(nccl, "ncclReduceScatter"));
  const auto linked = reinterpret_cast<decltype(api->all_reduce)>(dlsym(RTLD_DEFAULT, "ncclAllReduce"));
  return api->group_start && api->group_end && api->all_reduce && api->reduce_scatter && api->all_reduce != linked;
}

enum class Op { kAllReduce, kReduceScatter };

void Issue(const NcclApi& api, Op op, const Rank& rank) {
  if (op == Op::kAllReduce) {
    CHECK(api.all_reduce(rank.send, rank.recv, kElements, ncclFloat32, ncclSum, rank.comm, rank.stream) ==
          ncclSuccess);
  } else {
    CHECK(api.reduce_scatter(rank.send, rank.recv, kElements / 2, ncclFloat32, ncclSum, rank.comm, rank.stream) ==
          ncclSuccess);
  }
}

using IssueFn = std::function<void(const NcclApi&, Op)>;

bool EnvOn(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::strcmp(value, "1") == 0;
}

// Phases of the profile (pc_sampler.h).
enum Phase { kUnmeasured = 0, kLong = 1, kBurst = 2, kDirectLong = 3, kInterposedLong = 4 };
const char* const kPhaseNames[PcSampler::kPhases] = {nullptr, "long", "burst", "direct_long", "interposed_long"};

void Measure(int calls, int repetitions, const IssueFn& issue, const std::function<void()>& drain, bool print) {
  const ThreadUse use;
  for (int i = 0; i < 500; ++i) issue(kLinked, Op::kAllReduce);  // warm up NCCL's and the driver's first calls
  drain();
  std::unique_ptr<PcSampler> sampler;
  if (EnvOn("COLLWATCH_BENCH_PROFILE")) sampler = std::make_unique<PcSampler>(97'000);
  PcSampler::SetPhase(kLong);
  const double all_reduce = TimePerCall(calls, repetitions, [&] { issue(kLinked, Op::kAllReduce); }, drain);
  PcSampler::SetPhase(kUnmeasured);
  const double reduce_scatter = TimePerCall(calls, repetitions, [&] { issue(kLinked, Op::kReduceScatter); }, drain);
  PcSampler::SetPhase(kBurst);
  const Spread all_reduce_burst =
      TimePerCallInBursts(kBursts, kBurstSize, [&] { issue(kLinked, Op::kAllReduce); }, drain);
  PcSampler::SetPhase(kUnmeasured);
  const Spread reduce_scatter_burst =
      TimePerCallInBursts(kBursts, kBurstSize, [&] { issue(kLinked, Op::kReduceScatter); }, drain);
  // Each repetition's per-call time beside the core's speed just after it (every rank
  // takes part: the collectives need them all).
  std::vector<std::pair<double, double>> paired;
  for (int r = 0; r < repetitions; ++r) {
    const double per_call = TimePerCall(calls, 1, [&] { issue(kLinked, Op::kAllReduce); }, drain);
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
  if (sampler) sampler->Print(kPhaseNames, 25, std::getenv("COLLWATCH_BENCH_PROFILE_OBJECT"));
}

// Direct against interposed runs, round by round in alternating order (COLLWATCH_BENCH_PAIRED).
void MeasurePaired(int calls, int rounds, const IssueFn& issue, const std::function<void()>& drain, bool print) {
  NcclApi direct;
  if (!DirectApi(&direct)) {
    std::fprintf(stderr, "COLLWATCH_BENCH_PAIRED=1 needs the preload: NCCL's own entry points are the linked ones\n");
    std::exit(2);
  }
  const ThreadUse use;
  for (int i = 0; i < 500; ++i) issue(kLinked, Op::kAllReduce);
  for (int i = 0; i < 500; ++i) issue(direct, Op::kAllReduce);
  drain();
  std::unique_ptr<PcSampler> sampler;
  if (EnvOn("COLLWATCH_BENCH_PROFILE")) sampler = std::make_unique<PcSampler>(97'000);
  const char* const op_names[] = {"all_reduce", "reduce_scatter"};
  std::vector<std::string> lines;
  for (const Op op : {Op::kAllReduce, Op::kReduceScatter}) {
    for (const bool bursts : {false, true}) {
      std::vector<double> direct_ns, interposed_ns, added_ns;
      for (int r = 0; r < rounds; ++r) {
        double figure[2] = {0, 0};  // [0] direct, [1] interposed
        for (int k = 0; k < 2; ++k) {
          const int which = (r + k) % 2;
          const NcclApi& api = which == 0 ? direct : kLinked;
          if (op == Op::kAllReduce && !bursts) PcSampler::SetPhase(which == 0 ? kDirectLong : kInterposedLong);
          figure[which] = bursts ? TimePerCallInBursts(kBursts / 4, kBurstSize, [&] { issue(api, op); }, drain).p50
                                 : TimePerCall(calls, 1, [&] { issue(api, op); }, drain);
          PcSampler::SetPhase(kUnmeasured);
        }
        direct_ns.push_back(figure[0]);
        interposed_ns.push_back(figure[1]);
        added_ns.push_back(figure[1] - figure[0]);
      }
      std::vector<double> sorted = added_ns;
      std::sort(sorted.begin(), sorted.end());
      char line[256];
      std::snprintf(line, sizeof line,
                    "paired %s %s direct_ns %.1f interposed_ns %.1f added_ns %.1f added_p10 %.1f added_p90 %.1f",
                    op_names[static_cast<int>(op)], bursts ? "burst" : "long", collwatch::gpu::Median(direct_ns),
                    collwatch::gpu::Median(interposed_ns), collwatch::gpu::Median(added_ns),
                    sorted[sorted.size() / 10], sorted[sorted.size() * 9 / 10]);
      lines.push_back(line);
    }
  }
  if (!print) return;
  for (const std::string& line : lines) std::printf("%s\n", line.c_str());
  use.Print();
  if (sampler) sampler->Print(kPhaseNames, 25, std::getenv("COLLWATCH_BENCH_PROFILE_OBJECT"));
}

void MeasureChosen(int calls, int repetitions, const IssueFn& issue, const std::function<void()>& drain, bool print) {
  if (EnvOn("COLLWATCH_BENCH_PAIRED")) {
    MeasurePaired(calls, repetitions, issue, drain, print);
  } else {
    Measure(calls, repetitions, issue, drain, print);
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
  MeasureChosen(
      calls, repetitions, [&](const NcclApi& api, Op op) { Issue(api, op, rank); },
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
  MeasureChosen(
      calls, repetitions,
      [&](const NcclApi& api, Op op) {
        CHECK(api.group_start() == ncclSuccess);
        for (const Rank& rank : ranks) Issue(api, op, rank);
        CHECK(api.group_end() == ncclSuccess);
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
