// The chained fingerprints of windows of collectives (window_chain.h) and the agreement
// check that reads them first: whatever the chains say, a divergence is found at the same
// collective as call by call. Single-threaded.
#include "analyzer/window_chain.h"

#include <gtest/gtest.h>

#include "analyzer/analyzer.h"
#include "analyzer/synthetic_job.h"

namespace collwatch::analyzer::window_chain_test {
namespace {

using ring::ApiFn;

constexpr uint64_t kComm = 0xc4a1;
constexpr int64_t kStart = 1'700'000'000LL * kSecond;

SyntheticOp Op(uint64_t count, uint8_t dtype = 7) { return {ApiFn::kAllReduce, count, dtype, "", 0}; }

// `ranks` ranks issue `collectives` all-reduces (seq 1 on); `change(rank, seq, &op, &skip)`
// alters one rank's call or leaves it out (lost). Returns the first finding's seq (0: none).
template <typename Change>
uint64_t FirstDivergence(int ranks, uint64_t collectives, Change change) {
  Analyzer analyzer;
  SyntheticJob job(&analyzer.model());
  for (int rank = 0; rank < ranks; ++rank) {
    const ProcessId process = job.AddProcess(rank);
    job.Init(process, kComm, rank, ranks, kStart);
    for (uint64_t seq = 1; seq <= collectives; ++seq) {
      SyntheticOp op = Op(1024 + seq % 3);
      bool skip = false;
      change(rank, seq, &op, &skip);
      const int64_t t = kStart + static_cast<int64_t>(seq) * kMs;
      if (!skip) job.Collective(process, kComm, rank, ranks, seq, op, t, t + kMs / 2);
    }
  }
  const std::vector<Finding> found = analyzer.Analyze(kStart + 10 * kSecond, /*final_pass=*/true);
  return found.empty() ? 0 : found.front().seq;
}

TEST(WindowChainTest, AgreeingJobHasNoFinding) {
  EXPECT_EQ(FirstDivergence(8, 300, [](int, uint64_t, SyntheticOp*, bool*) {}), 0u);
}

TEST(WindowChainTest, DifferenceFoundAtItsCollectiveWhereverItSitsInAWindow) {
  for (const uint64_t bad : {uint64_t{1}, uint64_t{63}, kChainWindow, kChainWindow + 1, uint64_t{200}, uint64_t{256}}) {
    const uint64_t seq = FirstDivergence(8, 256, [&](int rank, uint64_t s, SyntheticOp* op, bool*) {
      if (rank == 5 && s == bad) op->dtype = 6;
    });
    EXPECT_EQ(seq, bad);
  }
}

TEST(WindowChainTest, SwappedCallsInOneWindowDisagree) {
  // The same calls in another order: the chain ties each call to its seq.
  const uint64_t seq = FirstDivergence(4, 128, [](int rank, uint64_t s, SyntheticOp* op, bool*) {
    if (rank == 2 && (s == 70 || s == 71)) *op = Op(1024 + (s == 70 ? 71 : 70) % 3);
  });
  EXPECT_EQ(seq, 70u);
}

TEST(WindowChainTest, LostCallIsNoEvidenceButLaterDifferenceIsFound) {
  // Rank 3 lost seq 5 (a gap: its window's chain cannot stand for it); rank 1 differs at 40.
  const uint64_t seq = FirstDivergence(4, 128, [](int rank, uint64_t s, SyntheticOp* op, bool* skip) {
    if (rank == 3 && s == 5) *skip = true;
    if (rank == 1 && s == 40) op->count = 7;
  });
  EXPECT_EQ(seq, 40u);
  EXPECT_EQ(FirstDivergence(4, 128, [](int rank, uint64_t s, SyntheticOp*, bool* skip) {
              if (rank == 3 && s == 5) *skip = true;
            }),
            0u)
      << "a gap alone is no disagreement";
}

TEST(WindowChainTest, ChainIsTheSameWhateverTheArrivalOrder) {
  JobModel model;
  SyntheticJob job(&model);
  const ProcessId a = job.AddProcess(0);
  const ProcessId b = job.AddProcess(1);
  job.Init(a, kComm, 0, 2, kStart);
  job.Init(b, kComm, 1, 2, kStart);
  for (uint64_t seq = 1; seq <= kChainWindow; ++seq) {
    job.Collective(a, kComm, 0, 2, seq, Op(seq), kStart + static_cast<int64_t>(seq), kStart + 1000);
  }
  for (uint64_t seq = kChainWindow; seq >= 1; --seq) {
    job.Collective(b, kComm, 1, 2, seq, Op(seq), kStart + static_cast<int64_t>(seq), kStart + 1000);
  }
  const Comm& comm = model.comms().front();
  const WindowChain& first = comm.ranks[0].chains[0];
  const WindowChain& second = comm.ranks[1].chains[0];
  EXPECT_TRUE(first.usable());
  EXPECT_TRUE(second.usable());
  EXPECT_EQ(first.chain, second.chain);
  // Placed twice: the window cannot stand for its calls any more.
  job.Collective(b, kComm, 1, 2, 3, Op(3), kStart + 5000, kStart + 6000);
  EXPECT_FALSE(comm.ranks[1].chains[0].usable());
}

}  // namespace
}  // namespace collwatch::analyzer::window_chain_test
