// The online analyzer's liveness plumbing: a process seen from outside before its ring
// is taken over by its stream, and what a stream says about its process (a look at it,
// its exit status) reaches the report. (A finding's trip through the proto:
// collector/finding_codec_test.cc.)
// Threading: single-threaded.
#include "collector/online_analyzer.h"

#include <string>

#include "gtest/gtest.h"
#include "store/event_codec.h"

namespace collwatch {
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

}  // namespace
}  // namespace collwatch
