// Live state counts ranks as processes hold them: a process without RANK whose events
// name two ranks of the world communicator counts (and shows) as those two ranks.
#include "collector/live_state.h"

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "ring/ring_format.h"

namespace collwatch::live_state_test {
namespace {

constexpr uint64_t kWorld = 0x77;
constexpr uint64_t kLocal = 0x11;

v1::RankIdentity Identity(int32_t pid, int32_t rank) {
  v1::RankIdentity identity;
  identity.set_job("job1");
  identity.set_host("node0");
  identity.set_pid(pid);
  identity.set_rank(rank);
  return identity;
}

// One all-reduce entered on each (communicator, rank, size).
v1::StreamEventsRequest Entering(const std::vector<std::tuple<uint64_t, int32_t, int32_t>>& ranks) {
  v1::StreamEventsRequest batch;
  uint64_t index = 0;
  for (const auto& [comm, rank, nranks] : ranks) {
    v1::Event* event = batch.add_events();
    event->set_index(index++);
    event->set_kind(v1::EVENT_KIND_ENTER);
    event->set_fn(static_cast<uint32_t>(ring::ApiFn::kAllReduce));
    event->set_comm_id(comm);
    event->set_rank(rank);
    event->set_nranks(nranks);
    event->set_seq(1);
  }
  batch.set_writer_status(v1::WRITER_STATUS_RUNNING);
  return batch;
}

TEST(LiveStateTest, ProcessesOfSeveralRanksCountAsTheirRanks) {
  LiveState state;
  state.StreamOpened("a", Identity(10, ring::kUnset));
  state.StreamOpened("b", Identity(11, ring::kUnset));
  LiveSummary summary = state.Summary();
  EXPECT_EQ(summary.processes_known, 2);
  EXPECT_EQ(summary.ranks_known, 2) << "a process of unknown ranks holds at least one";

  state.BatchAccepted("a", Entering({{kWorld, 0, 4}, {kWorld, 1, 4}, {kLocal, 0, 2}, {kLocal, 1, 2}}), 4);
  state.BatchAccepted("b", Entering({{kWorld, 2, 4}, {kWorld, 3, 4}}), 2);
  summary = state.Summary();
  EXPECT_EQ(summary.processes_known, 2);
  EXPECT_EQ(summary.ranks_known, 4);
  EXPECT_EQ(summary.ranks_reporting, 4);

  const v1::ClusterState snapshot = state.Snapshot("job1");
  ASSERT_EQ(snapshot.rank_status_size(), 2);
  std::map<std::string, std::vector<int32_t>> ranks;
  for (const v1::RankStatus& status : snapshot.rank_status()) {
    ranks[status.process()].assign(status.ranks().begin(), status.ranks().end());
  }
  EXPECT_EQ(ranks["a"], (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(ranks["b"], (std::vector<int32_t>{2, 3}));

  state.StreamClosed("b");
  EXPECT_EQ(state.Summary().ranks_reporting, 2);
}

// A process driving two ranks groups their collectives; the group's GroupEnd completes
// them (their own records carry no completion).
TEST(LiveStateTest, GroupedCollectivesCompleteWithTheirGroup) {
  LiveState state;
  state.StreamOpened("a", Identity(10, ring::kUnset));
  v1::StreamEventsRequest members = Entering({{kWorld, 0, 2}, {kWorld, 1, 2}});
  for (v1::Event& event : *members.mutable_events()) event.set_group_id(7);
  state.BatchAccepted("a", members, 2);
  EXPECT_EQ(state.Summary().oldest_inflight_comm, kWorld);

  v1::StreamEventsRequest end;
  v1::Event* event = end.add_events();
  event->set_index(2);
  event->set_kind(v1::EVENT_KIND_RETURN);
  event->set_fn(static_cast<uint32_t>(ring::ApiFn::kGroupEnd));
  event->set_group_id(7);
  event->set_flags(ring::kFlagCompletesAtReturn);
  state.BatchAccepted("a", end, 1);
  EXPECT_EQ(state.Summary().oldest_inflight_comm, 0u);
  const v1::ClusterState snapshot = state.Snapshot("job1");
  ASSERT_EQ(snapshot.comms_size(), 1);
  for (const v1::RankProgress& rank : snapshot.comms(0).ranks()) EXPECT_EQ(rank.completed_seq(), 1u);
}

// The live view and the analyzer share one frontier rule (analyzer/progress_frontier.h):
// a completion on another stream past an open collective does not move it.
TEST(LiveStateTest, CompletedSeqIsTheFrontierNotTheNewestCompletion) {
  LiveState state;
  state.StreamOpened("a", Identity(10, 0));
  v1::StreamEventsRequest batch;
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    v1::Event* enter = batch.add_events();
    enter->set_index(seq * 2);
    enter->set_kind(v1::EVENT_KIND_ENTER);
    enter->set_fn(static_cast<uint32_t>(ring::ApiFn::kAllReduce));
    enter->set_comm_id(kWorld);
    enter->set_rank(0);
    enter->set_nranks(1);
    enter->set_seq(seq);
    if (seq == 2) continue;  // seq 2 never completes
    v1::Event complete = *enter;
    complete.set_index(seq * 2 + 1);
    complete.set_kind(v1::EVENT_KIND_COMPLETE);
    *batch.add_events() = complete;
  }
  state.BatchAccepted("a", batch, static_cast<uint64_t>(batch.events_size()));
  const v1::ClusterState snapshot = state.Snapshot("job1");
  ASSERT_EQ(snapshot.comms_size(), 1);
  ASSERT_EQ(snapshot.comms(0).ranks_size(), 1);
  EXPECT_EQ(snapshot.comms(0).ranks(0).entered_seq(), 3u);
  EXPECT_EQ(snapshot.comms(0).ranks(0).completed_seq(), 1u);
  EXPECT_EQ(snapshot.comms(0).oldest_inflight_seq(), 2u);
}

TEST(LiveStateTest, OneRankProcessesCountAsBefore) {
  LiveState state;
  for (int32_t rank = 0; rank < 3; ++rank) {
    const std::string key = std::to_string(rank);
    state.StreamOpened(key, Identity(20 + rank, rank));
    state.BatchAccepted(key, Entering({{kWorld, rank, 3}}), 1);
  }
  const LiveSummary summary = state.Summary();
  EXPECT_EQ(summary.processes_known, 3);
  EXPECT_EQ(summary.ranks_known, 3);
  const v1::ClusterState snapshot = state.Snapshot("job1");
  ASSERT_EQ(snapshot.rank_status_size(), 3);
  EXPECT_EQ(snapshot.rank_status(2).ranks_size(), 1);
  EXPECT_EQ(snapshot.rank_status(2).ranks(0), 2);
}

}  // namespace
}  // namespace collwatch::live_state_test
