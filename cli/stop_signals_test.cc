// The stop signals blocked, taken synchronously and passed on to a command's process group.
// Each test runs in a process of its own (gtest_discover_tests), so a block set here
// stays here; signals are sent to this thread (pthread_kill), so no other thread can take
// them.
#include "cli/stop_signals.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <thread>

#include "cli/command_process.h"
#include "cli/run_test_support.h"
#include "gtest/gtest.h"

namespace collwatch {
namespace {

using testing::ReadFile;
using testing::TempPath;
using testing::WaitForExit;

TEST(StopSignals, AreSigintAndSigterm) {
  const sigset_t set = StopSignals();
  EXPECT_EQ(sigismember(&set, SIGINT), 1);
  EXPECT_EQ(sigismember(&set, SIGTERM), 1);
  EXPECT_EQ(sigismember(&set, SIGHUP), 0);
  EXPECT_EQ(sigismember(&set, SIGKILL), 0);
  EXPECT_EQ(sigismember(&set, SIGCHLD), 0);
}

TEST(BlockStopSignals, BlocksThemInThisThreadAndTheThreadsItStarts) {
  BlockStopSignals();
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  EXPECT_EQ(sigismember(&mask, SIGINT), 1);
  EXPECT_EQ(sigismember(&mask, SIGTERM), 1);
  std::thread([] {
    sigset_t inherited;
    pthread_sigmask(SIG_BLOCK, nullptr, &inherited);
    EXPECT_EQ(sigismember(&inherited, SIGINT), 1);
    EXPECT_EQ(sigismember(&inherited, SIGTERM), 1);
  }).join();
}

TEST(WaitForStopSignal, ZeroWhenNoneComesWithinTheWait) {
  BlockStopSignals();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(WaitForStopSignal(0.2), 0);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(150));
  EXPECT_EQ(WaitForStopSignal(0), 0);  // a poll
}

TEST(WaitForStopSignal, TakesAPendingSignalInsteadOfDying) {
  BlockStopSignals();
  pthread_kill(pthread_self(), SIGTERM);
  EXPECT_EQ(WaitForStopSignal(5), SIGTERM);
  pthread_kill(pthread_self(), SIGINT);
  EXPECT_EQ(WaitForStopSignal(0), SIGINT);
  EXPECT_EQ(WaitForStopSignal(0), 0);  // taken, not pending any more
}

TEST(ForwardStopSignal, PassesTheSignalToTheCommandsGroup) {
  BlockStopSignals();
  const pid_t command = StartCommand({"/bin/sh", "-c", "sleep 30 & wait"}, {}, -1);
  ASSERT_GT(command, 0);
  pthread_kill(pthread_self(), SIGTERM);
  EXPECT_EQ(ForwardStopSignal(command, 5), SIGTERM);
  EXPECT_EQ(WaitForExit(command), 128 + SIGTERM);
}

TEST(ForwardStopSignal, CommandThatHandlesTheSignalEndsItsOwnWay) {
  BlockStopSignals();
  // Ctrl-C is for the job: one that traps it decides how it ends.
  const pid_t command = StartCommand({"/bin/sh", "-c", "trap 'exit 7' INT; while :; do sleep 0.05; done"}, {}, -1);
  ASSERT_GT(command, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the trap is set
  pthread_kill(pthread_self(), SIGINT);
  EXPECT_EQ(ForwardStopSignal(command, 5), SIGINT);
  EXPECT_EQ(WaitForExit(command), 7);
}

TEST(ForwardStopSignal, NothingHappensWithoutASignal) {
  BlockStopSignals();
  const pid_t command = StartCommand({"/bin/sh", "-c", "sleep 30"}, {}, -1);
  ASSERT_GT(command, 0);
  EXPECT_EQ(ForwardStopSignal(command, 0.1), 0);
  EXPECT_FALSE(ExitStatusIfEnded(command).has_value());
  SignalCommandGroup(command, SIGKILL);
  EXPECT_EQ(WaitForExit(command), 128 + SIGKILL);
}

}  // namespace
}  // namespace collwatch
