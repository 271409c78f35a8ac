// Watch deltas: applying the delta to the old state gives the new one, and a delta
// carries only what changed.
#include "collector/watch_delta.h"

#include <gtest/gtest.h>

#include "google/protobuf/util/message_differencer.h"

namespace collwatch::watch_delta_test {
namespace {

using google::protobuf::util::MessageDifferencer;

// A job as LiveState::Snapshot would give it: `nranks` processes on one communicator.
v1::ClusterState Job(int nranks, uint64_t seq) {
  v1::ClusterState state;
  state.set_job("job-1");
  v1::CommState* comm = state.add_comms();
  comm->set_comm_id(0x10);
  comm->set_nranks(nranks);
  for (int rank = 0; rank < nranks; ++rank) {
    v1::RankIdentity* identity = state.add_ranks();
    identity->set_job("job-1");
    identity->set_host("node-" + std::to_string(rank / 8));
    identity->set_pid(1000 + rank);
    identity->set_rank(rank);
    identity->set_ring_path("/dev/shm/collwatch-1000/job-1.rank" + std::to_string(rank));
    v1::RankStatus* status = state.add_rank_status();
    status->set_process("key-" + std::to_string(1000 + rank));
    status->set_connected(true);
    status->set_events(seq * 3);
    v1::RankProgress* progress = comm->add_ranks();
    progress->set_rank(rank);
    progress->set_entered_seq(seq);
    progress->set_completed_seq(seq);
  }
  return state;
}

v1::ClusterState Applied(const v1::ClusterState& previous, const v1::ClusterState& current) {
  v1::ClusterState state = previous;
  ApplyWatchResponse(MakeWatchDelta(previous, current), &state);
  return state;
}

TEST(WatchDeltaTest, NothingChangedSendsAnEmptyDelta) {
  const v1::ClusterState state = Job(64, 10);
  const v1::WatchResponse delta = MakeWatchDelta(state, state);
  EXPECT_FALSE(delta.full());
  EXPECT_EQ(delta.state().ByteSizeLong(), 0u);
}

TEST(WatchDeltaTest, OneRankMovingSendsThatRankOnly) {
  const v1::ClusterState before = Job(64, 10);
  v1::ClusterState after = before;
  after.mutable_comms(0)->mutable_ranks(7)->set_entered_seq(11);
  after.mutable_rank_status(7)->set_events(33);
  const v1::WatchResponse delta = MakeWatchDelta(before, after);
  ASSERT_EQ(delta.state().comms_size(), 1);
  ASSERT_EQ(delta.state().comms(0).ranks_size(), 1);
  EXPECT_EQ(delta.state().comms(0).ranks(0).rank(), 7);
  ASSERT_EQ(delta.state().rank_status_size(), 1);
  EXPECT_EQ(delta.state().rank_status(0).process(), "key-1007");
  EXPECT_EQ(delta.state().ranks_size(), 0) << "an identity is sent once";
  EXPECT_LT(delta.ByteSizeLong() * 20, before.ByteSizeLong()) << "delta " << delta.ByteSizeLong() << " B, full "
                                                               << before.ByteSizeLong() << " B";
  EXPECT_TRUE(MessageDifferencer::Equals(Applied(before, after), after));
}

TEST(WatchDeltaTest, NewProcessesCommunicatorsAndFindingsArrive) {
  const v1::ClusterState before = Job(4, 10);
  v1::ClusterState after = Job(6, 12);
  v1::CommState* split = after.add_comms();
  split->set_comm_id(0x08);  // sorts before the first: the order must still match
  split->set_nranks(2);
  split->set_parent_id(0x10);
  split->add_ranks()->set_rank(1);
  after.mutable_comms(0)->set_oldest_inflight_seq(12);
  after.mutable_comms(0)->set_oldest_inflight_op("all-reduce 4 B f32");
  std::sort(after.mutable_comms()->begin(), after.mutable_comms()->end(),
            [](const v1::CommState& a, const v1::CommState& b) { return a.comm_id() < b.comm_id(); });
  v1::Finding* finding = after.add_findings();
  finding->set_kind(v1::NOT_JOINED);
  finding->set_seq(12);
  const v1::WatchResponse delta = MakeWatchDelta(before, after);
  EXPECT_EQ(delta.state().findings_size(), 1);
  v1::ClusterState applied = Applied(before, after);
  std::string difference;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&difference);
  EXPECT_TRUE(differencer.Compare(applied, after)) << difference;

  // A second finding: only it travels.
  v1::ClusterState later = after;
  later.add_findings()->set_kind(v1::RANK_LOST);
  const v1::WatchResponse next = MakeWatchDelta(after, later);
  ASSERT_EQ(next.state().findings_size(), 1);
  EXPECT_EQ(next.state().findings(0).kind(), v1::RANK_LOST);
  ApplyWatchResponse(next, &applied);
  EXPECT_TRUE(MessageDifferencer::Equals(applied, later));
}

// A stall's stacks come after it: the finding travels again, and the job's stacks too.
TEST(WatchDeltaTest, AFindingWhoseStacksCameInTravelsAgain) {
  v1::ClusterState before = Job(4, 10);
  before.add_findings()->set_kind(v1::PATH_DIVERGENCE);
  before.add_findings()->set_kind(v1::NOT_JOINED);
  v1::ClusterState after = before;
  v1::StackClass* merged = after.mutable_findings(1)->mutable_stacks()->add_classes();
  merged->add_ranks(1);
  merged->set_where("sleeping in clock_nanosleep (libc.so.6)");
  after.mutable_findings(1)->mutable_stacks()->set_taken_ns(42);
  *after.mutable_stacks() = after.findings(1).stacks();
  after.add_findings()->set_kind(v1::RANK_LOST);
  const v1::WatchResponse delta = MakeWatchDelta(before, after);
  EXPECT_EQ(delta.findings_from(), 1u);
  ASSERT_EQ(delta.state().findings_size(), 2) << "the changed finding and the new one";
  EXPECT_TRUE(delta.state().has_stacks());
  v1::ClusterState applied = before;
  ApplyWatchResponse(delta, &applied);
  EXPECT_TRUE(MessageDifferencer::Equals(applied, after));
}

TEST(WatchDeltaTest, AFullStateReplacesEverything) {
  v1::ClusterState state = Job(8, 3);
  v1::WatchResponse full;
  full.set_full(true);
  *full.mutable_state() = Job(2, 100);
  ApplyWatchResponse(full, &state);
  EXPECT_TRUE(MessageDifferencer::Equals(state, Job(2, 100)));
}

}  // namespace
}  // namespace collwatch::watch_delta_test
