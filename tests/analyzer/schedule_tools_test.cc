// The schedule tools end to end on the bundled trainer (4 ranks, CPU NCCL backend, under
// `collwatch run`): a baseline of `clean` holds for the image-text fix and for a run with
// more steps, and catches `mtp-sequential-backward`; `diff` names the first difference;
// `export --chrome` covers every rank; bad input exits 2.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/run_env.h"
#include "tests/support/subprocess.h"

namespace collwatch::schedule_tools_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::Subprocess;
using testing::TempDir;

std::string ReadFile(const std::string& path) {
  std::ifstream stream(path, std::ios::binary);
  std::ostringstream text;
  text << stream.rdbuf();
  return text.str();
}

// Runs `collwatch ARGS...` with its standard output in `stdout_file`; returns the exit status.
int Collwatch(const std::vector<std::string>& args, const std::string& stdout_file) {
  std::vector<std::string> argv = {COLLWATCH_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  Subprocess cli(argv, testing::CollwatchRunEnv({}), stdout_file);
  return cli.Wait(60);
}

#ifdef COLLWATCH_TRAINER_PATH
// The trainer on 4 ranks with the tests' tiny model, under `collwatch run --out DIR/NAME`.
// Returns the trace folder.
std::string RunTrainer(const TempDir& dir, const std::string& name, const std::string& scenario, int steps) {
  const std::string out = dir.path() + "/" + name;
  const std::string shm = dir.path() + "/shm-" + name;
  std::filesystem::create_directories(shm);
  Subprocess run({COLLWATCH_CLI_PATH, "run", "--out", out, "--", COLLWATCH_TRAINER_PATH, "--nproc", "4", "--scenario",
                  scenario, "--steps", std::to_string(steps), "--hidden", "32", "--layers", "2", "--vision-layers", "1",
                  "--seq", "16", "--vocab", "32", "--batch", "2"},
                 testing::CollwatchRunEnv({{"COLLWATCH_CPU_NCCL_SHM_DIR", shm}, {"COLLWATCH_JOB_ID", name}}));
  EXPECT_EQ(run.Wait(90), 0) << scenario;
  return out;
}

TEST(ScheduleToolsTest, CleanBaselineHoldsForTheImageTextFix) {
  // image-text-dummy gives its text-only ranks a zero image: they gather the vision tower
  // and the projector as image ranks do, so its schedule is clean's, collective by collective.
  TempDir dir;
  const std::string clean = RunTrainer(dir, "clean", "clean", 3);
  const std::string dummy = RunTrainer(dir, "dummy", "image-text-dummy", 3);
  const std::string baseline = dir.path() + "/clean.baseline";
  ASSERT_EQ(Collwatch({"baseline", clean, "-o", baseline}, dir.path() + "/baseline.out"), 0);
  const std::string text = ReadFile(baseline);
  EXPECT_THAT(text, HasSubstr("collwatch-baseline 1\n"));
  EXPECT_THAT(text, HasSubstr("\ncomm 1 size 4\n  ranks 0-3\n    step x N  # 30 collectives\n"
                              "      all-gather 424 float32 \"fwd/vision.patch\"\n"));
  EXPECT_THAT(text, HasSubstr("      reduce-scatter 384 float32 avg \"bwd/embed\"\n    end\n"));

  const std::string junit = dir.path() + "/check.xml";
  EXPECT_EQ(Collwatch({"check", "--baseline", baseline, dummy, "--junit", junit}, dir.path() + "/check.out"), 0)
      << ReadFile(dir.path() + "/check.out");
  EXPECT_THAT(ReadFile(dir.path() + "/check.out"), HasSubstr("ok    comm 1 (size 4)\n"));
  EXPECT_THAT(ReadFile(junit), HasSubstr("tests=\"1\" failures=\"0\""));
  EXPECT_EQ(Collwatch({"diff", clean, dummy}, dir.path() + "/diff.out"), 0) << ReadFile(dir.path() + "/diff.out");
}

TEST(ScheduleToolsTest, MoreStepsOfTheSameCodeGiveTheSameBaseline) {
  TempDir dir;
  const std::string two = RunTrainer(dir, "two", "clean", 2);
  const std::string three = RunTrainer(dir, "three", "clean", 3);
  ASSERT_EQ(Collwatch({"baseline", two, "-o", dir.path() + "/two.baseline"}, dir.path() + "/b2.out"), 0);
  ASSERT_EQ(Collwatch({"baseline", three, "-o", dir.path() + "/three.baseline"}, dir.path() + "/b3.out"), 0);
  EXPECT_EQ(ReadFile(dir.path() + "/two.baseline"), ReadFile(dir.path() + "/three.baseline"));
  EXPECT_EQ(Collwatch({"check", "--baseline", dir.path() + "/two.baseline", three}, dir.path() + "/check.out"), 0)
      << ReadFile(dir.path() + "/check.out");
  // To diff, the extra steps are a difference: B goes on after A's last collective (2 x 30).
  EXPECT_EQ(Collwatch({"diff", two, three}, dir.path() + "/diff.out"), 1);
  EXPECT_THAT(ReadFile(dir.path() + "/diff.out"), HasSubstr("first difference at collective 61"));
}

TEST(ScheduleToolsTest, CheckAndDiffCatchThePerHeadBackward) {
  TempDir dir;
  const std::string clean = RunTrainer(dir, "clean", "clean", 2);
  const std::string mtp = RunTrainer(dir, "mtp", "mtp-sequential-backward", 2);
  const std::string baseline = dir.path() + "/clean.baseline";
  ASSERT_EQ(Collwatch({"baseline", clean, "-o", baseline}, dir.path() + "/baseline.out"), 0);

  const std::string junit = dir.path() + "/check.xml";
  ASSERT_EQ(Collwatch({"check", "--baseline", baseline, mtp, "--junit", junit}, dir.path() + "/check.out"), 1);
  const std::string report = ReadFile(dir.path() + "/check.out");
  // Heads 0 and 1 agree up to head 0's reduce-scatter (collective 11); then the whole
  // trunk backward runs where clean gathers head 1.
  EXPECT_THAT(report, HasSubstr("FAIL  comm 1 (size 4)\n"));
  EXPECT_THAT(report, HasSubstr("@@ comm 1 (size 4), ranks 0-3: collective 12 differs (step 1, line 12 of 30; "
                                "baseline line "));
  EXPECT_THAT(report, HasSubstr("  the baseline: all-gather 3176 float32 \"fwd/mtp.head1\"\n"
                                "  the run:      all-gather 1064 float32 \"bwd/trunk.expert0\"\n"
                                "  the run inserts 12 collectives here\n"));
  EXPECT_THAT(report, HasSubstr("  #11     reduce-scatter 3176 float32 avg \"bwd/mtp.head0\"\n"
                                "+ #12     all-gather 1064 float32 \"bwd/trunk.expert0\"\n"));
  const std::string xml = ReadFile(junit);
  EXPECT_THAT(xml, HasSubstr("tests=\"1\" failures=\"1\""));
  // One line in the message, the hunk in the body.
  EXPECT_THAT(xml, HasSubstr("<failure type=\"ScheduleChanged\" message=\"comm 1 (size 4), ranks 0-3: collective 12 "
                             "differs (step 1, line 12 of 30; baseline line "));
  EXPECT_THAT(xml, HasSubstr("\">@@ comm 1 (size 4), ranks 0-3: collective 12"));

  ASSERT_EQ(Collwatch({"diff", clean, mtp}, dir.path() + "/diff.out"), 1);
  const std::string diff = ReadFile(dir.path() + "/diff.out");
  EXPECT_THAT(diff, HasSubstr("--- A: " + clean + " (job clean)\n+++ B: " + mtp + " (job mtp)\n"));
  EXPECT_THAT(diff, HasSubstr("@@ comm 1 (size 4), ranks 0-3: first difference at collective 12 (A: step 1 of 2, "
                              "line 12 of 30) @@\n"
                              "  A: all-gather 3176 float32 \"fwd/mtp.head1\"\n"
                              "  B: all-gather 1064 float32 \"bwd/trunk.expert0\"\n"));
}

TEST(ScheduleToolsTest, ChromeExportHasEveryRank) {
  TempDir dir;
  const std::string run = RunTrainer(dir, "clean", "clean", 1);
  const std::string file = dir.path() + "/trace.json";
  ASSERT_EQ(Collwatch({"export", "--chrome", run, "-o", file}, dir.path() + "/export.out"), 0);
  EXPECT_THAT(ReadFile(dir.path() + "/export.out"), HasSubstr("4 ranks, "));
  const nlohmann::json trace = nlohmann::json::parse(ReadFile(file), nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(trace.is_discarded());
  std::set<std::string> processes;
  std::map<int, int> collectives_by_pid;
  for (const nlohmann::json& event : trace["traceEvents"]) {
    if (event["ph"] == "M" && event["name"] == "process_name") processes.insert(event["args"]["name"]);
    if (event["ph"] == "X" && event["cat"] == "collective") {
      ++collectives_by_pid[event["pid"].get<int>()];
      EXPECT_EQ(event["args"]["state"], "completed");
      EXPECT_GT(event["args"]["bytes"].get<uint64_t>(), 0u);
    }
    EXPECT_NE(event["ph"], "i");  // nothing hung
  }
  ASSERT_EQ(processes.size(), 4u);
  for (int rank = 0; rank < 4; ++rank) {
    bool named = false;
    for (const std::string& name : processes) named |= name.rfind("rank " + std::to_string(rank) + " (", 0) == 0;
    EXPECT_TRUE(named) << rank;
  }
  ASSERT_EQ(collectives_by_pid.size(), 4u);
  for (const auto& [pid, count] : collectives_by_pid) EXPECT_EQ(count, 30) << pid;  // one step
}
#endif  // COLLWATCH_TRAINER_PATH

TEST(ScheduleToolsTest, BadInputExitsTwoWithAMessage) {
  TempDir dir;
  const std::string out = dir.path() + "/out";
  const std::string missing = dir.path() + "/no-such-run";
  EXPECT_EQ(Collwatch({"diff", missing, missing}, out), 2);
  EXPECT_EQ(Collwatch({"baseline", missing, "-o", dir.path() + "/b"}, out), 2);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/b"));
  EXPECT_EQ(Collwatch({"export", "--chrome", missing, "-o", dir.path() + "/t.json"}, out), 2);
  EXPECT_EQ(Collwatch({"check", "--baseline", dir.path() + "/none.baseline", dir.path()}, out), 2);
  EXPECT_EQ(Collwatch({"check", dir.path()}, out), 2);  // usage: --baseline missing
  // A malformed baseline: the error names the file and the line.
  std::ofstream(dir.path() + "/bad.baseline") << "collwatch-baseline 1\ncomm 1 size 4\n  ranks 0-3\n    all-gather x\n";
  Subprocess check({COLLWATCH_CLI_PATH, "check", "--baseline", dir.path() + "/bad.baseline", dir.path()},
                   testing::CollwatchRunEnv({}), "", dir.path() + "/err");
  EXPECT_EQ(check.Wait(30), 2);
  EXPECT_THAT(ReadFile(dir.path() + "/err"), HasSubstr("bad.baseline: baseline line 4: all-gather needs COUNT DTYPE"));
}

}  // namespace
}  // namespace collwatch::schedule_tools_test
