// Processes that hold several ranks, end to end under `collwatch run` on the CPU NCCL
// backend: 2 processes without RANK, 2 ranks each (grouped ncclCommInitRank, plus an
// ncclCommInitAll communicator per process), all driven from one thread per process.
// A clean run has no finding and counts 4 ranks over 2 processes (status line,
// report.json, analyze); a run where global rank 1 all-reduces another count is a
// SIGNATURE_MISMATCH naming rank 1 against ranks 0,2,3; export and dump name each process
// by its ranks.
#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli/exit_codes.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/read_files.h"
#include "tests/support/run_env.h"
#include "tests/support/subprocess.h"

namespace collwatch::multi_rank_process_test {
namespace {

using testing::Subprocess;
using testing::ReadFile;
using testing::ReadJson;
using testing::TempDir;

struct Outcome {
  int exit_code = -1;
  nlohmann::json report;    // the online report.json
  nlohmann::json analyzed;  // `collwatch analyze --json` of the output folder
  std::string log;          // collwatch run's stderr: status lines, findings
  std::string out_dir;
  std::string ring_dir;
};

// Runs 2 processes x 2 ranks in `plan` under collwatch, then analyzes the traces.
Outcome RunTwoByTwo(const TempDir& dir, const std::string& plan, const std::string& step_ms = "0") {
  Outcome outcome;
  outcome.out_dir = dir.path() + "/out";
  outcome.ring_dir = dir.path() + "/rings";
  const std::string log = dir.path() + "/run.log";
  Subprocess run({COLLWATCH_CLI_PATH, "run", "--out", outcome.out_dir, "--ring-dir", outcome.ring_dir,
                  "--kill-on-hang", "--stall-after", "4", "--", COLLWATCH_NCCL_MULTIRANK_PATH, "2", "2", plan,
                  dir.path()},
                 testing::CollwatchRunEnv({{"COLLWATCH_CPU_NCCL_SHM_DIR", dir.path()},
                                           {"COLLWATCH_TEST_STEP_MS", step_ms}}),
                 "", log);
  outcome.exit_code = run.Wait(120);
  outcome.log = ReadFile(log);
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

void ExpectFourRanksInTwoProcesses(const nlohmann::json& report, const std::string& which) {
  ASSERT_TRUE(report.is_object()) << which << ": no report";
  EXPECT_EQ(report["processes"], 2) << which;
  EXPECT_EQ(report["rank_count"], 4) << which;
}

// Each step lasts 1.1 s so that the run is still going when `collwatch run` prints its
// first periodic status line (every 10 s when stderr is not a terminal).
TEST(MultiRankProcessTest, CleanRunCountsFourRanksInTwoProcessesAndHasNoFinding) {
  TempDir dir;
  const Outcome outcome = RunTwoByTwo(dir, "clean", "1100");
  EXPECT_EQ(outcome.exit_code, 0) << outcome.log;
  ExpectFourRanksInTwoProcesses(outcome.report, "online");
  ExpectFourRanksInTwoProcesses(outcome.analyzed, "post-mortem");
  if (outcome.report.is_object()) {
    EXPECT_TRUE(outcome.report["findings"].empty()) << outcome.report.dump(2);
    EXPECT_EQ(outcome.report["healthy"], true);
  }
  if (outcome.analyzed.is_object()) {
    EXPECT_TRUE(outcome.analyzed["findings"].empty()) << outcome.analyzed.dump(2);
  }
  // While it runs. Its grouped collectives complete with their groups: nothing stays in
  // flight for long (a sample may catch a group between its enters and its end).
  const std::regex running(R"(collwatch: 4/4 ranks reporting \(2 processes\), [^\n]*(nothing in flight|for 0\.\d s))");
  EXPECT_TRUE(std::regex_search(outcome.log, running)) << outcome.log;
  EXPECT_TRUE(std::regex_search(outcome.log, std::regex(R"(collwatch: 0/4 ranks reporting \(2 processes\))")))
      << "the last status line, once every stream closed:\n" << outcome.log;
  EXPECT_EQ(outcome.log.find("rank -1"), std::string::npos) << outcome.log;
  EXPECT_NE(ReadFile(outcome.out_dir + "/report.txt").find("2 processes holding 4 ranks"), std::string::npos);
}

TEST(MultiRankProcessTest, DivergingRankInsideAProcessIsNamed) {
  TempDir dir;
  const Outcome outcome = RunTwoByTwo(dir, "diverge");
  EXPECT_EQ(outcome.exit_code, kExitStoppedHungJob) << "collwatch run should stop the hung job\n" << outcome.log;
  ExpectFourRanksInTwoProcesses(outcome.report, "online");
  ExpectFourRanksInTwoProcesses(outcome.analyzed, "post-mortem");
  ASSERT_TRUE(outcome.report.is_object());
  ASSERT_FALSE(outcome.report["findings"].empty()) << outcome.log;
  const nlohmann::json& finding = outcome.report["findings"][0];
  EXPECT_EQ(finding["kind"], "SIGNATURE_MISMATCH") << finding.dump(2);
  // Step 5's all-reduce: the world communicator's 11th collective (2 per step before it).
  EXPECT_EQ(finding["seq"], 11) << finding.dump(2);
  EXPECT_EQ(Classes(finding), (std::vector<std::vector<int>>{{0, 2, 3}, {1}})) << finding.dump(2);
  for (const char* field : {"summary", "headline"}) {
    EXPECT_FALSE(std::regex_search(finding[field].get<std::string>(), std::regex(R"(ranks? -1)"))) << finding[field];
  }
  EXPECT_EQ(outcome.report["findings"].size(), 1u) << "the process-local communicators are consistent:\n"
                                                   << outcome.report.dump(2);
  ASSERT_TRUE(outcome.analyzed.is_object());
  ASSERT_FALSE(outcome.analyzed["findings"].empty());
  EXPECT_EQ(outcome.analyzed["findings"][0]["kind"], "SIGNATURE_MISMATCH");
  EXPECT_EQ(Classes(outcome.analyzed["findings"][0]), Classes(finding));

  // The timeline and the rings name each process by the ranks it holds.
  const std::string chrome = dir.path() + "/trace.json";
  Subprocess exported({COLLWATCH_CLI_PATH, "export", "--chrome", outcome.out_dir, "-o", chrome},
                      testing::CollwatchRunEnv({}));
  ASSERT_EQ(exported.Wait(60), 0);
  std::vector<std::string> names;
  const nlohmann::json trace = ReadJson(chrome);
  ASSERT_TRUE(trace.is_object());
  for (const nlohmann::json& event : trace["traceEvents"]) {
    if (event["name"] == "process_name") names.push_back(event["args"]["name"]);
  }
  std::sort(names.begin(), names.end());
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0].rfind("ranks 0-1 (", 0), 0u) << names[0];
  EXPECT_EQ(names[1].rfind("ranks 2-3 (", 0), 0u) << names[1];

  const std::string dumped = dir.path() + "/dump.jsonl";
  Subprocess dump({COLLWATCH_CLI_PATH, "dump", "--json", outcome.ring_dir}, testing::CollwatchRunEnv({}), dumped);
  ASSERT_EQ(dump.Wait(60), 0);
  std::vector<std::vector<int>> ring_ranks;
  std::istringstream lines(ReadFile(dumped));
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json object = nlohmann::json::parse(line, nullptr, false);
    if (object.is_object() && object["type"] == "ring") {
      EXPECT_EQ(object["rank"], -1) << "the launcher set no RANK";
      ring_ranks.push_back(object["ranks"].get<std::vector<int>>());
    }
  }
  std::sort(ring_ranks.begin(), ring_ranks.end());
  EXPECT_EQ(ring_ranks, (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
}

}  // namespace
}  // namespace collwatch::multi_rank_process_test
