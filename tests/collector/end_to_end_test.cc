// `collwatch run` end to end on the CPU NCCL backend: a 4-rank NCCL program's every
// record reaches the trace store, in lane order, once, byte for byte; CMD's exit status
// comes back.
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/collector/trace_check.h"
#include "tests/support/run_env.h"
#include "tests/support/subprocess.h"

namespace collwatch {
namespace {

using testing::Subprocess;
using testing::TempDir;

// Runs `workload` under `collwatch run` (4 ranks) and checks that the store holds every
// record of every rank's ring, once, in lane order, byte for byte.
void ExpectEveryRecordStoredOnce(const std::vector<std::string>& workload, uint64_t min_records) {
  TempDir dir;
  const std::string out = dir.path() + "/out";
  const std::string rings = dir.path() + "/rings";
  std::vector<std::string> argv = {COLLWATCH_CLI_PATH, "run", "--out", out, "--ring-dir", rings,
                                   "--stall-after", "30", "--"};
  for (const std::string& arg : workload) {
    argv.push_back(arg == "RENDEZVOUS_DIR" ? dir.path() : arg);
  }
  Subprocess run(argv, testing::CollwatchRunEnv({{"COLLWATCH_CPU_NCCL_SHM_DIR", dir.path()}, {"COLLWATCH_JOB_ID", "e2e"}}));
  ASSERT_EQ(run.Wait(120), 0);

  const testing::TraceComparison comparison = testing::CompareTracesWithRings(rings, out, "e2e");
  EXPECT_EQ(comparison.rings, 4);
  EXPECT_EQ(comparison.traces, 4);
  EXPECT_GT(comparison.ring_records, min_records);
  EXPECT_EQ(comparison.stored_records, comparison.ring_records);
  EXPECT_EQ(comparison.mismatch, "");
  for (const auto& [rank, status] : comparison.status_by_rank) {
    EXPECT_EQ(status.writer_status(), v1::WRITER_STATUS_EXITED) << "rank " << rank;
  }
  nlohmann::json run_json = nlohmann::json::parse(std::ifstream(out + "/run.json"));
  EXPECT_EQ(run_json["exit_status"], 0);
  EXPECT_EQ(run_json["drained"], true);
  EXPECT_EQ(run_json["stall_after_s"], 30.0);
  EXPECT_EQ(run_json["job"], "e2e");
}

// Every NCCL call kind: collectives, p2p in groups, a split.
TEST(CollwatchRunTest, FourRanksEveryRecordStoredOnceInOrder) {
  ExpectEveryRecordStoredOnce({COLLWATCH_NCCL_RANKS_PATH, "4", "all", "RENDEZVOUS_DIR"}, 4u * 40);
}

#ifdef COLLWATCH_TRAINER_PATH
// The bundled trainer: a real training schedule (hundreds of collectives per rank).
TEST(CollwatchRunTest, TrainerEveryRecordStoredOnceInOrder) {
  ExpectEveryRecordStoredOnce({COLLWATCH_TRAINER_PATH, "--nproc", "4", "--scenario", "clean",
                               "--steps", "3", "--hidden", "32", "--layers", "2",
                               "--vision-layers", "1", "--seq", "16", "--vocab", "32", "--batch", "2"},
                              4u * 150);
}
#endif

TEST(CollwatchRunTest, ExitsWithTheCommandsStatus) {
  TempDir dir;
  Subprocess run({COLLWATCH_CLI_PATH, "run", "--out", dir.path() + "/out", "--", "sh", "-c", "exit 7"},
                 testing::CollwatchRunEnv({}));
  EXPECT_EQ(run.Wait(30), 7);
  Subprocess missing({COLLWATCH_CLI_PATH, "run", "--out", dir.path() + "/out", "--", dir.path() + "/no-such-program"},
                     testing::CollwatchRunEnv({}));
  EXPECT_EQ(missing.Wait(30), 127);
}

}  // namespace
}  // namespace collwatch
