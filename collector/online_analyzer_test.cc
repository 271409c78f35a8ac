// The online analyzer's liveness plumbing: a process seen from outside before its ring
// is taken over by its stream, what a stream says about its process (a look at it, its
// exit status) reaches the report, and so does the note of a rank that made no ring. (A
// finding's trip through the proto: collector/finding_codec_test.cc.)
// Threading: single-threaded.
#include "collector/online_analyzer.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "store/event_codec.h"

namespace collwatch::online_analyzer_test {
namespace {

constexpr int64_t kNow = 1'700'000'000'000'000'000;

v1::RankIdentity Identity() {
  v1::RankIdentity identity;
  identity.set_job("job");
  identity.set_host("node0");
  identity.set_pid(4242);
  identity.set_rank(1);
  identity.set_world_size(2);
  identity.set_lane_count(2);
  return identity;
}

TEST(OnlineAnalyzerLivenessTest, ARankSeenBeforeItsRingIsOneProcessWithItsStream) {
  OnlineAnalyzer online{analyzer::AnalyzerOptions{}};
  ProcessInfo seen;
  seen.host = "node0";
  seen.pid = 4242;
  seen.global_rank = 1;
  ProcessSample stopped;
  stopped.state = ProcessState::kStopped;
  stopped.sampled_ns = kNow;
  online.ObserveProcess(seen, stopped);
  online.Tick(kNow);
  analyzer::ReportInfo info = online.Info("job");
  ASSERT_EQ(info.ranks.size(), 1u);
  EXPECT_EQ(info.ranks[0].global_rank, 1);
  EXPECT_EQ(info.ranks[0].end, analyzer::ProcessEnd::kRunning) << "stopped is not ended";

  // Its ring appears, its stream reports it exited with 3, and the agent saw it gone.
  v1::StreamEventsRequest batch;
  batch.set_writer_status(v1::WRITER_STATUS_EXITED);
  batch.set_exit_recorded(true);
  batch.set_exit_code(3);
  batch.mutable_process()->set_state(v1::PROCESS_STATE_GONE);
  batch.mutable_process()->set_sampled_ns(kNow + 1'000'000'000);
  online.Enqueue("job/node0/4242/1", Identity(), ProcessUpdateFromBatch(batch, {}));
  online.Tick(kNow + 2'000'000'000);
  info = online.Info("job");
  ASSERT_EQ(info.ranks.size(), 1u) << "one process, not an observed one and a ring's";
  EXPECT_EQ(info.ranks[0].pid, 4242);
  EXPECT_EQ(info.ranks[0].end, analyzer::ProcessEnd::kExited);
  EXPECT_EQ(info.ranks[0].exit_code, 3);
  EXPECT_FALSE(analyzer::Healthy({}, info));
}

// `collwatch run` sees a rank through /proc that made no ring, then reads its note: the
// report gives the note's reason, not "gone without ever calling NCCL".
TEST(OnlineAnalyzerLivenessTest, ARankWithoutARingReadsAsNotRecordedForItsNotesReason) {
  OnlineAnalyzer online{analyzer::AnalyzerOptions{}};
  v1::StreamEventsRequest batch;  // rank 1 has a ring: some process of the job was recorded
  batch.set_writer_status(v1::WRITER_STATUS_EXITED);
  batch.set_exit_recorded(true);
  batch.set_exit_code(0);
  online.Enqueue("job/node0/4242/1", Identity(), ProcessUpdateFromBatch(batch, {}));
  ProcessInfo seen;
  seen.host = "node0";
  seen.pid = 4243;
  seen.global_rank = 0;
  ProcessSample gone;
  gone.state = ProcessState::kGone;
  gone.sampled_ns = kNow;
  online.ObserveProcess(seen, gone);
  online.Tick(kNow);
  analyzer::ReportInfo info = online.Info("job");
  ASSERT_EQ(info.ranks.size(), 2u);
  EXPECT_TRUE(analyzer::WhyNotHealthy({}, info).starts_with("1 rank is gone without ever calling NCCL"))
      << "no note read yet: " << analyzer::WhyNotHealthy({}, info);

  NoRingNoteRead note;
  note.host = "node0";
  note.pid = 4243;
  note.rank = 0;
  note.job = "job";
  note.why = "no ring: /dev/shm/collwatch-0 has 3.1 MiB free, a ring needs at least 0.9 MiB; raise it";
  online.NoteNoRing(note);
  online.Tick(kNow + 1'000'000'000, /*final_pass=*/true);
  info = online.Info("job");
  ASSERT_EQ(info.ranks.size(), 2u) << "the walk's process and the note's are one";
  EXPECT_EQ(info.ranks[0].pid, 4243);
  EXPECT_EQ(info.ranks[0].not_recorded, note.why);
  EXPECT_EQ(info.ranks[0].ended_text, absl::StrCat("not recorded: ", note.why));
  EXPECT_FALSE(analyzer::Healthy({}, info));
  const std::string verdict = analyzer::WhyNotHealthy({}, info);
  EXPECT_EQ(verdict.find("gone without ever calling NCCL"), std::string::npos) << verdict;
  EXPECT_NE(verdict.find(absl::StrCat("rank 0 (pid 4243) was not recorded (", note.why, ")")), std::string::npos)
      << verdict;
}

}  // namespace
}  // namespace collwatch::online_analyzer_test
