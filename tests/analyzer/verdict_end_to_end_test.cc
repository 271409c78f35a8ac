// Honest verdicts end to end: `collwatch run` of small NCCL programs (CPU NCCL backend)
// whose ranks exit non-zero, are SIGKILLed, finish cleanly, or stop before their first
// NCCL call. report.json's `healthy` and `ranks` (how each rank ended, its exit code, its
// last NCCL call) and report.txt say so, and `collwatch analyze` agrees post-mortem, from
// the trace store and from rings alone.
#include <fstream>
#include <string>
#include <vector>

#include "cli/exit_codes.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/read_files.h"
#include "tests/support/run_env.h"
#include "tests/support/subprocess.h"

namespace collwatch::verdict_end_to_end_test {
namespace {

using testing::Subprocess;
using testing::ReadFile;
using testing::ReadJson;
using testing::TempDir;

bool Has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

struct RunOutcome {
  int exit_code = -1;
  std::string out_dir;
  std::string ring_dir;
  nlohmann::json report;  // report.json
  std::string text;       // report.txt
};

// `collwatch run` of `nproc` ranks of the test program in `plan`.
RunOutcome RunRanks(const TempDir& dir, int nproc, const std::string& plan, const std::vector<std::string>& flags = {}) {
  RunOutcome run;
  run.out_dir = dir.path() + "/out";
  run.ring_dir = dir.path() + "/rings";
  std::vector<std::string> argv = {COLLWATCH_CLI_PATH, "run", "--out", run.out_dir, "--ring-dir", run.ring_dir};
  argv.insert(argv.end(), flags.begin(), flags.end());
  for (const std::string& arg : {std::string("--"), std::string(COLLWATCH_NCCL_RANKS_PATH), std::to_string(nproc), plan,
                                 dir.path()}) {
    argv.push_back(arg);
  }
  Subprocess collwatch(argv, testing::CollwatchRunEnv({{"COLLWATCH_CPU_NCCL_SHM_DIR", dir.path()}}),
                       dir.path() + "/run.out", dir.path() + "/run.err");
  run.exit_code = collwatch.Wait(60);
  run.report = ReadJson(run.out_dir + "/report.json");
  run.text = ReadFile(run.out_dir + "/report.txt");
  return run;
}

// `collwatch analyze --json PATH`: its exit code and report.
std::pair<int, nlohmann::json> Analyze(const TempDir& dir, const std::string& path) {
  const std::string out = dir.path() + "/analyzed.json";
  Subprocess analyze({COLLWATCH_CLI_PATH, "analyze", "--json", path}, testing::CollwatchRunEnv({}), out);
  const int exit_code = analyze.Wait(60);
  return {exit_code, ReadJson(out)};
}

TEST(VerdictEndToEndTest, RanksThatExitNonZeroAreNotHealthy) {
  TempDir dir;
  const RunOutcome run = RunRanks(dir, 3, "exit3");
  EXPECT_EQ(run.exit_code, 3) << "collwatch run exits with the command's status";
  ASSERT_TRUE(run.report.is_object()) << ReadFile(dir.path() + "/run.err");
  EXPECT_TRUE(run.report["findings"].empty()) << run.report.dump(2);
  EXPECT_EQ(run.report["healthy"], false);
  EXPECT_EQ(run.report["command_exit_status"], 3);
  ASSERT_EQ(run.report["ranks"].size(), 3u) << run.report["ranks"].dump(2) << "\n(not the workers they forked)";
  for (int rank = 0; rank < 3; ++rank) {
    const nlohmann::json& entry = run.report["ranks"][rank];
    SCOPED_TRACE(entry.dump());
    EXPECT_EQ(entry["global_rank"], rank);
    EXPECT_GT(entry["pid"].get<int>(), 0);
    EXPECT_EQ(entry["ended"], "exited");
    EXPECT_EQ(entry["exit_code"], 3);
    ASSERT_TRUE(entry["last_call"].is_string());
    EXPECT_TRUE(Has(entry["last_call"], "all-reduce 4 B (1 x float32) sum")) << entry["last_call"];
    EXPECT_TRUE(Has(entry["last_call"], "seq 2 of comm")) << entry["last_call"];
  }
  EXPECT_FALSE(Has(run.text, "No findings")) << run.text;
  EXPECT_TRUE(Has(run.text, "Not healthy: 3 ranks exited with a status other than 0; every rank ended within "))
      << run.text;
  EXPECT_TRUE(Has(run.text, " s: the records cannot tell which was first; the command exited with status 3")) << run.text;
  EXPECT_TRUE(Has(run.text, "ranks 0-2        exited with 3; last NCCL call: all-reduce")) << run.text;

  const auto [store_exit, from_store] = Analyze(dir, run.out_dir);
  EXPECT_EQ(store_exit, 1) << "analyze exits 1 for a job that is not healthy";
  ASSERT_TRUE(from_store.is_object());
  EXPECT_EQ(from_store["healthy"], false);
  EXPECT_EQ(from_store["command_exit_status"], 3) << "from run.json";
  EXPECT_EQ(from_store["ranks"], run.report["ranks"]);
  const auto [rings_exit, from_rings] = Analyze(dir, run.ring_dir);
  EXPECT_EQ(rings_exit, 1);
  ASSERT_TRUE(from_rings.is_object());
  EXPECT_EQ(from_rings["ranks"], run.report["ranks"]) << "the exit codes are in the rings themselves";
}

TEST(VerdictEndToEndTest, KilledRanksAreNotHealthy) {
  TempDir dir;
  const RunOutcome run = RunRanks(dir, 2, "sigkill");
  EXPECT_EQ(run.exit_code, 128 + 9);
  ASSERT_TRUE(run.report.is_object()) << ReadFile(dir.path() + "/run.err");
  EXPECT_EQ(run.report["healthy"], false);
  ASSERT_EQ(run.report["ranks"].size(), 2u);
  for (const nlohmann::json& entry : run.report["ranks"]) {
    SCOPED_TRACE(entry.dump());
    EXPECT_EQ(entry["ended"], "killed or crashed");
    EXPECT_TRUE(entry["exit_code"].is_null());
    EXPECT_TRUE(Has(entry["last_call"], "seq 2 of comm")) << entry["last_call"];
  }
  EXPECT_FALSE(Has(run.text, "No findings")) << run.text;
  EXPECT_TRUE(Has(run.text, "Not healthy: 2 ranks were killed or crashed")) << run.text;
  EXPECT_TRUE(Has(run.text, "killed or crashed (no exit recorded); last NCCL call: all-reduce")) << run.text;
  const auto [rings_exit, from_rings] = Analyze(dir, run.ring_dir);
  EXPECT_EQ(rings_exit, 1);
  ASSERT_TRUE(from_rings.is_object());
  EXPECT_EQ(from_rings["healthy"], false);
  EXPECT_EQ(from_rings["ranks"][0]["ended"], "killed or crashed");
}

TEST(VerdictEndToEndTest, CleanRunIsHealthyAndEachRankExitedWithZero) {
  TempDir dir;
  const RunOutcome run = RunRanks(dir, 2, "all");
  EXPECT_EQ(run.exit_code, 0);
  ASSERT_TRUE(run.report.is_object()) << ReadFile(dir.path() + "/run.err");
  EXPECT_EQ(run.report["healthy"], true) << run.report.dump(2);
  ASSERT_EQ(run.report["ranks"].size(), 2u);
  for (const nlohmann::json& entry : run.report["ranks"]) {
    SCOPED_TRACE(entry.dump());
    EXPECT_EQ(entry["ended"], "exited");
    EXPECT_EQ(entry["exit_code"], 0);
    EXPECT_TRUE(Has(entry["last_call"], "comm-destroy of comm")) << entry["last_call"];
  }
  EXPECT_TRUE(Has(run.text, "No findings")) << run.text;
  EXPECT_EQ(Analyze(dir, run.out_dir).first, 0);
}

// The state a finding's `processes` gives for `rank` ("" when it names none).
std::string StateOfRank(const nlohmann::json& finding, int rank) {
  for (const nlohmann::json& process : finding["processes"]) {
    if (process["rank"] == rank) return process["state"].get<std::string>();
  }
  return "";
}

// A rank SIGSTOPped between two collectives is the cause, named stopped, never "the
// network"; the job is not healthy once collwatch stopped it.
TEST(VerdictEndToEndTest, ARankStoppedMidTrainingIsNamedStopped) {
  TempDir dir;
  const RunOutcome run = RunRanks(dir, 2, "stopped", {"--kill-on-hang", "--stall-after", "2"});
  EXPECT_EQ(run.exit_code, kExitStoppedHungJob) << "stopped as a hung job";
  ASSERT_TRUE(run.report.is_object()) << ReadFile(dir.path() + "/run.err");
  EXPECT_EQ(run.report["healthy"], false);
  ASSERT_EQ(run.report["findings"].size(), 1u) << run.text;
  const nlohmann::json& finding = run.report["findings"][0];
  EXPECT_EQ(finding["kind"], "NOT_JOINED") << run.text;
  EXPECT_EQ(finding["lagging_ranks"], nlohmann::json::array({1}));
  EXPECT_TRUE(Has(finding["headline"], "; rank 1 stopped")) << finding["headline"];
  EXPECT_TRUE(Has(finding["summary"], "That is the cause: rank 1")) << finding["summary"];
  EXPECT_FALSE(Has(finding["summary"], "network or NVLink")) << finding["summary"];
  EXPECT_EQ(StateOfRank(finding, 1), "stopped") << finding["processes"].dump(2);
  EXPECT_TRUE(Has(run.text, "stopped")) << run.text;
  // The ranks collwatch then stopped are not logged as deaths.
  const std::string log = ReadFile(dir.path() + "/run.err");
  EXPECT_TRUE(Has(log, "the job hung and was stopped")) << log;
  EXPECT_FALSE(Has(log, "died without exiting")) << log;
}

// A rank stopped before its first NCCL call has no ring; collwatch run finds it in its
// command's process tree, so it is a rank of the job, online and post-mortem.
TEST(VerdictEndToEndTest, ARankStoppedBeforeItsFirstNcclCallIsOneOfTheRanks) {
  TempDir dir;
  const RunOutcome run = RunRanks(dir, 2, "stopped-before-init", {"--kill-on-hang", "--stall-after", "2"});
  EXPECT_EQ(run.exit_code, kExitStoppedHungJob) << "stopped as a hung job";
  ASSERT_TRUE(run.report.is_object()) << ReadFile(dir.path() + "/run.err");
  EXPECT_EQ(run.report["healthy"], false);
  EXPECT_EQ(run.report["stopped_by_collwatch"], true);
  ASSERT_EQ(run.report["ranks"].size(), 2u) << run.report["ranks"].dump(2);
  const nlohmann::json& stopped = run.report["ranks"][1];
  EXPECT_EQ(stopped["global_rank"], 1);
  EXPECT_GT(stopped["pid"].get<int>(), 0);
  EXPECT_TRUE(stopped["last_call"].is_null()) << "it never called NCCL";
  EXPECT_EQ(stopped["ended"], "stopped by collwatch");
  EXPECT_EQ(run.report["ranks"][0]["ended"], "stopped by collwatch");
  // The finding names the stopped rank as alive and stopped, not as one that never started.
  ASSERT_EQ(run.report["findings"].size(), 1u) << run.text;
  const nlohmann::json& finding = run.report["findings"][0];
  EXPECT_EQ(finding["kind"], "COMM_INIT_STALL");
  EXPECT_TRUE(Has(finding["headline"], "missing rank 1, stopped")) << finding["headline"];
  EXPECT_TRUE(Has(finding["summary"], "rank 1 is alive but its process")) << finding["summary"];
  EXPECT_EQ(StateOfRank(finding, 1), "stopped") << finding["processes"].dump(2);

  const nlohmann::json run_json = ReadJson(run.out_dir + "/run.json");
  bool saw_it_stopped = false;
  for (const nlohmann::json& process : run_json["rank_processes"]) {
    if (process["global_rank"] == 1 && process["pid"] == stopped["pid"]) saw_it_stopped = process["state"] == "stopped";
  }
  EXPECT_TRUE(saw_it_stopped) << run_json["rank_processes"].dump(2);
  const auto [exit_code, analyzed] = Analyze(dir, run.out_dir);
  EXPECT_EQ(exit_code, 1);
  ASSERT_TRUE(analyzed.is_object());
  ASSERT_EQ(analyzed["ranks"].size(), 2u) << analyzed["ranks"].dump(2);
  EXPECT_EQ(analyzed["ranks"][1]["pid"], stopped["pid"]);
}

// One call of evidence: rank 0's first collective is an all-gather, rank 1's a
// reduce-scatter, and nothing follows. A skipped reduce-scatter fits as well as two
// different collectives: the finding is an undecided OP_MISMATCH giving both readings,
// online and post-mortem, never a confident SKIPPED_REDUCE_SCATTER with its fix.
TEST(VerdictEndToEndTest, OneCallOfEvidenceOnEachSideGivesBothReadings) {
  TempDir dir;
  const RunOutcome run = RunRanks(dir, 2, "first-op-differs", {"--kill-on-hang", "--stall-after", "3"});
  EXPECT_EQ(run.exit_code, kExitStoppedHungJob) << ReadFile(dir.path() + "/run.err");
  ASSERT_TRUE(run.report.is_object()) << ReadFile(dir.path() + "/run.err");
  const auto [exit_code, analyzed] = Analyze(dir, run.out_dir);
  EXPECT_EQ(exit_code, 1);
  for (const nlohmann::json& report : {run.report, analyzed}) {
    ASSERT_TRUE(report.is_object());
    ASSERT_GE(report["findings"].size(), 1u) << report.dump(2);
    const nlohmann::json& finding = report["findings"][0];
    EXPECT_EQ(finding["kind"], "OP_MISMATCH") << finding.dump(2);
    EXPECT_EQ(finding["decided"], false);
    EXPECT_EQ(finding["other_readings"], nlohmann::json::array({"SKIPPED_REDUCE_SCATTER"}));
    EXPECT_TRUE(Has(finding["headline"], "undecided: or SKIPPED_REDUCE_SCATTER")) << finding["headline"];
    EXPECT_TRUE(Has(finding["summary"], "two readings fit")) << finding["summary"];
    EXPECT_TRUE(Has(finding["summary"], "rank 0 skipped a reduce-scatter that rank 1 issued")) << finding["summary"];
  }
}

// Every rank dead, one after the other: the verdict says which ended first and how, and
// that the rest followed, not only how many ranks died.
TEST(VerdictEndToEndTest, WhenEveryRankDiesTheFirstIsNamed) {
  TempDir dir;
  const RunOutcome run = RunRanks(dir, 3, "first-fails");
  EXPECT_NE(run.exit_code, 0) << ReadFile(dir.path() + "/run.err");
  ASSERT_TRUE(run.report.is_object()) << ReadFile(dir.path() + "/run.err");
  EXPECT_TRUE(Has(run.text, "every rank ended: rank 1 first (exited with 3), the other 2 followed ")) << run.text;
  EXPECT_TRUE(Has(run.text, "as a launcher (torchrun) stops the rest when one fails: look at rank 1")) << run.text;
  const auto [exit_code, analyzed] = Analyze(dir, run.out_dir);
  EXPECT_EQ(exit_code, 1);
  ASSERT_TRUE(analyzed.is_object());
  EXPECT_EQ(analyzed["ranks"], run.report["ranks"]);
}

// DDP's skipped gradient bucket (#41): rank 1 never issues step 3's last all-reduce, then
// fails. RANK_LOST, with the call it made every step before, both readings and DDP's fix,
// online and post-mortem alike.
TEST(VerdictEndToEndTest, ARankThatSkippedAStepsBucketAndFailedIsNamedWithTheBucket) {
  TempDir dir;
  const RunOutcome run = RunRanks(dir, 2, "unused-bucket");
  EXPECT_NE(run.exit_code, 0) << ReadFile(dir.path() + "/run.err");
  const auto [exit_code, analyzed] = Analyze(dir, run.out_dir);
  EXPECT_EQ(exit_code, 1);
  for (const nlohmann::json& report : {run.report, analyzed}) {
    ASSERT_TRUE(report.is_object()) << ReadFile(dir.path() + "/run.err");
    ASSERT_FALSE(report["findings"].empty()) << report.dump(2);
    const nlohmann::json& finding = report["findings"][0];
    EXPECT_EQ(finding["kind"], "RANK_LOST") << finding.dump(2);
    EXPECT_EQ(finding["seq"], 9) << finding.dump(2);
    const std::string summary = finding["summary"];
    EXPECT_TRUE(Has(summary, "Rank 1 completed every collective before seq 9 and never issued it, the all-reduce "
                             "2.0 MiB (524288 x float32) sum that it had issued with the others at seq 3 and 6 "
                             "(once every 3 "
                             "collectives, as a training step's calls recur)."))
        << summary;
    EXPECT_TRUE(Has(summary, "failed on the way to it")) << summary;
    EXPECT_TRUE(Has(summary, "find_unused_parameters=True")) << summary;
  }
}

// Two communicators called in opposite orders on a blocking backend: one WAIT_CYCLE naming
// both arcs and the fix (never two NOT_JOINED pointing at each other), online and
// post-mortem, with the cycle drawn in the report folder's wait-for.dot.
TEST(VerdictEndToEndTest, CommunicatorsCalledInOppositeOrdersAreOneWaitCycle) {
  TempDir dir;
  const RunOutcome run = RunRanks(dir, 2, "comm-order-inversion", {"--kill-on-hang", "--stall-after", "3"});
  EXPECT_EQ(run.exit_code, kExitStoppedHungJob) << ReadFile(dir.path() + "/run.err");
  const auto [exit_code, analyzed] = Analyze(dir, run.out_dir);
  EXPECT_EQ(exit_code, 1);
  for (const nlohmann::json& report : {run.report, analyzed}) {
    ASSERT_TRUE(report.is_object()) << ReadFile(dir.path() + "/run.err");
    ASSERT_EQ(report["findings"].size(), 1u) << report.dump(2);
    const nlohmann::json& finding = report["findings"][0];
    EXPECT_EQ(finding["kind"], "WAIT_CYCLE") << finding.dump(2);
    EXPECT_TRUE(Has(finding["headline"], "rank 0 waits in all-reduce #4 on comm ")) << finding["headline"];
    EXPECT_TRUE(Has(finding["headline"], "and rank 1 waits in all-reduce #4 on comm ")) << finding["headline"];
    EXPECT_TRUE(Has(finding["summary"], "one global order on every rank")) << finding["summary"];
    // A blocking backend: neither rank got to its second call, so skipping it fits too.
    EXPECT_EQ(finding["decided"], false);
    EXPECT_EQ(finding["other_readings"], nlohmann::json::array({"NOT_JOINED"}));
    EXPECT_EQ(finding["regions"], nlohmann::json::array({"world-then-split", "split-then-world"}));
    ASSERT_EQ(finding["wait_cycle"]["arcs"].size(), 2u) << finding.dump(2);
    EXPECT_EQ(finding["wait_cycle"]["arcs"][0]["waits_for"], 1);
    EXPECT_EQ(finding["wait_cycle"]["arcs"][1]["waits_for"], 0);
    EXPECT_NE(finding["wait_cycle"]["arcs"][0]["waits_in"]["comm"], finding["wait_cycle"]["arcs"][1]["waits_in"]["comm"]);
  }
  const std::string dot = ReadFile(run.out_dir + "/wait-for.dot");
  EXPECT_TRUE(Has(dot, "digraph wait_for")) << dot;
  EXPECT_TRUE(Has(dot, "c1_r0 -> c1_r1")) << dot;
  EXPECT_TRUE(Has(dot, "c1_r1 -> c1_r0")) << dot;
}

// Three ranks each sending 4 MiB to the next before receiving: one WAIT_CYCLE of three
// point-to-point arcs, with the fix (post them together, or by rank parity).
TEST(VerdictEndToEndTest, SendsFirstAroundARingAreOnePointToPointCycle) {
  TempDir dir;
  const RunOutcome run = RunRanks(dir, 3, "send-cycle", {"--kill-on-hang", "--stall-after", "3"});
  EXPECT_EQ(run.exit_code, kExitStoppedHungJob) << ReadFile(dir.path() + "/run.err");
  ASSERT_TRUE(run.report.is_object()) << ReadFile(dir.path() + "/run.err");
  ASSERT_EQ(run.report["findings"].size(), 1u) << run.report.dump(2);
  const nlohmann::json& finding = run.report["findings"][0];
  EXPECT_EQ(finding["kind"], "WAIT_CYCLE") << finding.dump(2);
  EXPECT_EQ(finding["headline"],
            "WAIT_CYCLE: (undecided: or NOT_JOINED) rank 0 waits in send to rank 1 #2 on comm " + finding["comm"].get<std::string>().substr(0, 8) +
                " for rank 1, rank 1 waits in send to rank 2 #2 on comm " + finding["comm"].get<std::string>().substr(0, 8) +
                " for rank 2, and rank 2 waits in send to rank 0 #2 on comm " +
                finding["comm"].get<std::string>().substr(0, 8) + " for rank 0");
  EXPECT_TRUE(Has(finding["summary"], "batch_isend_irecv")) << finding["summary"];
  EXPECT_EQ(finding["wait_cycle"]["point_to_point"], true);
  EXPECT_EQ(finding["wait_cycle"]["arcs"].size(), 3u);
}

}  // namespace
}  // namespace collwatch::verdict_end_to_end_test
