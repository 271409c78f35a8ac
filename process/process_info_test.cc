// The one liveness rule: what a ring says of its writer (StatusOfRing), how a process is
// doing from its status and a look at it (LivenessOf), and which of those no longer take
// part in the job (IsLost, IsLostWithoutExit); a test per outcome. Also status names and
// clock offsets. Threading: single-threaded.
#include "process/process_info.h"

#include <cstdint>
#include <set>
#include <string>

#include "gtest/gtest.h"

namespace collwatch::process_info_test {
namespace {

using ring::WriterState;

constexpr uint64_t kSecondNs = 1'000'000'000;
constexpr uint64_t kBeat = 100 * kSecondNs;  // the writer's latest heartbeat (its CLOCK_MONOTONIC)

TEST(StatusOfRingTest, AWriterThatWentThroughExitIsExitedAliveOrNot) {
  EXPECT_EQ(StatusOfRing(WriterState::kExited, /*writer_alive=*/false, kBeat, kBeat), ProcessStatus::kExited);
  EXPECT_EQ(StatusOfRing(WriterState::kExited, /*writer_alive=*/true, kBeat, kBeat + 60 * kSecondNs),
            ProcessStatus::kExited)
      << "still in its exit handlers: no longer beating, not silent";
}

TEST(StatusOfRingTest, AWriterGoneWithoutExitIsDead) {
  EXPECT_EQ(StatusOfRing(WriterState::kRunning, /*writer_alive=*/false, kBeat, kBeat), ProcessStatus::kDead);
  EXPECT_EQ(StatusOfRing(WriterState::kDisabled, /*writer_alive=*/false, kBeat, kBeat), ProcessStatus::kDead)
      << "recording had stopped, then the process died";
}

TEST(StatusOfRingTest, ALiveWriterThatStoppedRecordingIsDisabled) {
  EXPECT_EQ(StatusOfRing(WriterState::kDisabled, /*writer_alive=*/true, kBeat, kBeat + 60 * kSecondNs),
            ProcessStatus::kDisabled);
}

TEST(StatusOfRingTest, ALiveWriterIsSilentOnlyPastTheSilenceThreshold) {
  const auto status = [](uint64_t now_ns, double silent_after_s = kSilentAfterS) {
    return StatusOfRing(WriterState::kRunning, /*writer_alive=*/true, kBeat, now_ns, silent_after_s);
  };
  EXPECT_EQ(status(kBeat), ProcessStatus::kRunning);
  EXPECT_EQ(status(kBeat + 3 * kSecondNs), ProcessStatus::kRunning) << "exactly at the threshold: not yet";
  EXPECT_EQ(status(kBeat + 3 * kSecondNs + 1), ProcessStatus::kSilent);
  EXPECT_EQ(status(kBeat - kSecondNs), ProcessStatus::kRunning) << "a beat from after now (clocks apart)";
  EXPECT_EQ(status(kBeat + 2 * kSecondNs, /*silent_after_s=*/1), ProcessStatus::kSilent);
  EXPECT_EQ(StatusOfRing(WriterState::kRunning, /*writer_alive=*/true, /*heartbeat_ns=*/0, kBeat),
            ProcessStatus::kRunning)
      << "no beat yet: nothing says it stopped";
}

ProcessSample Look(ProcessState state) {
  ProcessSample sample;
  sample.state = state;
  sample.sampled_ns = 1'700'000'000'000'000'000;
  return sample;
}

TEST(LivenessOfTest, ExitedAndDeadAreSoWhateverALookSays) {
  for (const ProcessState state : {ProcessState::kRunning, ProcessState::kGone, ProcessState::kZombie}) {
    EXPECT_EQ(LivenessOf(ProcessStatus::kExited, Look(state)), Liveness::kExited) << ProcessStateName(state);
    EXPECT_EQ(LivenessOf(ProcessStatus::kDead, Look(state)), Liveness::kKilledOrCrashed) << ProcessStateName(state);
  }
  EXPECT_EQ(LivenessOf(ProcessStatus::kExited, {}), Liveness::kExited);
  EXPECT_EQ(LivenessOf(ProcessStatus::kDead, {}), Liveness::kKilledOrCrashed);
}

TEST(LivenessOfTest, SeenGoneOrAZombieIsGone) {
  for (const ProcessStatus status : {ProcessStatus::kRunning, ProcessStatus::kSilent, ProcessStatus::kDisabled}) {
    EXPECT_EQ(LivenessOf(status, Look(ProcessState::kGone)), Liveness::kGone) << ProcessStatusName(status);
    EXPECT_EQ(LivenessOf(status, Look(ProcessState::kZombie)), Liveness::kGone) << ProcessStatusName(status);
  }
}

TEST(LivenessOfTest, SilentButSeenStoppedOrInIoIsStopped) {
  EXPECT_EQ(LivenessOf(ProcessStatus::kSilent, Look(ProcessState::kStopped)), Liveness::kStopped);
  EXPECT_EQ(LivenessOf(ProcessStatus::kSilent, Look(ProcessState::kDiskWait)), Liveness::kStopped);
}

TEST(LivenessOfTest, SilentWithNothingToSayItIsThereIsSilent) {
  EXPECT_EQ(LivenessOf(ProcessStatus::kSilent, {}), Liveness::kSilent);
  EXPECT_EQ(LivenessOf(ProcessStatus::kSilent, Look(ProcessState::kSleeping)), Liveness::kSilent);
  EXPECT_EQ(LivenessOf(ProcessStatus::kSilent, Look(ProcessState::kRunning)), Liveness::kSilent);
}

TEST(LivenessOfTest, RunningOrDisabledWithNothingElseIsRunning) {
  EXPECT_EQ(LivenessOf(ProcessStatus::kRunning, {}), Liveness::kRunning);
  EXPECT_EQ(LivenessOf(ProcessStatus::kDisabled, {}), Liveness::kRunning);
  EXPECT_EQ(LivenessOf(ProcessStatus::kRunning, Look(ProcessState::kStopped)), Liveness::kRunning)
      << "still beating: a stop too short to matter";
}

TEST(LivenessOfTest, AnUnsampledLookAddsNothing) {
  ProcessSample never;
  never.state = ProcessState::kGone;  // sampled_ns 0: never looked at
  EXPECT_EQ(LivenessOf(ProcessStatus::kRunning, never), Liveness::kRunning);
  EXPECT_EQ(LivenessOf(ProcessStatus::kSilent, never), Liveness::kSilent);
}

TEST(IsLostTest, LostIsEveryEndingAndSilence) {
  EXPECT_FALSE(IsLost(Liveness::kRunning));
  EXPECT_FALSE(IsLost(Liveness::kStopped)) << "stopped is still there";
  EXPECT_TRUE(IsLost(Liveness::kSilent));
  EXPECT_TRUE(IsLost(Liveness::kExited));
  EXPECT_TRUE(IsLost(Liveness::kKilledOrCrashed));
  EXPECT_TRUE(IsLost(Liveness::kGone));
}

TEST(IsLostTest, LostWithoutExitLeavesOutExited) {
  EXPECT_FALSE(IsLostWithoutExit(Liveness::kRunning));
  EXPECT_FALSE(IsLostWithoutExit(Liveness::kStopped));
  EXPECT_FALSE(IsLostWithoutExit(Liveness::kExited)) << "every rank exits at the end of a job that went well";
  EXPECT_TRUE(IsLostWithoutExit(Liveness::kSilent));
  EXPECT_TRUE(IsLostWithoutExit(Liveness::kKilledOrCrashed));
  EXPECT_TRUE(IsLostWithoutExit(Liveness::kGone));
}

TEST(ProcessStatusNameTest, EachStatusHasItsOwnName) {
  std::set<std::string> names;
  for (const ProcessStatus status : {ProcessStatus::kRunning, ProcessStatus::kExited, ProcessStatus::kDisabled,
                                     ProcessStatus::kDead, ProcessStatus::kSilent}) {
    const std::string name(ProcessStatusName(status));
    EXPECT_NE(name, "unknown");
    EXPECT_TRUE(names.insert(name).second) << "two statuses share the name " << name;
  }
  EXPECT_EQ(ProcessStatusName(ProcessStatus::kDisabled), "recording disabled");
  EXPECT_EQ(ProcessStatusName(static_cast<ProcessStatus>(99)), "unknown");
}

TEST(RealtimeOffsetTest, IsRealtimeMinusMonotonicWithinTheModelsRange) {
  EXPECT_EQ(RealtimeOffsetNs(1'700'000'000'000'000'000, 5'000'000'000), 1'700'000'000'000'000'000 - 5'000'000'000);
  EXPECT_EQ(RealtimeOffsetNs(5, 7), -2);
  EXPECT_EQ(RealtimeOffsetNs(UINT64_MAX, 0), kMaxTimeNs);
  EXPECT_EQ(RealtimeOffsetNs(0, UINT64_MAX), -kMaxTimeNs);
}

}  // namespace
}  // namespace collwatch::process_info_test
