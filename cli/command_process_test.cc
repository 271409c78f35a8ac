// StartCommand and friends on real children (/bin/sh): exit codes and signals as a shell
// shows them, the environment and output the child gets, its own process group, the stop
// signals given back to it, and a group stopped whole (SIGTERM, then SIGKILL).
#include "cli/command_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "cli/run_test_support.h"
#include "cli/stop_signals.h"
#include "gtest/gtest.h"

namespace collwatch {
namespace {

using testing::ReadFile;
using testing::TempPath;
using testing::WaitForExit;

int RunShell(const std::string& script, const std::map<std::string, std::string>& environment = {},
             int output_fd = -1) {
  const pid_t command = StartCommand({"/bin/sh", "-c", script}, environment, output_fd);
  EXPECT_GT(command, 0);
  return WaitForExit(command);
}

// Gone, or a zombie its new parent has not reaped yet (not every container's init reaps).
bool IsDead(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t end_of_name = line.rfind(')');
  return end_of_name != std::string::npos && end_of_name + 2 < line.size() && line[end_of_name + 2] == 'Z';
}

TEST(ExitStatusOf, ExitCodeOrHundredTwentyEightPlusTheSignal) {
  EXPECT_EQ(ExitStatusOf(3 << 8), 3);        // exited with 3
  EXPECT_EQ(ExitStatusOf(0), 0);
  EXPECT_EQ(ExitStatusOf(SIGKILL), 137);     // killed by SIGKILL
  EXPECT_EQ(ExitStatusOf(SIGTERM), 143);
}

TEST(StartCommand, ExitCodeOfTheCommand) {
  EXPECT_EQ(RunShell("exit 0"), 0);
  EXPECT_EQ(RunShell("exit 3"), 3);
}

TEST(StartCommand, KilledBySignalReadsAsHundredTwentyEightPlusSignal) {
  EXPECT_EQ(RunShell("kill -KILL $$"), 128 + SIGKILL);
  EXPECT_EQ(RunShell("kill -SEGV $$"), 128 + SIGSEGV);
}

TEST(StartCommand, ArgvZeroIsLookedUpInPath) {
  const pid_t command = StartCommand({"sh", "-c", "exit 5"}, {}, -1);
  ASSERT_GT(command, 0);
  EXPECT_EQ(WaitForExit(command), 5);
}

TEST(StartCommand, CommandThatCannotRunExits127AndSaysWhy) {
  const std::string log = TempPath("cannot-run.log");
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  const pid_t command = StartCommand({"/nonexistent/collwatch-no-such-command"}, {}, fd);
  close(fd);
  ASSERT_GT(command, 0);
  EXPECT_EQ(WaitForExit(command), 127);
  EXPECT_NE(ReadFile(log).find("collwatch run: cannot run /nonexistent/collwatch-no-such-command"),
            std::string::npos)
      << ReadFile(log);
  std::filesystem::remove(log);
}

TEST(StartCommand, EnvironmentIsSetOverThisProcesss) {
  setenv("COLLWATCH_TEST_INHERITED", "kept", 1);
  setenv("COLLWATCH_TEST_REPLACED", "old", 1);
  EXPECT_EQ(RunShell("test \"$COLLWATCH_TEST_ADDED\" = added && test \"$COLLWATCH_TEST_INHERITED\" = kept && "
                     "test \"$COLLWATCH_TEST_REPLACED\" = new",
                     {{"COLLWATCH_TEST_ADDED", "added"}, {"COLLWATCH_TEST_REPLACED", "new"}}),
            0);
  // The parent's environment is not touched.
  EXPECT_EQ(std::getenv("COLLWATCH_TEST_ADDED"), nullptr);
  EXPECT_STREQ(std::getenv("COLLWATCH_TEST_REPLACED"), "old");
}

TEST(StartCommand, OutputGoesToTheGivenFileAndStdinIsDevNull) {
  const std::string log = TempPath("output.log");
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  // cat ends at once: its stdin is /dev/null, not this test's.
  EXPECT_EQ(RunShell("echo out; echo err >&2; cat; echo end", {}, fd), 0);
  close(fd);
  EXPECT_EQ(ReadFile(log), "out\nerr\nend\n");
  std::filesystem::remove(log);
}

TEST(StartCommand, CommandLeadsAProcessGroupOfItsOwn) {
  const pid_t command = StartCommand({"/bin/sh", "-c", "sleep 30"}, {}, -1);
  ASSERT_GT(command, 0);
  EXPECT_EQ(getpgid(command), command);
  EXPECT_NE(getpgid(command), getpgrp());
  EXPECT_FALSE(ExitStatusIfEnded(command).has_value());  // still running
  SignalCommandGroup(command, SIGKILL);
  EXPECT_EQ(WaitForExit(command), 128 + SIGKILL);
}

TEST(StartCommand, CommandGetsTheStopSignalsBackUnblocked) {
  // collwatch blocks them to take them itself; a command that inherited the block would
  // keep a SIGTERM pending and exit 0 here.
  BlockStopSignals();
  EXPECT_EQ(RunShell("kill -TERM $$; exit 0"), 128 + SIGTERM);
  EXPECT_EQ(RunShell("kill -INT $$; exit 0"), 128 + SIGINT);
}

TEST(StopCommandGroup, TermEndsTheWholeGroup) {
  const std::string pid_file = TempPath("grandchild.pid");
  const pid_t command = StartCommand({"/bin/sh", "-c", "sleep 30 & echo $! > " + pid_file + "; wait"}, {}, -1);
  ASSERT_GT(command, 0);
  pid_t grandchild = 0;
  for (int tries = 0; tries < 500 && grandchild == 0; ++tries) {
    std::ifstream(pid_file) >> grandchild;
    if (grandchild == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GT(grandchild, 0);
  EXPECT_EQ(getpgid(grandchild), command);
  EXPECT_EQ(StopCommandGroup(command, /*grace_s=*/3), 128 + SIGTERM);
  bool dead = false;
  for (int tries = 0; tries < 500 && !dead; ++tries) {
    dead = IsDead(grandchild);
    if (!dead) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(dead);
  std::filesystem::remove(pid_file);
}

TEST(StopCommandGroup, KillAfterTheGraceWhenTermIsIgnored) {
  const pid_t command = StartCommand({"/bin/sh", "-c", "trap '' TERM; sleep 30"}, {}, -1);
  ASSERT_GT(command, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the trap is set
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(StopCommandGroup(command, /*grace_s=*/0.5), 128 + SIGKILL);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(400));
}

TEST(StopCommandGroup, CommandThatEndedAlreadyGivesItsStatus) {
  const pid_t command = StartCommand({"/bin/sh", "-c", "exit 4"}, {}, -1);
  ASSERT_GT(command, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a zombie now
  EXPECT_EQ(StopCommandGroup(command, /*grace_s=*/1), 4);
}

}  // namespace
}  // namespace collwatch
