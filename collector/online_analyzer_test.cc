// The online analyzer's liveness plumbing: a finding's processes survive the trip
// through the proto (Watch, `collwatch run --collector`), a process seen from outside
// before its ring is taken over by its stream, and what a stream says about its
// process (a look at it, its exit status) reaches the report.
#include "collector/online_analyzer.h"

#include "gtest/gtest.h"
#include "store/event_codec.h"

namespace collwatch {
namespace {

constexpr int64_t kNow = 1'700'000'000'000'000'000;

TEST(FindingProtoTest, ProcessesSurviveTheRoundTrip) {
  analyzer::Finding finding;
  finding.kind = analyzer::FindingKind::kTransportStall;
  finding.comm_id = 0x3f2a9c0100000001ull;
  finding.seq = 7;
  finding.lagging_ranks = {1};
  analyzer::ProcessReport stopped;
  stopped.rank = 1;
  stopped.global_rank = 5;
  stopped.pid = 4242;
  stopped.host = "node0";
  stopped.state = "stopped";
  stopped.cpu_advancing = false;
  stopped.heartbeat_age_s = 12.5;
  stopped.heartbeat_fresh = false;
  analyzer::ProcessReport ended;
  ended.rank = 0;
  ended.pid = 4241;
  ended.host = "node1";
  ended.state = "gone";
  ended.cpu_advancing = true;
  ended.heartbeat_fresh = true;
  ended.ended = "exited with 1";
  finding.processes = {stopped, ended};

  v1::Finding wire;
  FindingToProto(finding, &wire);
  v1::Finding parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  const analyzer::Finding back = FindingFromProto(parsed);
  ASSERT_EQ(back.processes.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const analyzer::ProcessReport& want = finding.processes[i];
    const analyzer::ProcessReport& got = back.processes[i];
    EXPECT_EQ(got.rank, want.rank);
    EXPECT_EQ(got.global_rank, want.global_rank);
    EXPECT_EQ(got.pid, want.pid);
    EXPECT_EQ(got.host, want.host);
    EXPECT_EQ(got.state, want.state);
    EXPECT_EQ(got.cpu_advancing, want.cpu_advancing);
    EXPECT_DOUBLE_EQ(got.heartbeat_age_s, want.heartbeat_age_s);
    EXPECT_EQ(got.heartbeat_fresh, want.heartbeat_fresh);
    EXPECT_EQ(got.ended, want.ended);
  }
  EXPECT_EQ(back.processes[1].global_rank, -1);
}

TEST(ProcessSampleWireTest, RoundTripAndBoundsOnWhatAnAgentClaims) {
  ProcessSample sample;
  sample.state = ProcessState::kDiskWait;
  sample.wait_channel = "io_schedule";
  sample.cpu_ns = 123'000'000;
  sample.cpu_advancing = true;
  sample.sampled_ns = kNow;
  const ProcessSample back = ProcessSampleFromWire(ProcessSampleToWire(sample));
  EXPECT_EQ(back.state, sample.state);
  EXPECT_EQ(back.wait_channel, sample.wait_channel);
  EXPECT_EQ(back.cpu_ns, sample.cpu_ns);
  EXPECT_EQ(back.cpu_advancing, sample.cpu_advancing);
  EXPECT_EQ(back.sampled_ns, sample.sampled_ns);

  v1::ProcessSample hostile;
  hostile.set_state(static_cast<v1::ProcessState>(99));
  hostile.set_wait_channel(std::string(1000, 'w'));
  hostile.set_sampled_ns(-5);
  const ProcessSample bounded = ProcessSampleFromWire(hostile);
  EXPECT_EQ(bounded.state, ProcessState::kUnknown);
  EXPECT_EQ(bounded.wait_channel.size(), 64u);
  EXPECT_EQ(bounded.sampled_ns, 0);
}

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
