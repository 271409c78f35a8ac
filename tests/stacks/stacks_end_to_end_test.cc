// `collwatch stacks` on real processes: four Python ranks under a launcher (three blocked
// in one function, one sleeping before its first collective) merged into two classes
// naming functions and lines; a SIGSTOPped rank's state and stacks; a native program
// blocked in a system call named by its own functions.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/read_files.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_time.h"

namespace collwatch::stacks_end_to_end_test {
namespace {

using testing::ReadFile;
using testing::Subprocess;
using testing::TempDir;

// The line of `file` marked "at: <marker>".
int LineOf(const std::string& marker, const std::string& file = COLLWATCH_STACK_RANKS_SCRIPT) {
  const int line = testing::MarkedLine(file, marker);
  if (line < 0) ADD_FAILURE() << "no marker " << marker << " in " << file;
  return line;
}

struct StacksRun {
  int exit_code = -1;
  std::string output;
};

StacksRun RunStacks(const TempDir& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {COLLWATCH_CLI_PATH, "stacks"};
  argv.insert(argv.end(), args.begin(), args.end());
  Subprocess stacks(argv, {}, dir.path() + "/stacks.txt", dir.path() + "/stacks.err");
  StacksRun run;
  run.exit_code = stacks.Wait(60);
  run.output = ReadFile(dir.path() + "/stacks.txt") + ReadFile(dir.path() + "/stacks.err");
  return run;
}

// Runs `collwatch stacks` until its output holds every one of `wanted` (the processes
// take a moment to get where they block), at most 30 s; the last run.
StacksRun RunStacksUntil(const TempDir& dir, const std::vector<std::string>& args,
                         const std::vector<std::string>& wanted) {
  StacksRun run;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  do {
    run = RunStacks(dir, args);
    bool all = true;
    for (const std::string& text : wanted) all = all && run.output.find(text) != std::string::npos;
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  } while (std::chrono::steady_clock::now() < deadline);
  return run;
}

TEST(StacksEndToEndTest, FourRanksMergeIntoTheirTwoPlacesWithFunctionsAndLines) {
  if (std::string(COLLWATCH_PYTHON3).empty()) GTEST_SKIP() << "no python3 on the path";
  TempDir dir;
  Subprocess launcher({COLLWATCH_PYTHON3, COLLWATCH_STACK_RANKS_SCRIPT, "4"}, {});
  const std::string waiting = "wait_for_peers (stack_ranks.py:" + std::to_string(LineOf("wait")) +
                              ") \u2190 rank_main (stack_ranks.py:" + std::to_string(LineOf("wait-call")) + ")";
  const std::string late = "late_start (stack_ranks.py:" + std::to_string(LineOf("late")) +
                           ") \u2190 rank_main (stack_ranks.py:" + std::to_string(LineOf("late-call")) + ")";
  // Until every rank is in place (a rank still starting up is somewhere else).
  const StacksRun run =
      RunStacksUntil(dir, {std::to_string(launcher.pid())}, {"\n  ranks 0-2   ", waiting, "\n  rank 3      ", late});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  const std::string merged = run.output.substr(0, run.output.find("\n\n"));
  // One line per class, ranks by their RANK, in the order of their lowest rank.
  EXPECT_NE(merged.find("\n  ranks 0-2   "), std::string::npos) << merged;
  EXPECT_NE(merged.find("\n  rank 3      "), std::string::npos) << merged;
  const size_t ranks_line = merged.find("ranks 0-2");
  const size_t rank_line = merged.find("rank 3");
  ASSERT_NE(ranks_line, std::string::npos) << merged;
  ASSERT_NE(rank_line, std::string::npos) << merged;
  const std::string first = merged.substr(ranks_line, merged.find('\n', ranks_line) - ranks_line);
  const std::string second = merged.substr(rank_line, merged.find('\n', rank_line) - rank_line);
  EXPECT_NE(first.find("(main thread) sleeping in "), std::string::npos) << first;
  EXPECT_NE(first.find(waiting), std::string::npos) << first;
  EXPECT_NE(first.find("read"), std::string::npos) << "blocked reading its pipe: " << first;
  EXPECT_NE(second.find(late), std::string::npos) << second;
  EXPECT_NE(second.find("sleep"), std::string::npos) << "sleeping in the C library: " << second;
  EXPECT_EQ(std::count(merged.begin(), merged.end(), '\n'), 2) << "a heading and two classes:\n" << merged;
}

TEST(StacksEndToEndTest, AStoppedRankIsSaidStoppedItsStacksReadAndItStaysStopped) {
  if (std::string(COLLWATCH_PYTHON3).empty()) GTEST_SKIP() << "no python3 on the path";
  TempDir dir;
  Subprocess rank({COLLWATCH_PYTHON3, COLLWATCH_STACK_RANKS_SCRIPT}, {{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  const std::string late = "late_start (stack_ranks.py:" + std::to_string(LineOf("late")) + ")";
  ASSERT_NE(RunStacksUntil(dir, {std::to_string(rank.pid())}, {late}).output.find(late), std::string::npos);
  ASSERT_EQ(kill(rank.pid(), SIGSTOP), 0);
  std::string state;
  for (int i = 0; i < testing::Scaled(100) && state != "T"; ++i) {
    std::ifstream stat("/proc/" + std::to_string(rank.pid()) + "/stat");
    std::string line;
    std::getline(stat, line);
    state = line.substr(line.rfind(')') + 2, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(state, "T");
  const StacksRun run = RunStacks(dir, {std::to_string(rank.pid()), "--json"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json report = nlohmann::json::parse(run.output, nullptr, false);
  ASSERT_TRUE(report.is_object()) << run.output;
  ASSERT_EQ(report["classes"].size(), 1u) << report.dump(2);
  const std::string where = report["classes"][0]["where"];
  EXPECT_EQ(where.rfind("stopped in ", 0), 0u) << where;
  EXPECT_NE(where.find(late), std::string::npos) << where;
  const nlohmann::json& main_thread = report["processes"][0]["threads"][0];
  EXPECT_EQ(main_thread["state"], "T");
  EXPECT_FALSE(main_thread["native"].empty()) << "a stopped process unwinds too: " << main_thread.dump(2);
  EXPECT_FALSE(main_thread["python"].empty()) << main_thread.dump(2);
  std::ifstream stat("/proc/" + std::to_string(rank.pid()) + "/stat");
  std::string line;
  std::getline(stat, line);
  EXPECT_EQ(line.substr(line.rfind(')') + 2, 1), "T") << "taking its stacks must not resume it";

  // Python call paths alone: read from memory, nothing attached.
  const StacksRun python_only = RunStacks(dir, {std::to_string(rank.pid()), "--python-only", "--json"});
  EXPECT_EQ(python_only.exit_code, 0) << python_only.output;
  const nlohmann::json paths = nlohmann::json::parse(python_only.output, nullptr, false);
  ASSERT_TRUE(paths.is_object()) << python_only.output;
  const nlohmann::json& first = paths["processes"][0]["threads"][0];
  EXPECT_EQ(first["tid"], rank.pid()) << first.dump(2);
  EXPECT_TRUE(first["native"].empty()) << first.dump(2);
  ASSERT_FALSE(first["python"].empty()) << first.dump(2);
  EXPECT_EQ(first["python"][0]["function"], "late_start");
  EXPECT_EQ(first["python"][0]["line"], LineOf("late"));
  kill(rank.pid(), SIGCONT);
}

// The blocked program as this build's compiler built it, and as clang built it where the
// build found clang (COLLWATCH_BLOCKED_PROGRAM_CLANG): clang writes no .debug_aranges, where
// libdwfl looks a line up first.
void ExpectNamedByItsOwnFunctionsAndLines(const std::string& program) {
  TempDir dir;
  Subprocess blocked({program}, {});
  const StacksRun run = RunStacksUntil(dir, {std::to_string(blocked.pid())}, {"BlockedReadingAPipe"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  const std::string merged = run.output.substr(0, run.output.find("\n\n"));
  EXPECT_NE(merged.find("pid " + std::to_string(blocked.pid())), std::string::npos) << merged;
  EXPECT_NE(merged.find("sleeping in "), std::string::npos) << merged;
  const std::string source = COLLWATCH_BLOCKED_PROGRAM_SOURCE;
  EXPECT_NE(merged.find("sleeping in read (libc.so.6) \u2190 (anonymous namespace)::BlockedReadingAPipe "
                        "(blocked_program.cc:" + std::to_string(LineOf("read", source)) +
                        ") \u2190 (anonymous namespace)::WaitForInput (blocked_program.cc:" +
                        std::to_string(LineOf("blocked", source)) + ")"),
            std::string::npos)
      << program << "\n" << merged;
}

TEST(StacksEndToEndTest, ANativeProgramBlockedInASystemCallIsNamedByItsOwnFunctions) {
  ExpectNamedByItsOwnFunctionsAndLines(COLLWATCH_BLOCKED_PROGRAM);
}

TEST(StacksEndToEndTest, AProgramClangBuiltHasItsLinesToo) {
#ifdef COLLWATCH_BLOCKED_PROGRAM_CLANG
  ExpectNamedByItsOwnFunctionsAndLines(COLLWATCH_BLOCKED_PROGRAM_CLANG);
#else
  GTEST_SKIP() << "no clang found when configuring";
#endif
}

TEST(StacksEndToEndTest, NoSuchProcessIsSaidAndExitsTwo) {
  TempDir dir;
  Subprocess gone({"/bin/true"}, {});
  ASSERT_EQ(gone.Wait(10), 0);
  const StacksRun run = RunStacks(dir, {std::to_string(gone.pid())});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("collwatch stacks: no process " + std::to_string(gone.pid())), std::string::npos)
      << run.output;
}

}  // namespace
}  // namespace collwatch::stacks_end_to_end_test
