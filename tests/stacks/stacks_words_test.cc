// `collwatch stacks` says what it met instead of misleading words (issue #38 item 11): a
// kernel thread is one (not "No such process"), a process another tracer holds says who
// (its native frames were dropped without a word), and ranks of several jobs under one
// pid are shown job by job (rank 0 of one job was merged with rank 0 of another).
// Threading: single-threaded test code; a forked child plays the other tracer.
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/read_files.h"
#include "tests/support/subprocess.h"

namespace collwatch::stacks_words_test {
namespace {

using testing::ReadFile;
using testing::Subprocess;
using testing::TempDir;

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

std::string FirstLineOf(const std::string& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  return line;
}

// The flags field of /proc/PID/stat has PF_KTHREAD.
bool IsKernelThread(pid_t pid) {
  const std::string line = FirstLineOf("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(line.substr(close + 1));
  std::string field;
  for (int i = 0; i < 7 && fields >> field; ++i) {
  }
  return std::strtoul(field.c_str(), nullptr, 10) & 0x00200000;
}

TEST(StacksWordsTest, AKernelThreadIsSaidToBeOne) {
  // kthreadd is pid 2 where the kernel's threads are visible (no pid namespace of our own).
  if (!IsKernelThread(2)) GTEST_SKIP() << "pid 2 is no kernel thread here (a pid namespace of its own)";
  const std::string name = FirstLineOf("/proc/2/comm");
  TempDir dir;
  const StacksRun run = RunStacks(dir, {"2"});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("a kernel thread (" + name + "): it runs no user code and has no user stacks"),
            std::string::npos)
      << run.output;
  EXPECT_EQ(run.output.find("No such process"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("pid 2 " + name + ","), std::string::npos) << run.output;
}

TEST(StacksWordsTest, AProcessAnotherTracerHoldsNamesTheTracer) {
  Subprocess traced({"/bin/sleep", "120"}, {});
  const pid_t target = traced.pid();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t tracer = fork();
  ASSERT_GE(tracer, 0);
  if (tracer == 0) {
    // PTRACE_SEIZE holds the process as gdb or py-spy would, without stopping it.
    const char ok = ptrace(PTRACE_SEIZE, target, nullptr, nullptr) == 0 ? '1' : '0';
    (void)!write(ready[1], &ok, 1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char ok = '0';
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  close(ready[0]);
  if (ok != '1') {
    kill(tracer, SIGKILL);
    waitpid(tracer, nullptr, 0);
    GTEST_SKIP() << "this test cannot trace a process here (ptrace refused)";
  }
  const std::string tracer_name = FirstLineOf("/proc/" + std::to_string(tracer) + "/comm");
  TempDir dir;
  const StacksRun run = RunStacks(dir, {std::to_string(target)});
  kill(tracer, SIGKILL);  // its end detaches the process
  waitpid(tracer, nullptr, 0);
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("native stacks not taken: process is traced by PID " + std::to_string(tracer) + " (" +
                            tracer_name + ")"),
            std::string::npos)
      << run.output;
}

TEST(StacksWordsTest, RanksOfSeveralJobsUnderOnePidAreShownJobByJob) {
  // Two jobs' rank 0 under one shell, as under pid 1 or a session leader.
  Subprocess launcher({"/bin/sh", "-c",
                       "RANK=0 WORLD_SIZE=1 COLLWATCH_JOB_ID=job-a /bin/sleep 120 & "
                       "RANK=0 WORLD_SIZE=1 COLLWATCH_JOB_ID=job-b /bin/sleep 120 & wait"},
                      {});
  TempDir dir;
  StacksRun run;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  do {  // the ranks take a moment to start
    run = RunStacks(dir, {std::to_string(launcher.pid())});
    if (run.output.find("2 jobs") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  } while (std::chrono::steady_clock::now() < deadline);
  EXPECT_NE(run.output.find("These processes are of 2 jobs, each shown apart:"), std::string::npos) << run.output;
  const size_t a = run.output.find("== Job job-a (1 process) ==\nWhere each process is:\n  rank 0 ");
  const size_t b = run.output.find("== Job job-b (1 process) ==\nWhere each process is:\n  rank 0 ");
  EXPECT_NE(a, std::string::npos) << run.output;
  EXPECT_NE(b, std::string::npos) << run.output;

  Subprocess json_run({COLLWATCH_CLI_PATH, "stacks", "--json", std::to_string(launcher.pid())}, {},
                      dir.path() + "/stacks.json");
  ASSERT_NE(json_run.Wait(60), -1);
  const nlohmann::json report = nlohmann::json::parse(ReadFile(dir.path() + "/stacks.json"), nullptr, false);
  ASSERT_TRUE(report.is_object()) << ReadFile(dir.path() + "/stacks.json");
  ASSERT_EQ(report["classes"].size(), 2u) << report.dump(1);
  EXPECT_NE(report["classes"][0]["job"], report["classes"][1]["job"]) << report.dump(1);
  for (const nlohmann::json& merged : report["classes"]) EXPECT_EQ(merged["pids"].size(), 1u) << report.dump(1);
}

}  // namespace
}  // namespace collwatch::stacks_words_test
