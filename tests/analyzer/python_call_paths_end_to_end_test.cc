// Python call paths end to end: two Python ranks (python3 and ctypes, no torch) call the
// CPU NCCL backend through collwatch's preload from nested functions, and in their third
// step rank 1 skips the vision tower (tests/programs/python_ranks.py). The rings carry each
// call's call path with the script's exact lines; the finding, online and post-mortem, is
// a path divergence told apart by the code alone, with the branch point in `forward`.
// A process whose interpreter is not read (COLLWATCH_PYTHON_FRAMES) records none, keeps
// running and says so once. Threading: single-threaded; the ranks are processes.
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "cli/exit_codes.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/read_files.h"
#include "tests/support/run_env.h"
#include "tests/support/subprocess.h"

namespace collwatch::python_call_paths_end_to_end_test {
namespace {

using testing::Subprocess;
using testing::ReadFile;
using testing::ReadJson;
using testing::TempDir;

// The line of the script marked "# at: <marker>".
int LineOf(const std::string& marker) {
  const int line = testing::MarkedLine(COLLWATCH_PYTHON_RANKS_SCRIPT, marker);
  if (line < 0) ADD_FAILURE() << "no marker " << marker;
  return line;
}

// A line's text as the branch point quotes it: read from the script where the ring kept
// the script's whole name (names keep their last 112 bytes; a checkout may be deeper).
std::string SourceOf(const std::string& marker) {
  if (std::string(COLLWATCH_PYTHON_RANKS_SCRIPT).size() > 112) return "";
  return marker == "branch-image" ? "vision_tower(nccl, comm, world)  # at: branch-image"
                                  : "text_embed(nccl, comm, world)  # at: branch-text";
}

struct JobRun {
  int exit_code = -1;
  nlohmann::json report;
  nlohmann::json analyzed;
  std::string output;  // collwatch run's own lines and the job's, stdout then stderr
};

// Runs python_ranks.py's two ranks under `collwatch run`; `mode` "late": rank 1 sleeps
// before its third step instead of skipping the vision tower.
JobRun RunRanks(const TempDir& dir, std::map<std::string, std::string> env = {}, const std::string& mode = "") {
  JobRun run;
  if (std::string(COLLWATCH_PYTHON3).empty()) return run;
  const std::string out = dir.path() + "/out";
  env["COLLWATCH_CPU_NCCL_SHM_DIR"] = dir.path();
  std::vector<std::string> argv = {COLLWATCH_CLI_PATH, "run", "--out", out, "--ring-dir", dir.path() + "/rings",
                                   "--kill-on-hang", "--stall-after", "4", "--no-dashboard", "--", COLLWATCH_PYTHON3,
                                   COLLWATCH_PYTHON_RANKS_SCRIPT, COLLWATCH_CPU_NCCL_PATH, "2", dir.path()};
  if (!mode.empty()) argv.push_back(mode);
  Subprocess job(argv, testing::CollwatchRunEnv(env), dir.path() + "/output.txt", dir.path() + "/errors.txt");
  run.exit_code = job.Wait(120);
  run.output = ReadFile(dir.path() + "/output.txt") + ReadFile(dir.path() + "/errors.txt");
  run.report = ReadJson(out + "/report.json");
  Subprocess analyze({COLLWATCH_CLI_PATH, "analyze", "--json", out}, testing::CollwatchRunEnv({}),
                     dir.path() + "/analyzed.json");
  analyze.Wait(60);
  run.analyzed = ReadJson(dir.path() + "/analyzed.json");
  return run;
}

// The frames of a class's call path, innermost first, as "function:line".
std::vector<std::string> Frames(const nlohmann::json& call_path) {
  std::vector<std::string> frames;
  for (const nlohmann::json& frame : call_path["frames"]) {
    frames.push_back(frame["function"].get<std::string>() + ":" + std::to_string(frame["line"].get<int>()));
  }
  return frames;
}

void ExpectTheBranchPoint(const nlohmann::json& finding) {
  ASSERT_EQ(finding["kind"], "PATH_DIVERGENCE") << finding.dump(2);
  EXPECT_TRUE(finding["decided"].get<bool>()) << finding.dump(2);
  const nlohmann::json& point = finding["branch_point"];
  ASSERT_TRUE(point.is_object()) << finding.dump(2);
  EXPECT_EQ(point["function"], "forward");
  EXPECT_NE(point["file"].get<std::string>().find("python_ranks.py"), std::string::npos);
  ASSERT_EQ(point["arms"].size(), 2u);
  for (const nlohmann::json& arm : point["arms"]) {
    const bool image = arm["ranks"] == nlohmann::json::array({0});
    EXPECT_EQ(arm["line"], LineOf(image ? "branch-image" : "branch-text")) << arm.dump();
    EXPECT_EQ(arm["callee"], image ? "vision_tower" : "text_embed") << arm.dump();
    EXPECT_EQ(arm["source"], SourceOf(image ? "branch-image" : "branch-text")) << arm.dump();
  }
  ASSERT_EQ(finding["call_paths"].size(), 2u);
  for (const nlohmann::json& path : finding["call_paths"]) {
    const bool image = path["ranks"] == nlohmann::json::array({0});
    EXPECT_FALSE(path["inferred"].get<bool>());
    const std::vector<std::string> expected = {
        "all_gather:" + std::to_string(LineOf("all-gather")),
        (image ? "vision_tower:" + std::to_string(LineOf("vision-gather"))
               : "text_embed:" + std::to_string(LineOf("text-gather"))),
        "forward:" + std::to_string(LineOf(image ? "branch-image" : "branch-text")),
        "train:" + std::to_string(LineOf("train-step")),
        "run_rank:" + std::to_string(LineOf("run-rank")),
        "main:" + std::to_string(LineOf("main")),
        "<module>:" + std::to_string(LineOf("module"))};
    EXPECT_EQ(Frames(path), expected) << path.dump(2);
  }
  // Without NVTX ranges the code names the regions.
  EXPECT_EQ(finding["regions"], nlohmann::json::array({"vision_tower/all_gather()"})) << finding["regions"];
}

TEST(PythonCallPathsEndToEndTest, TheReportNamesTheBranchPointAndEachClassesCallPath) {
  if (std::string(COLLWATCH_PYTHON3).empty()) GTEST_SKIP() << "no python3 on the path";
  TempDir dir;
  const JobRun run = RunRanks(dir);
  EXPECT_EQ(run.exit_code, kExitStoppedHungJob) << "collwatch run should stop the hung job\n" << run.output;
  ASSERT_TRUE(run.report.is_object() && !run.report["findings"].empty()) << run.output;
  ExpectTheBranchPoint(run.report["findings"][0]);
  ASSERT_TRUE(run.analyzed.is_object() && !run.analyzed["findings"].empty()) << "post-mortem";
  ExpectTheBranchPoint(run.analyzed["findings"][0]);
  const std::string text = ReadFile(dir.path() + "/out/report.txt");
  auto quoted = [](const std::string& marker) {
    const std::string source = SourceOf(marker);
    return source.empty() ? std::string() : " `" + source + "`";
  };
  EXPECT_NE(text.find("branch point     `forward` (python_ranks.py): rank 0 at line " +
                      std::to_string(LineOf("branch-image")) + quoted("branch-image") +
                      " \u2192 vision_tower, rank 1 at line " + std::to_string(LineOf("branch-text")) +
                      quoted("branch-text") + " \u2192 text_embed"),
            std::string::npos)
      << text;
  EXPECT_EQ(run.output.find("no Python call paths"), std::string::npos) << run.output;

  // `collwatch dump` of the trace store: the records name their call paths, and the paths
  // follow with their frames.
  Subprocess dump({COLLWATCH_CLI_PATH, "dump", dir.path() + "/out"}, testing::CollwatchRunEnv({}),
                  dir.path() + "/dump.txt");
  EXPECT_EQ(dump.Wait(60), 0);
  const std::string dumped = ReadFile(dir.path() + "/dump.txt");
  EXPECT_NE(dumped.find(" path="), std::string::npos) << dumped.substr(0, 2000);
  // (A file's name keeps its last 112 bytes: a checkout's path may be longer.)
  EXPECT_NE(dumped.find("python_ranks.py:" + std::to_string(LineOf("all-gather")) + ") < vision_tower ("),
            std::string::npos)
      << dumped.substr(0, 4000);

  // The schedule tools: code regions without lines unless asked, and `check` follows the
  // baseline's choice.
  const std::string vision = "\"vision_tower/all_gather()\"";
  const std::string vision_lines = "\"vision_tower:" + std::to_string(LineOf("vision-gather")) +
                                   "/all_gather():" + std::to_string(LineOf("all-gather")) + "\"";
  const std::map<std::string, std::vector<std::string>> baselines = {
      {"plain", {"baseline", dir.path() + "/out", "-o", dir.path() + "/plain.txt"}},
      {"lines", {"baseline", "--code-lines", dir.path() + "/out", "-o", dir.path() + "/lines.txt"}}};
  for (const auto& [name, args] : baselines) {
    std::vector<std::string> argv = {COLLWATCH_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    Subprocess baseline(argv, testing::CollwatchRunEnv({}), dir.path() + "/" + name + ".log");
    ASSERT_EQ(baseline.Wait(60), 0) << ReadFile(dir.path() + "/" + name + ".log");
    const std::string written = ReadFile(dir.path() + "/" + name + ".txt");
    EXPECT_NE(written.find(name == "lines" ? vision_lines : vision), std::string::npos) << written;
    EXPECT_EQ(written.find(name == "lines" ? vision : vision_lines), std::string::npos) << written;
    EXPECT_EQ(written.find("\ncode-lines\n") != std::string::npos, name == "lines") << written;
    Subprocess check({COLLWATCH_CLI_PATH, "check", "--baseline", dir.path() + "/" + name + ".txt", dir.path() + "/out"},
                     testing::CollwatchRunEnv({}), dir.path() + "/" + name + ".check");
    EXPECT_EQ(check.Wait(60), 0) << ReadFile(dir.path() + "/" + name + ".check");
  }

  // `collwatch export --chrome`: each call carries its code and its call path.
  Subprocess export_chrome({COLLWATCH_CLI_PATH, "export", "--chrome", dir.path() + "/out", "-o",
                            dir.path() + "/trace.json"},
                           testing::CollwatchRunEnv({}), dir.path() + "/export.log");
  ASSERT_EQ(export_chrome.Wait(60), 0) << ReadFile(dir.path() + "/export.log");
  const nlohmann::json trace = ReadJson(dir.path() + "/trace.json");
  size_t vision_gathers = 0;
  for (const nlohmann::json& event : trace["traceEvents"]) {
    if (event["ph"] != "X" || !event["args"].contains("code")) continue;
    const nlohmann::json& args = event["args"];
    if (args["call path"].size() < 2 || args["call path"][1].get<std::string>().rfind("vision_tower (", 0) != 0) continue;
    ++vision_gathers;
    EXPECT_EQ(args["code"], "all_gather (python_ranks.py:" + std::to_string(LineOf("all-gather")) + ")") << args;
    EXPECT_EQ(args["call path"][1], "vision_tower (python_ranks.py:" + std::to_string(LineOf("vision-gather")) + ")")
        << args;
  }
  EXPECT_EQ(vision_gathers, 5u) << "two steps of two ranks, and rank 0's third";
}

// The stacks at a stall (issue 17): the late rank sleeps in a Python function before its
// collective; the agent takes both ranks' stacks when the collector asks, and the report
// (online and post-mortem) names where each one is.
TEST(PythonCallPathsEndToEndTest, ALateRanksStacksNameTheFunctionAndLineItSleepsIn) {
  if (std::string(COLLWATCH_PYTHON3).empty()) GTEST_SKIP() << "no python3 on the path";
  TempDir dir;
  const JobRun run = RunRanks(dir, {}, "late");
  EXPECT_EQ(run.exit_code, kExitStoppedHungJob) << run.output;
  for (const nlohmann::json& report : {run.report, run.analyzed}) {
    ASSERT_TRUE(report.is_object() && !report["findings"].empty()) << run.output;
    const nlohmann::json& finding = report["findings"][0];
    ASSERT_EQ(finding["kind"], "NOT_JOINED") << finding.dump(2);
    const nlohmann::json& stacks = finding["stacks"];
    ASSERT_TRUE(stacks.is_object()) << finding.dump(2) << run.output;
    ASSERT_EQ(stacks["classes"].size(), 2u) << stacks.dump(2);
    const std::string waiting = stacks["classes"][0]["where"];
    const std::string late = stacks["classes"][1]["where"];
    EXPECT_EQ(stacks["classes"][0]["ranks"], nlohmann::json::array({0})) << stacks.dump(2);
    EXPECT_EQ(stacks["classes"][1]["ranks"], nlohmann::json::array({1})) << stacks.dump(2);
    EXPECT_NE(waiting.find("ncclAllGather"), std::string::npos) << waiting;
    EXPECT_NE(waiting.find("\u2190 all_gather (python_ranks.py:" + std::to_string(LineOf("all-gather")) +
                           ") \u2190 vision_tower (python_ranks.py:" + std::to_string(LineOf("vision-gather")) + ")"),
              std::string::npos)
        << waiting;
    EXPECT_EQ(late.rfind("sleeping in ", 0), 0u) << late;
    EXPECT_NE(late.find("\u2190 late_start (python_ranks.py:" + std::to_string(LineOf("late")) +
                        ") \u2190 train (python_ranks.py:" + std::to_string(LineOf("late-call")) + ")"),
              std::string::npos)
        << late;
  }
  EXPECT_NE(ReadFile(dir.path() + "/out/report.txt").find("  stacks, taken "), std::string::npos);
}

// A rank late to its communicator's creation has made no NCCL call and has no ring: no
// agent stream can be asked; `collwatch run` takes its stacks itself.
TEST(PythonCallPathsEndToEndTest, ARankWithNoRingYetHasItsStacksTakenByCollwatchRun) {
  if (std::string(COLLWATCH_PYTHON3).empty()) GTEST_SKIP() << "no python3 on the path";
  TempDir dir;
  const JobRun run = RunRanks(dir, {}, "late-init");
  EXPECT_EQ(run.exit_code, kExitStoppedHungJob) << run.output;
  ASSERT_TRUE(run.report.is_object() && !run.report["findings"].empty()) << run.output;
  const nlohmann::json& finding = run.report["findings"][0];
  ASSERT_EQ(finding["kind"], "COMM_INIT_STALL") << finding.dump(2);
  const nlohmann::json& stacks = finding["stacks"];
  ASSERT_TRUE(stacks.is_object()) << finding.dump(2) << run.output;
  ASSERT_EQ(stacks["classes"].size(), 2u) << stacks.dump(2);
  EXPECT_EQ(stacks["classes"][0]["ranks"], nlohmann::json::array({0})) << stacks.dump(2);
  // The library's name follows the function where the symbols say which it is
  // ("ncclCommInitRank (libnccl.so.2.28.9)"; the GNU linker's build of the CPU backend left it out).
  EXPECT_TRUE(std::regex_search(stacks["classes"][0]["where"].get<std::string>(),
                                std::regex("\u2190 ncclCommInitRank( \\(libnccl[^)]*\\))? \u2190 run_rank \\(")))
      << stacks.dump(2);
  EXPECT_EQ(stacks["classes"][1]["ranks"], nlohmann::json::array({1})) << stacks.dump(2);
  EXPECT_NE(stacks["classes"][1]["where"].get<std::string>().find(
                "\u2190 late_start (python_ranks.py:" + std::to_string(LineOf("late")) +
                ") \u2190 run_rank (python_ranks.py:" + std::to_string(LineOf("late-init-call")) + ")"),
            std::string::npos)
      << stacks.dump(2);
}

TEST(PythonCallPathsEndToEndTest, AnInterpreterNotReadRecordsNoCallPathsKeepsRunningAndSaysSoOnce) {
  if (std::string(COLLWATCH_PYTHON3).empty()) GTEST_SKIP() << "no python3 on the path";
  TempDir dir;
  const JobRun run = RunRanks(dir, {{"COLLWATCH_PYTHON_FRAMES", "pretend-unsupported"}});
  EXPECT_EQ(run.exit_code, kExitStoppedHungJob) << "the job ran into its divergence all the same\n" << run.output;
  ASSERT_TRUE(run.report.is_object() && !run.report["findings"].empty()) << run.output;
  const nlohmann::json& finding = run.report["findings"][0];
  EXPECT_TRUE(finding["call_paths"].empty()) << finding.dump(2);
  EXPECT_TRUE(finding["branch_point"].is_null()) << finding.dump(2);
  // Once per process: each of the two ranks says it once.
  size_t said = 0;
  for (size_t at = run.output.find("no Python call paths"); at != std::string::npos;
       at = run.output.find("no Python call paths", at + 1)) {
    ++said;
  }
  EXPECT_EQ(said, 2u) << run.output;
}

}  // namespace
}  // namespace collwatch::python_call_paths_end_to_end_test
