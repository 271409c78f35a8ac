// The analyzer's bounded history (online): the model forgets what no check reads again,
// and a finding after a long agreed prefix is found and told exactly as with the whole
// history.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "analyzer/analyzer.h"
#include "analyzer/analyzer_test_job.h"
#include "analyzer/report.h"

namespace collwatch::analyzer::bounded_history_test {
namespace {

using ring::ApiFn;
using ::testing::HasSubstr;

// Bounded history (online): the model forgets what no check reads again.
AnalyzerOptions BoundedOptions() {
  AnalyzerOptions options = TestOptions();
  options.bounded_history = true;
  return options;
}

// Findings compare field by field, context and words included.
void ExpectSameFinding(const Finding& pruned, const Finding& whole) {
  EXPECT_EQ(pruned.kind, whole.kind);
  EXPECT_EQ(pruned.comm_id, whole.comm_id);
  EXPECT_EQ(pruned.seq, whole.seq);
  ASSERT_EQ(pruned.rank_classes.size(), whole.rank_classes.size());
  for (size_t i = 0; i < whole.rank_classes.size(); ++i) {
    EXPECT_EQ(pruned.rank_classes[i].ranks, whole.rank_classes[i].ranks);
    EXPECT_EQ(pruned.rank_classes[i].label, whole.rank_classes[i].label);
  }
  EXPECT_EQ(pruned.lagging_ranks, whole.lagging_ranks);
  EXPECT_EQ(pruned.regions, whole.regions);
  EXPECT_EQ(pruned.headline, whole.headline);
  EXPECT_EQ(pruned.summary, whole.summary);
  EXPECT_EQ(pruned.first_bad_ns, whole.first_bad_ns);
  ASSERT_EQ(pruned.context.size(), whole.context.size());
  for (size_t i = 0; i < whole.context.size(); ++i) {
    EXPECT_EQ(pruned.context[i].ranks, whole.context[i].ranks);
    EXPECT_EQ(pruned.context[i].lines, whole.context[i].lines);
  }
}

// Every rank sends to its neighbour and receives from it: p2p history to forget too.
void ExchangeWithNeighbours(JobBuilder& job, uint64_t seq) {
  const int64_t t = job.Now();
  for (int rank = 0; rank < job.nranks(); ++rank) {
    const int32_t peer = rank ^ 1;
    job.job().P2p(job.process(rank), kComm, rank, job.nranks(), ApiFn::kSend, peer, seq, 64, 7, t, t + kMs);
    job.job().P2p(job.process(rank), kComm, rank, job.nranks(), ApiFn::kRecv, peer, seq, 64, 7, t, t + kMs);
  }
}

TEST(AnalyzerBoundedHistoryTest, LongJobKeepsTheModelBounded) {
  JobBuilder job(4, BoundedOptions());
  // A communicator used three times at the start and never again: its calls stay listed
  // and must not hold back the forgetting of everything after them.
  constexpr uint64_t kStartupComm = 0x5555;
  for (int rank = 0; rank < job.nranks(); ++rank) {
    job.job().Init(job.process(rank), kStartupComm, rank, job.nranks(), job.Now());
    for (uint64_t seq = 1; seq <= 3; ++seq) {
      job.job().Collective(job.process(rank), kStartupComm, rank, job.nranks(), seq, Gather("startup"), job.Now(),
                           job.Now() + kMs);
    }
  }
  const std::vector<SyntheticOp> step = Step(true);
  size_t most_calls = 0, most_collectives = 0, most_p2p = 0;
  uint64_t p2p_seq = 0;
  // Five times what the model may keep (below): enough that an unbounded one fails.
  constexpr size_t kCollectives = 30'000;
  while (job.analyzer().model().comms()[0].ranks[0].collectives.size() < kCollectives) {
    for (int i = 0; i < 10; ++i) {
      job.IssueAll(step);
      ExchangeWithNeighbours(job, ++p2p_seq);
    }
    ASSERT_TRUE(job.Run().empty());
    const JobModel& model = job.analyzer().model();
    for (int rank = 0; rank < job.nranks(); ++rank) {
      const CommRank& entry = model.comms()[0].ranks[static_cast<size_t>(rank)];
      most_calls = std::max(most_calls, model.process(job.process(rank)).calls.stored());
      most_collectives = std::max(most_collectives, entry.collectives.stored());
      most_p2p = std::max(most_p2p, entry.p2p.stored());
    }
  }
  const JobModel& model = job.analyzer().model();
  EXPECT_GE(model.process(job.process(0)).calls.size(), kCollectives + 2 * p2p_seq) << "every call counts";
  EXPECT_NE(model.Collective(*model.FindComm(kStartupComm), 0, 3), nullptr) << "still listed, still readable";
  // Kept: history_window agreed collectives for the schedule template, up to two
  // chunks not yet dropped, the calls of the last step; the p2p of the same span.
  EXPECT_LT(most_collectives, 4096u + 2 * 1024 + 100);
  EXPECT_LT(most_calls, 2 * (4096u + 2 * 1024 + 100));
  EXPECT_LT(most_p2p, 2 * 1024u + 100);
  EXPECT_TRUE(model.process(job.process(0)).calls[model.comms()[0].ranks[0].init_call].returned())
      << "the creation call stays readable";
  EXPECT_EQ(DescribeJob(model).calls, model.process(job.process(0)).calls.size() * 4);
  EXPECT_TRUE(model.process(job.process(0)).calls[model.comms()[1].ranks[0].init_call].returned())
      << "the startup communicator's creation stays readable";
  EXPECT_TRUE(job.Run(60, /*final_pass=*/true).empty());
}

// `steps` agreed steps into both jobs, analysed every 50 steps as the collector would:
// no finding may come of them.
void IssueHealthyPrefix(int steps, bool vision, JobBuilder* whole, JobBuilder* pruned) {
  for (int step = 0; step < steps; ++step) {
    for (JobBuilder* job : {whole, pruned}) {
      job->IssueAll(Step(vision));
      if (step % 50 == 0) {
        ASSERT_TRUE(job->Run().empty());
      }
    }
  }
}

// A divergence after 21,000 agreed collectives: found and told exactly as with the whole
// history, blocking (the run read off the agreed schedule) and asynchronous (aligned).
TEST(AnalyzerBoundedHistoryTest, LateDivergenceIsExplainedAsWithTheWholeHistory) {
  for (const bool blocking : {true, false}) {
    SCOPED_TRACE(blocking ? "blocking" : "asynchronous");
    JobBuilder whole(4), pruned(4, BoundedOptions());
    ASSERT_NO_FATAL_FAILURE(IssueHealthyPrefix(3000, /*vision=*/true, &whole, &pruned));
    for (JobBuilder* job : {&whole, &pruned}) {
      for (int rank = 0; rank < 4; ++rank) {
        std::vector<SyntheticOp> ops = Step(rank % 2 == 0);
        if (blocking) {
          job->Issue(rank, {ops.front()}, /*stuck_last=*/true);
        } else {
          const std::vector<SyntheticOp> next = Step(true);
          ops.insert(ops.end(), next.begin(), next.end());
          job->Issue(rank, ops, /*stuck_last=*/true, /*blocking=*/false);
        }
      }
    }
    EXPECT_GT(pruned.analyzer().model().comms()[0].ranks[0].collectives.first(), 10'000u) << "history was forgotten";
    const std::vector<Finding> found_whole = whole.Run();
    const std::vector<Finding> found_pruned = pruned.Run();
    ASSERT_EQ(found_whole.size(), 1u);
    ASSERT_EQ(found_pruned.size(), 1u);
    EXPECT_EQ(found_whole[0].kind, FindingKind::kPathDivergence);
    if (blocking) {
      EXPECT_THAT(found_whole[0].summary, HasSubstr("agreed on before"));
    }
    ExpectSameFinding(found_pruned[0], found_whole[0]);
    EXPECT_TRUE(pruned.Run(120).empty()) << "the stall that follows is still an echo";
  }
}

// A rank late after a long healthy prefix: the same NOT_JOINED, its last call named.
TEST(AnalyzerBoundedHistoryTest, LateRankAfterALongPrefixIsNotJoinedAsWithTheWholeHistory) {
  JobBuilder whole(4), pruned(4, BoundedOptions());
  ASSERT_NO_FATAL_FAILURE(IssueHealthyPrefix(2000, /*vision=*/false, &whole, &pruned));
  for (JobBuilder* job : {&whole, &pruned}) {
    for (int rank = 0; rank < 3; ++rank) job->Issue(rank, {Gather("fwd/embed", 2048)}, /*stuck_last=*/true);
  }
  const std::vector<Finding> found_whole = whole.Run(30);
  const std::vector<Finding> found_pruned = pruned.Run(30);
  ASSERT_EQ(found_whole.size(), 1u);
  ASSERT_EQ(found_pruned.size(), 1u);
  EXPECT_EQ(found_whole[0].kind, FindingKind::kNotJoined);
  ExpectSameFinding(found_pruned[0], found_whole[0]);
}

// Only the communicator's lowest rank keeps history_window agreed collectives for the
// schedule template; every other rank keeps about as many as the ranks are apart, so the
// model's memory follows ranks x spread, not ranks x history (issue 39). A divergence
// that leaves the keeper (rank 0) alone in the minority is still explained from the
// schedule's history, exactly as with the whole of it.
TEST(AnalyzerBoundedHistoryTest, OnlyTheHistoryKeeperHoldsTheScheduleHistory) {
  JobBuilder whole(4), pruned(4, BoundedOptions());
  ASSERT_NO_FATAL_FAILURE(IssueHealthyPrefix(3000, /*vision=*/true, &whole, &pruned));
  const JobModel& model = pruned.analyzer().model();
  const Comm& comm = model.comms()[0];
  EXPECT_GE(comm.ranks[0].collectives.stored(), 4096u) << "the keeper holds the schedule's history";
  for (int rank = 1; rank < 4; ++rank) {
    SCOPED_TRACE(rank);
    // The last analysed step's calls, a forgetting chunk not yet dropped, and a few.
    EXPECT_LT(comm.ranks[static_cast<size_t>(rank)].collectives.stored(), 50u * 30 + 64 + 64);
    EXPECT_LT(model.process(pruned.process(rank)).calls.stored(), 50u * 30 + 2 * 128 + 64);
  }
  for (JobBuilder* job : {&whole, &pruned}) {
    for (int rank = 0; rank < 4; ++rank) job->Issue(rank, {Step(rank != 0).front()}, /*stuck_last=*/true);
  }
  const std::vector<Finding> found_whole = whole.Run();
  const std::vector<Finding> found_pruned = pruned.Run();
  ASSERT_EQ(found_whole.size(), 1u);
  ASSERT_EQ(found_pruned.size(), 1u);
  EXPECT_EQ(found_whole[0].rank_classes[0].ranks, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_THAT(found_whole[0].summary, HasSubstr("agreed on before"));
  ExpectSameFinding(found_pruned[0], found_whole[0]);
}

}  // namespace
}  // namespace collwatch::analyzer::bounded_history_test
