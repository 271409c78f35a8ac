// The analyzer end to end: the bundled trainer on 4 CPU ranks under `collwatch run
// --kill-on-hang`. Each failing scenario really hangs and is named (kind, rank classes,
// regions) within 2 s of its first bad collective (a stall: within its threshold), the
// job is stopped with exit 124 and report.json says why; `collwatch analyze` finds the same
// post-mortem, from the trace store and from rings alone; clean runs and both fixes give
// no finding at all. The same scenarios without labels (COLLWATCH_NVTX=off) are named from
// the call sequences alone, or, where nothing can decide, with both readings.
#include <algorithm>
#include <filesystem>
#include <map>
#include <fstream>
#include <set>
#include <thread>
#include <chrono>
#include <string>
#include <vector>

#include "cli/exit_codes.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/read_files.h"
#include "tests/support/run_env.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_time.h"

namespace collwatch::findings_end_to_end_test {
namespace {

using testing::Subprocess;
using testing::ReadFile;
using testing::ReadJson;
using testing::TempDir;

#ifdef COLLWATCH_TRAINER_PATH

constexpr double kStallAfterS = 4;
// A healthy run's threshold: it asserts that no finding comes, and on a loaded machine one
// rank's LibTorch start alone can take longer than 4 s, a real (if harmless) late rank.
// Scaled: the sanitized collector and agent run several times slower (test_time.h).
constexpr double kHealthyStallAfterS = 60 * testing::kTestTimeScale;
// How soon after the threshold a finding must come: 2 s in the default build, scaled in a
// sanitized one, whose collector and agent run several times slower (test_time.h).
constexpr double kPromptS = 2.0 * testing::kTestTimeScale;

struct Outcome {
  int exit_code = -1;
  nlohmann::json report;    // the online report.json
  nlohmann::json analyzed;  // `collwatch analyze --json` of the same output folder
  std::string out_dir;
  std::string ring_dir;
};

// Runs the trainer in `scenario` under collwatch and reads both reports. `unlabelled`:
// the preload ignores the trainer's NVTX ranges, as in a job that has none.
Outcome RunScenario(const TempDir& dir, const std::string& scenario, const std::vector<std::string>& extra = {},
                    bool unlabelled = false, double stall_after_s = kStallAfterS) {
  Outcome outcome;
  outcome.out_dir = dir.path() + "/out";
  outcome.ring_dir = dir.path() + "/rings";
  std::vector<std::string> argv = {COLLWATCH_CLI_PATH, "run", "--out", outcome.out_dir, "--ring-dir", outcome.ring_dir,
                                   "--kill-on-hang", "--stall-after", std::to_string(stall_after_s), "--",
                                   COLLWATCH_TRAINER_PATH, "--nproc", "4", "--scenario", scenario,
                                   "--hidden", "32", "--layers", "2", "--vision-layers", "1", "--seq", "16",
                                   "--vocab", "32", "--batch", "2"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  if (std::find(extra.begin(), extra.end(), "--steps") == extra.end()) argv.insert(argv.end(), {"--steps", "3"});
  std::map<std::string, std::string> env = {{"COLLWATCH_CPU_NCCL_SHM_DIR", dir.path()}};
  if (unlabelled) env["COLLWATCH_NVTX"] = "off";
  Subprocess run(argv, testing::CollwatchRunEnv(env));
  outcome.exit_code = run.Wait(150);
  outcome.report = ReadJson(outcome.out_dir + "/report.json");
  const std::string analyzed = dir.path() + "/analyzed.json";
  Subprocess analyze({COLLWATCH_CLI_PATH, "analyze", "--json", outcome.out_dir}, testing::CollwatchRunEnv({}), analyzed);
  analyze.Wait(60);
  outcome.analyzed = ReadJson(analyzed);
  return outcome;
}

std::vector<std::vector<int>> Classes(const nlohmann::json& finding) {
  std::vector<std::vector<int>> classes = finding["rank_classes"].get<std::vector<std::vector<int>>>();
  std::sort(classes.begin(), classes.end());
  return classes;
}

bool Contains(const nlohmann::json& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// The first finding of a hung run, online and post-mortem alike.
const nlohmann::json& ExpectHungAndNamed(const Outcome& outcome, const std::string& kind) {
  EXPECT_EQ(outcome.exit_code, kExitStoppedHungJob) << "collwatch run should stop the hung job";
  EXPECT_TRUE(outcome.report.is_object()) << "no report.json";
  static const nlohmann::json kEmpty = nlohmann::json::object();
  if (!outcome.report.is_object() || outcome.report["findings"].empty()) return kEmpty;
  const nlohmann::json& finding = outcome.report["findings"][0];
  EXPECT_EQ(finding["kind"], kind) << finding.dump(2);
  EXPECT_FALSE(finding["summary"].get<std::string>().empty());
  EXPECT_TRUE(outcome.analyzed.is_object()) << "collwatch analyze gave no JSON";
  if (outcome.analyzed.is_object()) {
    EXPECT_FALSE(outcome.analyzed["findings"].empty());
    if (!outcome.analyzed["findings"].empty()) {
      EXPECT_EQ(outcome.analyzed["findings"][0]["kind"], kind) << "post-mortem disagrees:\n"
                                                               << outcome.analyzed.dump(2);
      EXPECT_EQ(outcome.analyzed["findings"][0]["seq"], finding["seq"]);
    }
  }
  return finding;
}

TEST(FindingsEndToEndTest, ImageTextIsAPathDivergenceOfImageAndTextRanks) {
  TempDir dir;
  const Outcome outcome = RunScenario(dir, "image-text");
  const nlohmann::json& finding = ExpectHungAndNamed(outcome, "PATH_DIVERGENCE");
  if (finding.empty()) return;
  // Even ranks drew image batches, odd ranks text-only ones (trainer's per-rank skew).
  EXPECT_EQ(Classes(finding), (std::vector<std::vector<int>>{{0, 2}, {1, 3}}));
  EXPECT_TRUE(Contains(finding["regions"], "fwd/vision.patch")) << finding["regions"];
  EXPECT_LT(finding["detect_latency_s"].get<double>(), kPromptS);
  EXPECT_NE(finding["summary"].get<std::string>().find("dummy image"), std::string::npos);
}

TEST(FindingsEndToEndTest, ImageTextFromRingsAlone) {
  TempDir dir;
  const Outcome outcome = RunScenario(dir, "image-text");
  ASSERT_EQ(outcome.exit_code, kExitStoppedHungJob);
  Subprocess analyze({COLLWATCH_CLI_PATH, "analyze", "--json", outcome.ring_dir}, testing::CollwatchRunEnv({}),
                     dir.path() + "/rings.json");
  EXPECT_EQ(analyze.Wait(60), 1) << "analyze exits 1 when it has findings";
  const nlohmann::json report = ReadJson(dir.path() + "/rings.json");
  ASSERT_TRUE(report.is_object());
  ASSERT_FALSE(report["findings"].empty());
  EXPECT_EQ(report["findings"][0]["kind"], "PATH_DIVERGENCE");
  EXPECT_EQ(report["source"].get<std::string>().find("rings") != std::string::npos, true);
}

TEST(FindingsEndToEndTest, ExpertSkipIsASkippedReduceScatter) {
  TempDir dir;
  const Outcome outcome = RunScenario(dir, "expert-skip");
  const nlohmann::json& finding = ExpectHungAndNamed(outcome, "SKIPPED_REDUCE_SCATTER");
  if (finding.empty()) return;
  EXPECT_EQ(Classes(finding), (std::vector<std::vector<int>>{{0, 2}, {1, 3}}));
  EXPECT_TRUE(Contains(finding["regions"], "bwd/trunk.expert1")) << finding["regions"];
  EXPECT_LT(finding["detect_latency_s"].get<double>(), kPromptS);
}

TEST(FindingsEndToEndTest, DtypeMismatchIsASignatureMismatch) {
  TempDir dir;
  const Outcome outcome = RunScenario(dir, "dtype-mismatch");
  const nlohmann::json& finding = ExpectHungAndNamed(outcome, "SIGNATURE_MISMATCH");
  if (finding.empty()) return;
  EXPECT_EQ(Classes(finding), (std::vector<std::vector<int>>{{0, 2, 3}, {1}}));
  EXPECT_NE(finding["summary"].get<std::string>().find("byte ratio 2.00"), std::string::npos) << finding["summary"];
  EXPECT_LT(finding["detect_latency_s"].get<double>(), kPromptS);
}

// Four pipeline stages; from step 2 the last runs 3 microbatches where the others run 4.
// Stage 2 waits for the 4th microbatch's gradient, stage 3 (already in step 3) for the
// next activations: a cycle of receives, told with each side's message count and, from
// the rhythm of the two clean steps, as a microbatch count that differs between stages.
TEST(FindingsEndToEndTest, APipelineStageWithFewerMicrobatchesIsNamedWithTheCounts) {
  TempDir dir;
  const Outcome outcome = RunScenario(dir, "pipeline-fewer-microbatches", {"--steps", "4"});
  const nlohmann::json& finding = ExpectHungAndNamed(outcome, "WAIT_CYCLE");
  if (finding.empty()) return;
  const std::string summary = finding["summary"].get<std::string>();
  EXPECT_NE(summary.find("cycle of receives"), std::string::npos) << summary;
  EXPECT_NE(summary.find("rank 2 waits for message #12 from rank 3, which has sent 11"), std::string::npos) << summary;
  EXPECT_NE(summary.find("rank 3's stage exchanged 3 microbatches in that step where rank 2's stage exchanged 4"),
            std::string::npos)
      << summary;
  EXPECT_TRUE(Contains(finding["regions"], "bwd/microbatch3")) << finding["regions"];
  EXPECT_TRUE(Contains(finding["regions"], "fwd/microbatch1")) << finding["regions"];
  if (outcome.analyzed.is_object() && !outcome.analyzed["findings"].empty()) {
    EXPECT_EQ(outcome.analyzed["findings"][0]["summary"].get<std::string>().find("exchanged 3 microbatches") !=
                  std::string::npos,
              true)
        << "post-mortem tells the same";
  }
}

// The first stage skips its last microbatch as empty from step 2: it sends 3 activations
// and waits for 3 gradients, while stage 1 waits for the 4th activation. The same cycle of
// receives, the skipping stage named as the one that left the rhythm.
TEST(FindingsEndToEndTest, AStageThatSkipsAnEmptyMicrobatchIsNamedAsTheOneThatLeftTheRhythm) {
  TempDir dir;
  const Outcome outcome = RunScenario(dir, "pipeline-skip-empty-microbatch", {"--steps", "3"});
  const nlohmann::json& finding = ExpectHungAndNamed(outcome, "WAIT_CYCLE");
  if (finding.empty()) return;
  const std::string summary = finding["summary"].get<std::string>();
  EXPECT_NE(summary.find("Rank 0 left the rhythm both ranks kept, and rank 1 did not"), std::string::npos) << summary;
  EXPECT_NE(summary.find("rank 0's stage exchanged 3 microbatches in that step where rank 1's stage exchanged 4"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("or skipped a transfer (for example of an empty microbatch)"), std::string::npos) << summary;
}

TEST(FindingsEndToEndTest, FirstForwardStallIsNotJoinedNamingTheLateRank) {
  TempDir dir;
  const Outcome outcome = RunScenario(dir, "first-forward-stall", {"--stall-seconds", "60"});
  const nlohmann::json& finding = ExpectHungAndNamed(outcome, "NOT_JOINED");
  if (finding.empty()) return;
  EXPECT_EQ(finding["lagging_ranks"], nlohmann::json::array({1}));
  EXPECT_EQ(finding["seq"], 1);
  EXPECT_NE(finding["summary"].get<std::string>().find("before their first forward"), std::string::npos);
  // Reported once the threshold passed, and not much later.
  EXPECT_GE(finding["detect_latency_s"].get<double>(), kStallAfterS);
  EXPECT_LT(finding["detect_latency_s"].get<double>(), kStallAfterS + kPromptS);
  // Their stacks (C++ ranks: native frames only): the late rank sleeps in the trainer's
  // slow first batch, the others wait in the all-gather.
  for (const nlohmann::json& report : {outcome.report, outcome.analyzed}) {
    const nlohmann::json& stacks = report["findings"][0]["stacks"];
    ASSERT_TRUE(stacks.is_object()) << report["findings"][0].dump(2);
    ASSERT_EQ(stacks["classes"].size(), 2u) << stacks.dump(2);
    EXPECT_EQ(stacks["classes"][0]["ranks"], nlohmann::json::array({0, 2, 3})) << stacks.dump(2);
    EXPECT_NE(stacks["classes"][0]["where"].get<std::string>().find("\u2190 ncclAllGather (libnccl.so"),
              std::string::npos)
        << stacks.dump(2);
    EXPECT_EQ(stacks["classes"][1]["ranks"], nlohmann::json::array({1})) << stacks.dump(2);
    // (std::this_thread::sleep_for between them in builds that do not inline it.)
    const std::string late = stacks["classes"][1]["where"];
    EXPECT_EQ(late.rfind("sleeping in clock_nanosleep (libc.so.6) \u2190 ", 0), 0u) << late;
    EXPECT_NE(late.find("\u2190 collwatch::trainer::Zero3Trainer::Step ("), std::string::npos) << late;
  }
}

// The same failures in a job without NVTX ranges (COLLWATCH_NVTX=off): the kinds come
// from the call sequences alone, and the words name calls by op and size.
void ExpectNoRegionWords(const nlohmann::json& finding) {
  EXPECT_TRUE(finding["regions"].empty()) << finding["regions"];
  EXPECT_EQ(finding["headline"].get<std::string>().find("NVTX"), std::string::npos) << finding["headline"];
}

TEST(UnlabelledFindingsEndToEndTest, ExpertSkipIsStillASkippedReduceScatter) {
  TempDir dir;
  const Outcome outcome = RunScenario(dir, "expert-skip", {}, /*unlabelled=*/true);
  const nlohmann::json& finding = ExpectHungAndNamed(outcome, "SKIPPED_REDUCE_SCATTER");
  if (finding.empty()) return;
  EXPECT_EQ(Classes(finding), (std::vector<std::vector<int>>{{0, 2}, {1, 3}}));
  EXPECT_TRUE(finding["decided"].get<bool>());
  EXPECT_NE(finding["headline"].get<std::string>().find("gradient unit"), std::string::npos) << finding["headline"];
  ExpectNoRegionWords(finding);
}

TEST(UnlabelledFindingsEndToEndTest, DtypeMismatchIsStillASignatureMismatch) {
  TempDir dir;
  const Outcome outcome = RunScenario(dir, "dtype-mismatch", {}, /*unlabelled=*/true);
  const nlohmann::json& finding = ExpectHungAndNamed(outcome, "SIGNATURE_MISMATCH");
  if (finding.empty()) return;
  EXPECT_EQ(Classes(finding), (std::vector<std::vector<int>>{{0, 2, 3}, {1}}));
  EXPECT_TRUE(finding["decided"].get<bool>());
  EXPECT_NE(finding["summary"].get<std::string>().find("byte ratio 2.00"), std::string::npos) << finding["summary"];
  ExpectNoRegionWords(finding);
}

TEST(UnlabelledFindingsEndToEndTest, DivergenceAfterCleanStepsIsAPathDivergence) {
  TempDir dir;
  const Outcome outcome = RunScenario(dir, "image-text", {"--mixed-from-step", "2"}, /*unlabelled=*/true);
  const nlohmann::json& finding = ExpectHungAndNamed(outcome, "PATH_DIVERGENCE");
  if (finding.empty()) return;
  EXPECT_EQ(Classes(finding), (std::vector<std::vector<int>>{{0, 2}, {1, 3}}));
  EXPECT_TRUE(finding["decided"].get<bool>());
  EXPECT_GT(finding["seq"].get<int>(), 1) << "the ranks part in the third step";
  const std::string summary = finding["summary"].get<std::string>();
  EXPECT_NE(summary.find("agreed on before"), std::string::npos) << summary;
  EXPECT_NE(summary.find("dummy image"), std::string::npos) << summary;
  EXPECT_EQ(summary.find("pad variable-length"), std::string::npos) << "no padding advice for an inserted run";
  EXPECT_LT(finding["detect_latency_s"].get<double>(), kPromptS);
  ExpectNoRegionWords(finding);
}

TEST(UnlabelledFindingsEndToEndTest, FirstCollectiveWithNothingToDecideGivesBothReadings) {
  TempDir dir;
  // Blocking CPU ranks stop inside the very first differing all-gather: no history, no
  // label, nothing after it.
  const Outcome outcome = RunScenario(dir, "image-text", {}, /*unlabelled=*/true);
  const nlohmann::json& finding = ExpectHungAndNamed(outcome, "SIGNATURE_MISMATCH");
  if (finding.empty()) return;
  EXPECT_FALSE(finding["decided"].get<bool>()) << finding.dump(2);
  EXPECT_EQ(finding["other_readings"], nlohmann::json::array({"PATH_DIVERGENCE"}));
  const std::string summary = finding["summary"].get<std::string>();
  EXPECT_NE(summary.find("cannot tell two readings apart"), std::string::npos) << summary;
  EXPECT_NE(summary.find("dummy image"), std::string::npos) << summary;
  EXPECT_NE(summary.find("pad variable-length"), std::string::npos) << summary;
  EXPECT_FALSE(outcome.analyzed["findings"][0]["decided"].get<bool>()) << "post-mortem says the same";
}

class HealthyScenarioTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HealthyScenarioTest, HasNoFindingAtAll) {
  TempDir dir;
  const Outcome outcome = RunScenario(dir, GetParam(), {}, /*unlabelled=*/false, kHealthyStallAfterS);
  EXPECT_EQ(outcome.exit_code, 0);
  ASSERT_TRUE(outcome.report.is_object());
  EXPECT_TRUE(outcome.report["findings"].empty()) << outcome.report.dump(2);
  EXPECT_EQ(outcome.report["healthy"], true);
  ASSERT_TRUE(outcome.analyzed.is_object());
  EXPECT_TRUE(outcome.analyzed["findings"].empty()) << outcome.analyzed.dump(2);
}

// The fixes without labels: still nothing to report (no false divergence from calls that
// only regions told apart).
class UnlabelledHealthyScenarioTest : public ::testing::TestWithParam<std::string> {};

TEST_P(UnlabelledHealthyScenarioTest, HasNoFindingAtAll) {
  TempDir dir;
  const Outcome outcome = RunScenario(dir, GetParam(), {}, /*unlabelled=*/true, kHealthyStallAfterS);
  EXPECT_EQ(outcome.exit_code, 0);
  ASSERT_TRUE(outcome.report.is_object());
  EXPECT_TRUE(outcome.report["findings"].empty()) << outcome.report.dump(2);
  ASSERT_TRUE(outcome.analyzed.is_object());
  EXPECT_TRUE(outcome.analyzed["findings"].empty()) << outcome.analyzed.dump(2);
}

INSTANTIATE_TEST_SUITE_P(Fixes, UnlabelledHealthyScenarioTest,
                         ::testing::Values("image-text-dummy", "image-text-batchsync"),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           std::string name = param_info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

INSTANTIATE_TEST_SUITE_P(CleanAndFixes, HealthyScenarioTest,
                         ::testing::Values("clean", "image-text-dummy", "image-text-batchsync",
                                           "mtp-sequential-backward", "pipeline"),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           std::string name = param_info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// A standalone collector analyses too: `collwatch run --collector` gets its findings over
// Watch, prints them and stops the hung job.
TEST(FindingsEndToEndTest, ExternalCollectorsFindingsStopTheJob) {
  TempDir dir;
  const std::string address = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  Subprocess collector({COLLWATCH_CLI_PATH, "collector", "--listen", address, "--out", dir.path() + "/store"},
                       testing::CollwatchRunEnv({}));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  Subprocess run({COLLWATCH_CLI_PATH, "run", "--collector", address, "--out", dir.path() + "/out", "--kill-on-hang",
                  "--", COLLWATCH_TRAINER_PATH, "--nproc", "4", "--scenario", "dtype-mismatch", "--steps", "3",
                  "--hidden", "32", "--layers", "2", "--vision-layers", "1", "--seq", "16", "--vocab", "32",
                  "--batch", "2"},
                 testing::CollwatchRunEnv({{"COLLWATCH_CPU_NCCL_SHM_DIR", dir.path()}}));
  EXPECT_EQ(run.Wait(120), kExitStoppedHungJob);
  const nlohmann::json report = ReadJson(dir.path() + "/out/report.json");
  ASSERT_TRUE(report.is_object());
  ASSERT_FALSE(report["findings"].empty());
  EXPECT_EQ(report["findings"][0]["kind"], "SIGNATURE_MISMATCH");
}

// A torn trace loses nothing before the tear, but the verdict over it is not "healthy":
// the data is incomplete, and so is a store missing a rank's trace. Unreadable input is
// a clear error.
TEST(AnalyzeCommandTest, DamagedInputIsReportedAndTheRestAnalysed) {
  TempDir dir;
  const Outcome outcome = RunScenario(dir, "clean");
  ASSERT_EQ(outcome.exit_code, 0);
  // Tear one rank's log: the collector died mid-write.
  std::string torn_log;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(outcome.out_dir)) {
    if (entry.path().filename() == "trace.cwlog") torn_log = entry.path().string();
  }
  ASSERT_FALSE(torn_log.empty());
  std::ofstream(torn_log, std::ios::app) << "\x5a\x17garbage-that-is-no-frame";
  const std::string cli = COLLWATCH_CLI_PATH;
  Subprocess analyze({cli, "analyze", outcome.out_dir}, testing::CollwatchRunEnv({}), dir.path() + "/report.txt",
                     dir.path() + "/errors.txt");
  EXPECT_EQ(analyze.Wait(60), 1) << ReadFile(dir.path() + "/errors.txt");
  EXPECT_NE(ReadFile(dir.path() + "/errors.txt").find("torn tail"), std::string::npos)
      << ReadFile(dir.path() + "/errors.txt");
  const std::string torn_report = ReadFile(dir.path() + "/report.txt");
  EXPECT_EQ(torn_report.find("No findings"), std::string::npos) << torn_report;
  EXPECT_NE(torn_report.find("Not healthy: the data is incomplete, and the missing part may hold the problem: "),
            std::string::npos)
      << torn_report;
  EXPECT_NE(torn_report.find("torn tail of"), std::string::npos) << torn_report;

  // One rank's trace gone (3 of 4): its rank is named, and the verdict is not healthy.
  const std::filesystem::path torn_rank = std::filesystem::path(torn_log).parent_path();
  std::filesystem::remove_all(torn_rank);
  Subprocess without_rank({cli, "analyze", "--json", outcome.out_dir}, testing::CollwatchRunEnv({}),
                          dir.path() + "/report.json", dir.path() + "/errors.txt");
  EXPECT_EQ(without_rank.Wait(60), 1) << ReadFile(dir.path() + "/errors.txt");
  const nlohmann::json report = ReadJson(dir.path() + "/report.json");
  ASSERT_TRUE(report.is_object()) << ReadFile(dir.path() + "/report.json");
  EXPECT_FALSE(report["healthy"].get<bool>());
  EXPECT_FALSE(report["complete"].get<bool>());
  ASSERT_EQ(report["missing_ranks"].size(), 1u) << report.dump(2);
  EXPECT_EQ(report["processes"], 4) << "the fourth is known from run.json's process tree, without a trace";

  Subprocess missing({cli, "analyze", dir.path() + "/nowhere"}, testing::CollwatchRunEnv({}), "",
                     dir.path() + "/missing.txt");
  EXPECT_EQ(missing.Wait(60), 2);
  EXPECT_NE(ReadFile(dir.path() + "/missing.txt").find("no such file"), std::string::npos);

  std::filesystem::create_directories(dir.path() + "/junk");
  std::ofstream(dir.path() + "/junk/x.ring") << "not a ring";
  Subprocess junk({cli, "analyze", dir.path() + "/junk"}, testing::CollwatchRunEnv({}), "", dir.path() + "/junk.txt");
  EXPECT_EQ(junk.Wait(60), 2);
  EXPECT_NE(ReadFile(dir.path() + "/junk.txt").find("x.ring"), std::string::npos) << ReadFile(dir.path() + "/junk.txt");
}

#else
TEST(FindingsEndToEndTest, NeedsTheTrainer) { GTEST_SKIP() << "built without the trainer (no LibTorch)"; }
#endif

}  // namespace
}  // namespace collwatch::findings_end_to_end_test
