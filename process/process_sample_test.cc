// SampleProcess on real child processes (busy, blocked in a read, stopped, zombie,
// reaped), and process states to and from their names (run.json `rank_processes`,
// reports): every state survives the round trip, and no other text is a state.
// Threading: the test's thread and the children it forks.
#include "process/process_sample.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "ring/clocks.h"

namespace collwatch::process_sample_test {
namespace {

// A child process, SIGKILLed and reaped at the end of the test unless reaped before.
class Child {
 public:
  template <typename Body>
  explicit Child(Body body) {
    pid_ = fork();
    if (pid_ == 0) {
      body();
      _exit(0);
    }
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      Reap();
    }
  }
  pid_t pid() const { return pid_; }
  void Reap() {
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// Samples `pid` until its state is `want` (a child takes a moment to get there), for up
// to 5 s; returns the last sample.
ProcessSample SampleUntil(pid_t pid, ProcessState want) {
  ProcessSample sample;
  for (int attempt = 0; attempt < 500; ++attempt) {
    sample = SampleProcess(pid, nullptr, static_cast<int64_t>(RealtimeNs()));
    if (sample.state == want) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return sample;
}

[[noreturn]] void Spin() {
  volatile uint64_t counter = 0;
  while (true) counter = counter + 1;
}

TEST(SampleProcessTest, BusyProcessIsRunningAndItsCpuAdvances) {
  Child busy(Spin);
  ASSERT_GT(busy.pid(), 0);
  const ProcessSample first = SampleProcess(busy.pid(), nullptr, static_cast<int64_t>(RealtimeNs()));
  EXPECT_FALSE(first.cpu_advancing) << "no previous sample, nothing to compare";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const ProcessSample second = SampleProcess(busy.pid(), &first, static_cast<int64_t>(RealtimeNs()));
  EXPECT_EQ(second.state, ProcessState::kRunning);
  EXPECT_GT(second.cpu_ns, first.cpu_ns);
  EXPECT_TRUE(second.cpu_advancing);
  EXPECT_GT(second.sampled_ns, first.sampled_ns);
  EXPECT_TRUE(second.wait_channel.empty()) << "only a sleeping process has a wait channel";
}

TEST(SampleProcessTest, ProcessBlockedInAReadSleepsInTheKernel) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  Child reader([&] {
    char byte;
    (void)!read(pipe_fds[0], &byte, 1);  // blocks: nobody writes
  });
  ASSERT_GT(reader.pid(), 0);
  const ProcessSample first = SampleUntil(reader.pid(), ProcessState::kSleeping);
  EXPECT_EQ(first.state, ProcessState::kSleeping);
  // Kernels that hide wait channels answer "0"; where shown it is the pipe's read.
  if (!first.wait_channel.empty()) {
    EXPECT_NE(first.wait_channel.find("pipe"), std::string::npos) << first.wait_channel;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const ProcessSample second = SampleProcess(reader.pid(), &first, static_cast<int64_t>(RealtimeNs()));
  EXPECT_EQ(second.state, ProcessState::kSleeping);
  EXPECT_FALSE(second.cpu_advancing);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

TEST(SampleProcessTest, StoppedProcessIsStoppedAndItsCpuStandsStill) {
  Child busy(Spin);
  ASSERT_GT(busy.pid(), 0);
  ASSERT_EQ(kill(busy.pid(), SIGSTOP), 0);
  const ProcessSample first = SampleUntil(busy.pid(), ProcessState::kStopped);
  EXPECT_EQ(first.state, ProcessState::kStopped);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const ProcessSample second = SampleProcess(busy.pid(), &first, static_cast<int64_t>(RealtimeNs()));
  EXPECT_EQ(second.state, ProcessState::kStopped);
  EXPECT_EQ(second.cpu_ns, first.cpu_ns);
  EXPECT_FALSE(second.cpu_advancing);
}

TEST(SampleProcessTest, KilledChildIsAZombieUntilReapedThenGone) {
  Child busy(Spin);
  ASSERT_GT(busy.pid(), 0);
  ASSERT_EQ(kill(busy.pid(), SIGKILL), 0);
  EXPECT_EQ(SampleUntil(busy.pid(), ProcessState::kZombie).state, ProcessState::kZombie);
  busy.Reap();
  const ProcessSample gone = SampleProcess(busy.pid(), nullptr, static_cast<int64_t>(RealtimeNs()));
  EXPECT_EQ(gone.state, ProcessState::kGone);
  EXPECT_NE(gone.sampled_ns, 0);
}

TEST(SampleProcessTest, NamesOfStates) {
  EXPECT_EQ(ProcessStateName(ProcessState::kDiskWait), "I/O");
  EXPECT_EQ(ProcessStateName(ProcessState::kStopped), "stopped");
  EXPECT_EQ(ProcessStateName(ProcessState::kUnknown), "unknown");
  EXPECT_EQ(ParseProcessState("I/O"), ProcessState::kDiskWait);
  EXPECT_EQ(ParseProcessState("zombie"), ProcessState::kZombie);
  EXPECT_EQ(ParseProcessState("dead"), std::nullopt);
}


TEST(ProcessStateNameTest, EveryStateSurvivesTheRoundTripThroughItsName) {
  std::set<std::string> names;
  for (const ProcessState state : {ProcessState::kUnknown, ProcessState::kRunning, ProcessState::kSleeping,
                                   ProcessState::kDiskWait, ProcessState::kStopped, ProcessState::kZombie,
                                   ProcessState::kGone}) {
    const std::string name(ProcessStateName(state));
    EXPECT_TRUE(names.insert(name).second) << "two states share the name " << name;
    EXPECT_EQ(ParseProcessState(name), state) << name;
  }
  EXPECT_EQ(ProcessStateName(ProcessState::kDiskWait), "I/O");
}

TEST(ProcessStateNameTest, OtherTextIsNoState) {
  EXPECT_EQ(ParseProcessState(""), std::nullopt);
  EXPECT_EQ(ParseProcessState("Running"), std::nullopt) << "names are exact";
  EXPECT_EQ(ParseProcessState("disk wait"), std::nullopt);
  EXPECT_EQ(ProcessStateName(static_cast<ProcessState>(99)), "unknown");
}

}  // namespace
}  // namespace collwatch::process_sample_test
