// What the model says about a process: its state in words, how it ended, and which
// processes stand for a rank (SampleProcess itself on real child processes:
// process/process_sample_test.cc). Threading: single-threaded.
#include "analyzer/liveness.h"

#include <string>
#include <utility>

#include "gtest/gtest.h"

namespace collwatch::analyzer::liveness_test {
namespace {

constexpr int64_t kSecond = 1'000'000'000;
constexpr int64_t kNow = 1'700'000'000'000'000'000;

ProcessInfo Info(int32_t global_rank, int32_t pid) {
  ProcessInfo info;
  info.host = "node0";
  info.pid = pid;
  info.global_rank = global_rank;
  return info;
}

ProcessSample Sample(ProcessState state, int64_t at_ns, bool cpu_advancing = false, std::string wait_channel = "") {
  ProcessSample sample;
  sample.state = state;
  sample.sampled_ns = at_ns;
  sample.cpu_advancing = cpu_advancing;
  sample.wait_channel = std::move(wait_channel);
  return sample;
}

TEST(DescribeProcessTest, StoppedRankWithAStaleHeartbeat) {
  JobModel model;
  const ProcessId process = model.AddProcess(Info(5, 4242));
  model.SetStatus(process, ProcessStatus::kSilent, static_cast<uint64_t>(kNow - 12 * kSecond), 0);
  model.SetSample(process, Sample(ProcessState::kStopped, kNow - kSecond / 2));
  const ProcessReport report = DescribeProcess(model, process, 1, kNow);
  EXPECT_EQ(report.rank, 1);
  EXPECT_EQ(report.global_rank, 5);
  EXPECT_EQ(report.pid, 4242);
  EXPECT_EQ(report.host, "node0");
  EXPECT_EQ(report.state, "stopped");
  EXPECT_FALSE(report.cpu_advancing);
  EXPECT_NEAR(report.heartbeat_age_s, 12.0, 1e-6);
  EXPECT_FALSE(report.heartbeat_fresh);
  EXPECT_EQ(report.ended, "");
}

TEST(DescribeProcessTest, SleepingRankNamesItsWaitAndAFreshHeartbeat) {
  JobModel model;
  const ProcessId process = model.AddProcess(Info(0, 100));
  model.SetStatus(process, ProcessStatus::kRunning, static_cast<uint64_t>(kNow - kSecond / 10), 0);
  model.SetSample(process, Sample(ProcessState::kSleeping, kNow, false, "futex_wait_queue"));
  ProcessReport report = DescribeProcess(model, process, 0, kNow);
  EXPECT_EQ(report.state, "sleeping in futex_wait_queue");
  EXPECT_TRUE(report.heartbeat_fresh);
  model.SetSample(process, Sample(ProcessState::kDiskWait, kNow + 1, true, "io_schedule"));
  report = DescribeProcess(model, process, 0, kNow);
  EXPECT_EQ(report.state, "I/O (in io_schedule)");
  EXPECT_TRUE(report.cpu_advancing);
  // An older sample (another observer, late) does not replace a newer one.
  model.SetSample(process, Sample(ProcessState::kRunning, kNow - kSecond));
  EXPECT_EQ(DescribeProcess(model, process, 0, kNow).state, "I/O (in io_schedule)");
}

TEST(DescribeProcessTest, HowProcessesEnded) {
  JobModel model;
  const ProcessId exited = model.AddProcess(Info(0, 100));
  model.SetStatus(exited, ProcessStatus::kExited, static_cast<uint64_t>(kNow), 0);
  model.SetExitCode(exited, 1);
  const ProcessId exited_unknown = model.AddProcess(Info(1, 101));
  model.SetStatus(exited_unknown, ProcessStatus::kExited, static_cast<uint64_t>(kNow), 0);
  const ProcessId killed = model.AddProcess(Info(2, 102));
  model.SetStatus(killed, ProcessStatus::kDead, static_cast<uint64_t>(kNow), 0);
  const ProcessId clean = model.AddProcess(Info(3, 103));
  model.SetStatus(clean, ProcessStatus::kExited, static_cast<uint64_t>(kNow), 0);
  model.SetExitCode(clean, 0);
  const ProcessId silent = model.AddProcess(Info(4, 104));
  model.SetStatus(silent, ProcessStatus::kSilent, static_cast<uint64_t>(kNow), 0);

  EXPECT_EQ(DescribeProcess(model, exited, 0, kNow).ended, "exited with 1");
  EXPECT_EQ(DescribeProcess(model, exited, 0, kNow).state, "gone");
  EXPECT_EQ(DescribeProcess(model, exited_unknown, 1, kNow).ended, "exited (status not recorded)");
  EXPECT_EQ(DescribeProcess(model, killed, 2, kNow).ended, "killed or crashed (no exit recorded)");
  EXPECT_EQ(DescribeProcess(model, silent, 4, kNow).ended, "");
  EXPECT_EQ(DescribeProcess(model, silent, 4, kNow).state, "unknown") << "never sampled";
  EXPECT_TRUE(EndedBadly(model, exited));
  EXPECT_FALSE(EndedBadly(model, exited_unknown)) << "nothing says it failed";
  EXPECT_TRUE(EndedBadly(model, killed));
  EXPECT_FALSE(EndedBadly(model, clean));
  EXPECT_FALSE(EndedBadly(model, silent));
  EXPECT_EQ(EndOf(model.process(killed)), ProcessEnd::kKilledOrCrashed);
  EXPECT_EQ(ProcessEndName(EndOf(model.process(clean))), "exited");
}

TEST(DescribeProcessTest, ProcessesCollwatchStoppedAreNotFailures) {
  JobModel model;
  const ProcessId died_before = model.AddProcess(Info(0, 100));
  model.SetStatus(died_before, ProcessStatus::kDead, static_cast<uint64_t>(kNow - 10 * kSecond), 0);
  model.SetSample(died_before, Sample(ProcessState::kGone, kNow - 9 * kSecond));
  const ProcessId killed_at_stop = model.AddProcess(Info(1, 101));
  model.SetStatus(killed_at_stop, ProcessStatus::kDead, static_cast<uint64_t>(kNow - kSecond / 10), 0);
  // Stopped by the user long before (stale heartbeat), still seen alive until collwatch
  // killed it.
  const ProcessId stopped_then_killed = model.AddProcess(Info(2, 102));
  model.SetStatus(stopped_then_killed, ProcessStatus::kDead, static_cast<uint64_t>(kNow - 60 * kSecond), 0);
  model.SetSample(stopped_then_killed, Sample(ProcessState::kGone, kNow + kSecond / 4));
  model.ForgetDeathsAfter(kNow);

  EXPECT_EQ(EndOf(model.process(died_before)), ProcessEnd::kKilledOrCrashed);
  EXPECT_EQ(model.process(died_before).status, ProcessStatus::kDead);
  for (ProcessId stopped : {killed_at_stop, stopped_then_killed}) {
    EXPECT_EQ(EndOf(model.process(stopped)), ProcessEnd::kStoppedByCollwatch) << stopped;
    EXPECT_EQ(model.process(stopped).status, ProcessStatus::kRunning) << "the analysis sees it as it was";
    EXPECT_NE(model.process(stopped).sample.state, ProcessState::kGone) << "not gone as of the stop";
    EXPECT_FALSE(EndedBadly(model, stopped));
    EXPECT_EQ(DescribeProcess(model, stopped, 0, kNow).ended, "stopped by collwatch");
  }
}

TEST(ObserveProcessTest, ARankSeenBeforeItsRingIsTakenOverByIt) {
  JobModel model;
  const ProcessId seen = model.ObserveProcess(Info(1, 200), Sample(ProcessState::kStopped, kNow));
  EXPECT_TRUE(model.process(seen).observed_only);
  EXPECT_EQ(model.process(seen).calls.size(), 0u);
  EXPECT_EQ(DescribeProcess(model, seen, 1, kNow).state, "stopped");
  EXPECT_EQ(DescribeProcess(model, seen, 1, kNow).heartbeat_age_s, -1) << "no ring, no heartbeat";
  // Seen again: the same entry, updated in place.
  EXPECT_EQ(model.ObserveProcess(Info(1, 200), Sample(ProcessState::kRunning, kNow + kSecond)), seen);
  EXPECT_EQ(model.process_count(), 1u);
  EXPECT_EQ(model.process(seen).sample.state, ProcessState::kRunning);
  // Its ring appears: the ring's identity takes over the same entry, the sample stays.
  ProcessInfo ring = Info(1, 200);
  ring.realtime_offset_ns = 42;
  EXPECT_EQ(model.AddProcess(ring), seen);
  EXPECT_FALSE(model.process(seen).observed_only);
  EXPECT_EQ(model.process(seen).info.realtime_offset_ns, 42);
  EXPECT_EQ(model.process(seen).sample.state, ProcessState::kRunning);
  // A process on another host with the same pid is another process.
  ProcessInfo elsewhere = Info(2, 200);
  elsewhere.host = "node1";
  EXPECT_NE(model.ObserveProcess(elsewhere, Sample(ProcessState::kRunning, kNow)), seen);
  EXPECT_EQ(model.FindProcess("node1", 200), ProcessId{1});
  EXPECT_FALSE(model.FindProcess("node2", 200).has_value());
}

TEST(ObserveProcessTest, AWrapperOfARankWithARingIsNoRankItself) {
  JobModel model;
  const ProcessId wrapper = model.ObserveProcess(Info(3, 300), Sample(ProcessState::kSleeping, kNow));
  EXPECT_TRUE(IsRankProcess(model, wrapper)) << "no ring claims RANK 3 yet";
  const ProcessId ranked = model.AddProcess(Info(3, 301));
  EXPECT_NE(ranked, wrapper);
  EXPECT_FALSE(IsRankProcess(model, wrapper));
  EXPECT_TRUE(IsRankProcess(model, ranked));
  // A rank that vanished before any NCCL call, while other ranks used NCCL, failed.
  const ProcessId lost = model.ObserveProcess(Info(4, 400), Sample(ProcessState::kGone, kNow));
  EXPECT_EQ(EndOf(model.process(lost)), ProcessEnd::kGone);
  EXPECT_TRUE(EndedBadly(model, lost));
}

TEST(ObserveProcessTest, AProgramThatNeverUsedNcclDidNotFailByEnding) {
  JobModel model;
  const ProcessId gone = model.ObserveProcess(Info(0, 500), Sample(ProcessState::kGone, kNow));
  EXPECT_EQ(EndOf(model.process(gone)), ProcessEnd::kGone);
  EXPECT_FALSE(EndedBadly(model, gone)) << "RANK set, but nothing in the job used NCCL";
}

}  // namespace
}  // namespace collwatch::analyzer::liveness_test
