// An NCCL program whose processes each hold several ranks, as nccl-tests -g or
// single-process multi-GPU JAX run: the launcher starts NPROC processes without RANK; each
// initialises its K ranks of the world communicator in one group (ncclCommInitRank per
// rank between ncclGroupStart/End), creates a process-local communicator of K ranks with
// ncclCommInitAll, and drives all its ranks from one thread, every step's collectives
// grouped (a blocking backend would otherwise wait in rank 0's call for rank 1's). Plan
// `diverge`: global rank 1 all-reduces one element more at step 5; every rank then blocks
// for good (a signature mismatch), as NCCL would. COLLWATCH_TEST_STEP_MS (default 0)
// makes every step last that long, for tests that watch the job while it runs.
// Threading: single-threaded processes.
#include <nccl.h>
#include <nvtx3/nvToolsExt.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/programs/rank_launch.h"
#include "ring/settings.h"

namespace {

constexpr int kSteps = 12;
constexpr int kDivergeStep = 5;
constexpr int kDivergingRank = 1;
constexpr size_t kCount = 64;

int g_process = -1;

#define CHECK_NCCL(call)                                                              \
  do {                                                                                \
    ncclResult_t result_ = (call);                                                    \
    if (result_ != ncclSuccess) {                                                     \
      std::fprintf(stderr, "process %d: %s failed: %d\n", g_process, #call, result_); \
      std::exit(10);                                                                  \
    }                                                                                 \
  } while (0)

void Expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "process %d: wrong result: %s\n", g_process, what);
    std::exit(11);
  }
}

// The ranks of this process: world ranks first_rank .. first_rank + handles - 1.
struct Ranks {
  int first_rank = 0;
  int world = 0;
  std::vector<ncclComm_t> world_comms;  // by local index
  std::vector<ncclComm_t> local_comms;  // ncclCommInitAll's, by local index
};

void RunStep(Ranks& ranks, int step, bool diverge) {
  const int k = static_cast<int>(ranks.world_comms.size());
  const int w = ranks.world;
  std::vector<std::vector<float>> send(k, std::vector<float>(kCount + 1)), recv(k, std::vector<float>(kCount + 1));
  std::vector<std::vector<float>> gathered(k, std::vector<float>(kCount * static_cast<size_t>(w)));

  CHECK_NCCL(ncclGroupStart());
  for (int i = 0; i < k; ++i) {
    const int rank = ranks.first_rank + i;
    for (size_t j = 0; j < kCount + 1; ++j) send[i][j] = static_cast<float>(rank) + static_cast<float>(j);
    const bool odd_one = diverge && step == kDivergeStep && rank == kDivergingRank;
    CHECK_NCCL(ncclAllReduce(send[i].data(), recv[i].data(), odd_one ? kCount + 1 : kCount, ncclFloat32, ncclSum,
                             ranks.world_comms[i], nullptr));
  }
  CHECK_NCCL(ncclGroupEnd());
  // Only reached when nobody diverged: a mismatch blocks every rank in the group above.
  for (int i = 0; i < k; ++i) {
    Expect(recv[i][3] == static_cast<float>(w * 3 + w * (w - 1) / 2), "all-reduce");
  }

  CHECK_NCCL(ncclGroupStart());
  for (int i = 0; i < k; ++i) {
    CHECK_NCCL(ncclAllGather(send[i].data(), gathered[i].data(), kCount, ncclFloat32, ranks.world_comms[i], nullptr));
  }
  CHECK_NCCL(ncclGroupEnd());
  for (int i = 0; i < k; ++i) {
    for (int r = 0; r < w; ++r) Expect(gathered[i][static_cast<size_t>(r) * kCount] == static_cast<float>(r), "all-gather");
  }

  float one = 1.0f;
  std::vector<float> members(k, 0.0f);
  CHECK_NCCL(ncclGroupStart());
  for (int i = 0; i < k; ++i) {
    CHECK_NCCL(ncclAllReduce(&one, &members[i], 1, ncclFloat32, ncclSum, ranks.local_comms[i], nullptr));
  }
  CHECK_NCCL(ncclGroupEnd());
  for (int i = 0; i < k; ++i) Expect(members[i] == static_cast<float>(k), "local all-reduce");
}

int RunProcess(int nproc, int ranks_per_process, const std::string& plan, const std::string& dir) {
  const ncclUniqueId id = collwatch::programs::ExchangeUniqueId(g_process, dir);
  Ranks ranks;
  ranks.first_rank = g_process * ranks_per_process;
  ranks.world = nproc * ranks_per_process;
  ranks.world_comms.assign(static_cast<size_t>(ranks_per_process), nullptr);
  ranks.local_comms.assign(static_cast<size_t>(ranks_per_process), nullptr);

  CHECK_NCCL(ncclGroupStart());
  for (int i = 0; i < ranks_per_process; ++i) {
    CHECK_NCCL(ncclCommInitRank(&ranks.world_comms[i], ranks.world, id, ranks.first_rank + i));
  }
  CHECK_NCCL(ncclGroupEnd());
  CHECK_NCCL(ncclCommInitAll(ranks.local_comms.data(), ranks_per_process, nullptr));

  const bool diverge = plan == "diverge";
  const char* step_ms = collwatch::SettingIfSet(collwatch::Setting::kTestStepMs);
  const useconds_t pause_us = step_ms != nullptr ? static_cast<useconds_t>(std::atoi(step_ms)) * 1000 : 0;
  for (int step = 0; step < kSteps; ++step) {
    nvtxRangePushA("train/step");
    RunStep(ranks, step, diverge);
    nvtxRangePop();
    if (pause_us > 0) usleep(pause_us);
  }
  for (ncclComm_t comm : ranks.local_comms) CHECK_NCCL(ncclCommDestroy(comm));
  for (ncclComm_t comm : ranks.world_comms) CHECK_NCCL(ncclCommDestroy(comm));
  std::printf("process %d (ranks %d-%d): plan %s passed\n", g_process, ranks.first_rank,
              ranks.first_rank + ranks_per_process - 1, plan.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s NPROC RANKS_PER_PROCESS PLAN(clean|diverge) RENDEZVOUS_DIR\n", argv[0]);
    return 2;
  }
  const int nproc = std::atoi(argv[1]);
  const int ranks_per_process = std::atoi(argv[2]);
  const std::string plan = argv[3];
  if (nproc < 1 || ranks_per_process < 1 || (plan != "clean" && plan != "diverge") ||
      (plan == "diverge" && nproc * ranks_per_process <= kDivergingRank)) {
    std::fprintf(stderr, "bad arguments: %s %s %s\n", argv[1], argv[2], argv[3]);
    return 2;
  }
  const char* process = collwatch::SettingIfSet(collwatch::Setting::kTestProcess);
  if (process == nullptr) return collwatch::programs::LaunchProcesses(nproc, argv, collwatch::SettingInfoOf(collwatch::Setting::kTestProcess).name);
  g_process = std::atoi(process);
  return RunProcess(nproc, ranks_per_process, plan, argv[4]);
}
