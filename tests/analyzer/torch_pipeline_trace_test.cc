// Real torch.distributed.pipelining jobs' trace stores (tests/data/gpu/README.md): on
// 2 x H200 the last rank switched to a schedule of one microbatch fewer (ScheduleGPipe from
// step 2; ScheduleInterleaved1F1B, two stages a rank, from step 3). That schedule's first
// step re-runs the stage set-up, so rank 1's receive is the set-up's 4-byte handshake where
// rank 0 sends its activations. `collwatch analyze` names the mismatch, which step (and,
// where the records can tell, which microbatch) the send was, where the two call paths
// part inside the library, and the cause.
#include <cstdint>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/read_files.h"
#include "tests/support/run_env.h"
#include "tests/support/subprocess.h"

namespace collwatch::torch_pipeline_trace_test {
namespace {

using testing::ReadJson;
using testing::Subprocess;
using testing::TempDir;

// `collwatch analyze --json` of the fixture `store` (under tests/data/gpu): its one
// finding, a SIGNATURE_MISMATCH at p2p `seq`; its summary (empty when it is not so).
std::string MismatchSummaryOf(const std::string& store, uint64_t seq) {
  TempDir dir;
  const std::string report = dir.path() + "/report.json";
  Subprocess analyze({COLLWATCH_CLI_PATH, "analyze", "--json", std::string(COLLWATCH_GPU_TRACES_DIR) + "/" + store},
                     testing::CollwatchRunEnv({}), report);
  EXPECT_EQ(analyze.Wait(60), 1) << "analyze exits 1 when it has findings";
  // Folding the ranks that agree into their class changes no byte (issue 39).
  const std::string whole = dir.path() + "/whole.json";
  Subprocess keeping({COLLWATCH_CLI_PATH, "analyze", "--json", "--keep-every-call",
                      std::string(COLLWATCH_GPU_TRACES_DIR) + "/" + store},
                     testing::CollwatchRunEnv({}), whole);
  EXPECT_EQ(keeping.Wait(60), 1);
  EXPECT_EQ(testing::ReadFile(whole), testing::ReadFile(report)) << "--keep-every-call changed the report";
  const nlohmann::json json = ReadJson(report);
  if (!json.is_object() || json["findings"].size() != 1u) {
    ADD_FAILURE() << "one finding expected: " << json.dump(2);
    return "";
  }
  const nlohmann::json& finding = json["findings"][0];
  EXPECT_EQ(finding["kind"], "SIGNATURE_MISMATCH");
  EXPECT_EQ(finding["seq"], seq);
  return finding["summary"].get<std::string>();
}

TEST(TorchPipelineTraceTest, AStageOnAScheduleOfItsOwnIsNamedByItsSetUp) {
  const std::string summary = MismatchSummaryOf("2026-11-28-h200x2-torch-pipeline-fewer-microbatches", 12);
  ASSERT_FALSE(summary.empty());
  EXPECT_NE(summary.find("part inside `ScheduleGPipe._step_microbatches` (schedules.py): rank 0 at line 725 → "
                         "_sorted_batch_p2p, rank 1 at line 707 → PipelineScheduleSingle._initialize_stage"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("the stages stepped different schedule objects"), std::string::npos) << summary;
  // After its 4 set-up calls rank 0 sends 4 activations and receives 4 gradients a step:
  // send #12 opens its third step.
  EXPECT_NE(summary.find("Rank 0's calls with rank 1 repeat every 8 (4 sends, 4 receives), after 4 calls of set-up; "
                         "this send is send 1 of 4 in repetition 3 (in a pipeline schedule: microbatch 1 of 4 in its "
                         "stage's step 3)"),
            std::string::npos)
      << summary;
}

// Two stages a rank: each step, rank 0 sends 12 messages to rank 1 (8 activations, 4
// gradients) for 4 microbatches, after 12 calls of set-up. Shorter patterns repeat twice
// in the set-up; the step is the rhythm. A send is not a microbatch here: only the step's
// first send is named by its microbatch.
TEST(TorchPipelineTraceTest, TwoStagesARankCountSendsPerStepNotMicrobatches) {
  const std::string summary = MismatchSummaryOf("2026-11-28-h200x2-torch-interleaved-fewer-microbatches", 44);
  ASSERT_FALSE(summary.empty());
  EXPECT_NE(summary.find("rank 1 at line 2046 → PipelineScheduleMulti._initialize_stages"), std::string::npos)
      << summary;
  EXPECT_NE(summary.find("Rank 0's calls with rank 1 repeat every 24 (12 sends and 12 receives in 20 runs), after 12 "
                         "calls of set-up; this send is send 1 of 12 in repetition 4. With several stages a rank "
                         "(PipelineScheduleMulti) each microbatch crosses between the two ranks once for every pair "
                         "of their stages that exchange, so 12 sends a step are not 12 microbatches; as every stage "
                         "runs its microbatches in order, this first send of step 4 carries microbatch 1."),
            std::string::npos)
      << summary;
  EXPECT_EQ(summary.find("microbatch 1 of 12"), std::string::npos) << summary;
}

}  // namespace
}  // namespace collwatch::torch_pipeline_trace_test
