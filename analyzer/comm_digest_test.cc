#include "analyzer/comm_digest.h"

#include <gtest/gtest.h>

#include "analyzer/analyzer_test_job.h"

namespace collwatch::analyzer {
namespace {

constexpr int kRanks = 16;
constexpr int kRanksPerNode = 4;
constexpr uint64_t kCollectives = 3 * kChainWindow;
constexpr uint64_t kSkippedSeq = kChainWindow + 10;  // in window 1
constexpr int kStoppedRank = 6;
constexpr uint64_t kStoppedAfter = 150;
constexpr uint64_t kWarmup = 0x77;

// The same 16-rank job recorded into one model for the whole job and into one per node of
// four ranks. Ranks 1, 5, 9 and 13 leave out one all-gather of window 1 (their later
// collectives move up a seq); rank 6 stops after 150. The ranks of node 1 first run a
// warm-up collective of their own: their model numbers the job's regions apart from the
// others', as nodes do.
struct SplitJob {
  JobModel whole;
  std::vector<JobModel> nodes = std::vector<JobModel>(kRanks / kRanksPerNode);

  SplitJob() {
    SyntheticJob whole_job(&whole);
    for (int rank = 0; rank < kRanks; ++rank) {
      SyntheticJob node_job(&nodes[static_cast<size_t>(rank / kRanksPerNode)]);
      for (SyntheticJob* job : {&whole_job, &node_job}) Record(*job, rank);
    }
  }

  static void Record(SyntheticJob& job, int rank) {
    const ProcessId process = job.AddProcess(rank);
    job.Init(process, kComm, rank, kRanks, kT0);
    int64_t t = kT0 + kMs;
    if (rank / kRanksPerNode == 1) {
      job.Init(process, kWarmup, rank % kRanksPerNode, kRanksPerNode, t);
      job.Collective(process, kWarmup, rank % kRanksPerNode, kRanksPerNode, 1, Gather("warm-up"), t, t + kMs);
    }
    uint64_t seq = 1;
    for (uint64_t position = 1; position <= kCollectives; ++position) {
      if (rank % 4 == 1 && position == kSkippedSeq) continue;
      if (rank == kStoppedRank && seq > kStoppedAfter) break;
      t += 2 * kMs;
      const SyntheticOp op = position % 3 == 0 ? Scatter("bwd/unit" + std::to_string(position % 5))
                                               : Gather("fwd/unit" + std::to_string(position % 7));
      job.Collective(process, kComm, rank, kRanks, seq++, op, t, t + kMs);
    }
  }

  CommDigest WholeDigest() const { return DigestOfComm(whole, *whole.FindComm(kComm)); }
  CommDigest NodeDigest(size_t node) const { return DigestOfComm(nodes[node], *nodes[node].FindComm(kComm)); }
};

TEST(CommDigestTest, NodesDigestsMergedInAnyGroupingAreTheWholeJobsDigest) {
  const SplitJob job;
  // The nodes' models number regions differently: their own chains cannot be compared.
  const Comm& node0 = *job.nodes[0].FindComm(kComm);
  const Comm& node1 = *job.nodes[1].FindComm(kComm);
  EXPECT_NE(node0.ranks[0].chains[0].chain, node1.ranks[4].chains[0].chain);

  const CommDigest whole = job.WholeDigest();
  CommDigest in_order, pairs_first, backwards;
  for (size_t node = 0; node < job.nodes.size(); ++node) MergeDigest(&in_order, job.NodeDigest(node));
  CommDigest left = job.NodeDigest(0), right = job.NodeDigest(3);
  MergeDigest(&left, job.NodeDigest(1));
  MergeDigest(&right, job.NodeDigest(2));
  MergeDigest(&pairs_first, right);
  MergeDigest(&pairs_first, left);
  for (size_t node = job.nodes.size(); node-- > 0;) MergeDigest(&backwards, job.NodeDigest(node));
  EXPECT_EQ(in_order, whole);
  EXPECT_EQ(pairs_first, whole);
  EXPECT_EQ(backwards, whole);

  // A digest sent again, or an older one of the same node arriving late, changes nothing.
  CommDigest again = in_order;
  MergeDigest(&again, job.NodeDigest(2));
  EXPECT_EQ(again, whole);
}

TEST(CommDigestTest, TheMergedDigestNamesTheDivergentWindowItsClassesAndWhoIsBehind) {
  const SplitJob job;
  CommDigest merged;
  for (size_t node = 0; node < job.nodes.size(); ++node) MergeDigest(&merged, job.NodeDigest(node));
  const DigestVerdict verdict = JudgeDigest(merged);
  EXPECT_TRUE(verdict.complete);
  EXPECT_EQ(verdict.agreed_windows, 1u) << "window 0, every rank in one class";
  ASSERT_EQ(verdict.divergent_window, std::optional<uint64_t>(1));
  ASSERT_EQ(verdict.classes.size(), 2u);
  EXPECT_EQ(verdict.classes[0], (RankSet{0, 2, 3, 4, 6, 7, 8, 10, 11, 12, 14, 15}));
  EXPECT_EQ(verdict.classes[1], (RankSet{1, 5, 9, 13}));
  EXPECT_EQ(verdict.representatives, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(verdict.min_entered, kStoppedAfter);
  EXPECT_EQ(verdict.behind, RankSet{kStoppedRank});
  EXPECT_EQ(verdict.max_entered, kCollectives);
  EXPECT_EQ(verdict.max_completed, kCollectives);

  // Three nodes only: not complete, and the fourth node's ranks are in no class.
  CommDigest partial;
  for (size_t node = 0; node < 3; ++node) MergeDigest(&partial, job.NodeDigest(node));
  const DigestVerdict partial_verdict = JudgeDigest(partial);
  EXPECT_FALSE(partial_verdict.complete);
  EXPECT_EQ(partial.present, RankSet::Range(0, 12));
}

TEST(CommDigestTest, ARanksUnfinishedWindowIsOpenUntilItIsUsableAndThenInItsClass) {
  JobModel model;
  SyntheticJob job(&model);
  std::vector<ProcessId> processes;
  for (int rank = 0; rank < 2; ++rank) {
    processes.push_back(job.AddProcess(rank));
    job.Init(processes.back(), kComm, rank, 2, kT0);
  }
  auto issue = [&](int rank, uint64_t from, uint64_t to) {
    for (uint64_t seq = from; seq <= to; ++seq) {
      const int64_t t = kT0 + static_cast<int64_t>(seq) * kMs;
      job.Collective(processes[static_cast<size_t>(rank)], kComm, rank, 2, seq, Gather("fwd"), t, t + kMs / 2);
    }
  };
  issue(0, 1, kChainWindow);
  issue(1, 1, kChainWindow - 1);
  const CommDigest before = DigestOfComm(model, *model.FindComm(kComm));
  ASSERT_EQ(before.windows.size(), 1u);
  EXPECT_EQ(before.windows.at(0).open, RankSet{1});
  EXPECT_EQ(before.windows.at(0).by_chain.size(), 1u);
  EXPECT_EQ(JudgeDigest(before).agreed_windows, 0u) << "an open rank is not agreement";

  issue(1, kChainWindow, kChainWindow);
  const CommDigest after = DigestOfComm(model, *model.FindComm(kComm));
  EXPECT_TRUE(after.windows.at(0).open.empty());
  EXPECT_EQ(JudgeDigest(after).agreed_windows, 1u);
  // The older digest merged after the newer says nothing new: the class wins over open.
  CommDigest late = after;
  MergeDigest(&late, before);
  EXPECT_EQ(late, after);
  // Only windows from the one asked for.
  EXPECT_TRUE(DigestOfComm(model, *model.FindComm(kComm), 1).windows.empty());
}

}  // namespace
}  // namespace collwatch::analyzer
