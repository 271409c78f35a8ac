// Before `collwatch run --kill-on-hang` stops a job, each rank's Flight Recorder is asked
// for its dump: the CPU ranks of nccl_ranks (plan `skip`: rank 0 hangs in an all-reduce,
// rank 1 pauses) run a stand-in for PyTorch's, which makes `<pipe prefix><rank>.pipe` and
// writes `<dump prefix><rank>` on a byte. After the stop both dumps are there, and stderr,
// run.json and the report's notes name them; a pipe prefix that names nothing delays the
// stop by no more than a second.
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/exit_codes.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/read_files.h"
#include "tests/support/run_env.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_time.h"

namespace collwatch::flight_recorder_dump_test {
namespace {

using testing::ReadFile;
using testing::ReadJson;
using testing::Subprocess;
using testing::TempDir;

bool Has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

struct RunOutcome {
  int exit_code = -1;
  std::string err;         // collwatch run's stderr
  nlohmann::json run;      // run.json
  nlohmann::json report;   // report.json
  // Seconds from the line saying the dumps are asked for to the one saying the job is
  // stopped, as seen by watching stderr (negative when either never came).
  double ask_to_stop_s = -1;
};

// `collwatch run --kill-on-hang --stall-after 3 --no-dashboard -- nccl_ranks 2 skip` with
// `env` added to the job's environment.
RunOutcome RunSkipPlan(const TempDir& dir, std::map<std::string, std::string> env) {
  const std::string out_dir = dir.path() + "/out";
  const std::string err_path = dir.path() + "/run.err";
  env["COLLWATCH_CPU_NCCL_SHM_DIR"] = dir.path();
  Subprocess collwatch({COLLWATCH_CLI_PATH, "run", "--out", out_dir, "--ring-dir", dir.path() + "/rings",
                        "--kill-on-hang", "--stall-after", "3", "--no-dashboard", "--", COLLWATCH_NCCL_RANKS_PATH, "2",
                        "skip", dir.path()},
                       testing::CollwatchRunEnv(env), dir.path() + "/run.out", err_path);
  RunOutcome outcome;
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> asked, stopped;
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(90);
  while (collwatch.Running() && Clock::now() < deadline) {
    const std::string err = ReadFile(err_path);
    if (!asked && Has(err, "asking the Flight Recorder of")) asked = Clock::now();
    if (!stopped && Has(err, "--kill-on-hang: stopping the job")) stopped = Clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  outcome.exit_code = collwatch.Wait(30);
  if (asked && stopped) outcome.ask_to_stop_s = std::chrono::duration<double>(*stopped - *asked).count();
  outcome.err = ReadFile(err_path);
  outcome.run = ReadJson(out_dir + "/run.json");
  outcome.report = ReadJson(out_dir + "/report.json");
  return outcome;
}

TEST(FlightRecorderDumpEndToEndTest, EveryRankDumpsBeforeKillOnHangStopsTheJob) {
  TempDir dir;
  const std::string pipe_prefix = dir.path() + "/fr_pipe_";
  const std::string dump_prefix = dir.path() + "/fr_dump_";
  const RunOutcome outcome = RunSkipPlan(dir, {{"TORCH_NCCL_DEBUG_INFO_PIPE_FILE", pipe_prefix},
                                               {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", dump_prefix},
                                               {"TORCH_NCCL_TRACE_BUFFER_SIZE", "2000"}});
  ASSERT_EQ(outcome.exit_code, kExitStoppedHungJob) << outcome.err;
  EXPECT_GE(outcome.ask_to_stop_s, 0) << outcome.err;
  // The wait is bounded by kFlightRecorderDumpWaitS (5 s); the rest is a safety net.
  EXPECT_LT(outcome.ask_to_stop_s, 5.0 + testing::Scaled(1.0)) << "the wait is bounded\n" << outcome.err;
  for (const int rank : {0, 1}) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const std::string dump = dump_prefix + std::to_string(rank);
    const std::string pipe = pipe_prefix + std::to_string(rank) + ".pipe";
    EXPECT_EQ(ReadFile(dump), "fake Flight Recorder dump of rank " + std::to_string(rank) + "\n")
        << "the rank was asked before it was stopped\n" << outcome.err;
    EXPECT_TRUE(Has(outcome.err, "rank " + std::to_string(rank) + "'s Flight Recorder dump (asked for through " + pipe +
                                     "): " + dump))
        << outcome.err;
    bool in_notes = false;
    for (const nlohmann::json& note : outcome.report["notes"]) in_notes = in_notes || Has(note.get<std::string>(), dump);
    EXPECT_TRUE(in_notes) << outcome.report["notes"].dump(2);
  }
  const nlohmann::json& dumps = outcome.run["flight_recorder_dumps"];
  ASSERT_EQ(dumps.size(), 2u) << outcome.run.dump(2);
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(dumps[rank].dump());
    EXPECT_EQ(dumps[rank]["rank"], rank);
    EXPECT_EQ(dumps[rank]["asked"], true);
    EXPECT_EQ(dumps[rank]["written"], true);
    EXPECT_EQ(dumps[rank]["file"], dump_prefix + std::to_string(rank));
    EXPECT_EQ(dumps[rank]["still_growing"], false);
  }
  EXPECT_EQ(outcome.run["stopped_hung_job"], true);
}

TEST(FlightRecorderDumpEndToEndTest, APipePrefixThatNamesNothingDelaysNothing) {
  TempDir dir;
  // No TORCH_NCCL_DEBUG_INFO_TEMP_FILE: the stand-in makes no pipe, as PyTorch with its
  // Flight Recorder off.
  const std::string pipe_prefix = dir.path() + "/no_such_folder/fr_pipe_";
  const RunOutcome outcome = RunSkipPlan(dir, {{"TORCH_NCCL_DEBUG_INFO_PIPE_FILE", pipe_prefix}});
  ASSERT_EQ(outcome.exit_code, kExitStoppedHungJob) << outcome.err;
  EXPECT_GE(outcome.ask_to_stop_s, 0) << outcome.err;
  // Nothing asked, nothing waited for: well short of the 5 s a dump is waited for (on a
  // loaded machine the two lines may still be a second apart).
  EXPECT_LT(outcome.ask_to_stop_s, 4.0) << outcome.err;
  EXPECT_TRUE(Has(outcome.err, "rank 0's Flight Recorder dump not asked for: " + pipe_prefix + "0.pipe: no pipe there"))
      << outcome.err;
  const nlohmann::json& dumps = outcome.run["flight_recorder_dumps"];
  ASSERT_EQ(dumps.size(), 2u) << outcome.run.dump(2);
  for (const nlohmann::json& dump : dumps) {
    EXPECT_EQ(dump["asked"], false) << dump.dump();
    EXPECT_EQ(dump["written"], false) << dump.dump();
  }
  ASSERT_TRUE(outcome.report.is_object()) << outcome.err;
  EXPECT_EQ(outcome.report["stopped_by_collwatch"], true);
}

TEST(FlightRecorderDumpEndToEndTest, NoPipePrefixAsksNothing) {
  TempDir dir;
  const RunOutcome outcome = RunSkipPlan(dir, {});
  ASSERT_EQ(outcome.exit_code, kExitStoppedHungJob) << outcome.err;
  EXPECT_FALSE(Has(outcome.err, "Flight Recorder")) << outcome.err;
  EXPECT_TRUE(outcome.run["flight_recorder_dumps"].empty()) << outcome.run.dump(2);
}

}  // namespace
}  // namespace collwatch::flight_recorder_dump_test
