// Stragglers end to end: `collwatch run --stall-after 3` of CPU ranks where one rank comes
// 8 s late and the job then finishes well. The NOT_JOINED it raised is resolved in
// report.json (resolved_after_s > 0), the job is healthy and the run exits 0; with
// --kill-on-hang, a late rank at work (computing, outside NCCL) is not killed.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/read_files.h"
#include "tests/support/run_env.h"
#include "tests/support/subprocess.h"

namespace collwatch::stragglers_end_to_end_test {
namespace {

using testing::ReadFile;
using testing::ReadJson;
using testing::Subprocess;
using testing::TempDir;

struct RunOutcome {
  int exit_code = -1;
  nlohmann::json report;  // report.json
  std::string err;        // collwatch run's stderr
};

// `collwatch run --stall-after 3 FLAGS -- nccl_ranks 2 PLAN`.
RunOutcome RunRanks(const TempDir& dir, const std::string& plan, const std::vector<std::string>& flags = {}) {
  const std::string out_dir = dir.path() + "/out";
  std::vector<std::string> argv = {COLLWATCH_CLI_PATH, "run",         "--out", out_dir, "--ring-dir",
                                   dir.path() + "/rings", "--stall-after", "3"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  for (const std::string& arg : {std::string("--"), std::string(COLLWATCH_NCCL_RANKS_PATH), std::string("2"), plan,
                                 dir.path()}) {
    argv.push_back(arg);
  }
  Subprocess collwatch(argv, testing::CollwatchRunEnv({{"COLLWATCH_CPU_NCCL_SHM_DIR", dir.path()}}),
                       dir.path() + "/run.out", dir.path() + "/run.err");
  RunOutcome run;
  run.exit_code = collwatch.Wait(90);
  run.report = ReadJson(out_dir + "/report.json");
  run.err = ReadFile(dir.path() + "/run.err");
  return run;
}

// The one finding: a NOT_JOINED of `late_rank` at seq 2, resolved about 8 s into the wait.
void ExpectResolvedStraggler(const RunOutcome& run, int late_rank) {
  ASSERT_TRUE(run.report.is_object()) << run.err;
  ASSERT_EQ(run.report["findings"].size(), 1u) << run.report.dump(2);
  const nlohmann::json& finding = run.report["findings"][0];
  SCOPED_TRACE(finding.dump(2));
  EXPECT_EQ(finding["kind"], "NOT_JOINED");
  EXPECT_EQ(finding["seq"], 2);
  EXPECT_EQ(finding["lagging_ranks"], nlohmann::json::array({late_rank}));
  EXPECT_EQ(finding["resolved"], true);
  ASSERT_TRUE(finding["resolved_after_s"].is_number());
  EXPECT_GT(finding["resolved_after_s"].get<double>(), 0.0);
  EXPECT_GT(finding["lag_s"].get<double>(), 6.0);
  EXPECT_NE(finding["headline"].get<std::string>().find("straggler: rank " + std::to_string(late_rank) + " arrived"),
            std::string::npos);
  EXPECT_EQ(run.report["healthy"], true) << "a straggler is not a hang";
}

TEST(StragglersEndToEndTest, ARankEightSecondsLateIsAResolvedStragglerAndTheJobIsHealthy) {
  TempDir dir;
  const RunOutcome run = RunRanks(dir, "straggler");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  ExpectResolvedStraggler(run, 1);
}

TEST(StragglersEndToEndTest, KillOnHangLeavesARankAtWorkOutsideNcclAlone) {
  TempDir dir;
  const RunOutcome run = RunRanks(dir, "busy-pause", {"--kill-on-hang"});
  EXPECT_EQ(run.exit_code, 0) << "rank 0 computes for 8 s (a checkpoint): not a hang\n" << run.err;
  EXPECT_NE(run.err.find("the late ranks are at work"), std::string::npos) << run.err;
  ExpectResolvedStraggler(run, 0);
  EXPECT_EQ(run.report["stopped_by_collwatch"], false);
}

}  // namespace
}  // namespace collwatch::stragglers_end_to_end_test
