// Wait-for cycles (WAIT_CYCLE) and order inversions (ORDER_INVERSION): two ranks sharing
// two communicators, or a point-to-point pair, each held where the other cannot come.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "analyzer/analyzer.h"
#include "analyzer/analyzer_test_job.h"

namespace collwatch::analyzer::wait_cycles_test {
namespace {

using ring::ApiFn;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kTensorParallel = 0x1111aaaa00000001ull;
constexpr uint64_t kDataParallel = 0x2222bbbb00000002ull;

SyntheticOp AllReduce(const std::string& region) { return SyntheticOp{ApiFn::kAllReduce, 1024, 7, region, 0}; }

// Two ranks, each a process, both on two communicators; every call takes 1 ms.
class TwoCommunicators {
 public:
  TwoCommunicators() : analyzer_(TestOptions()), job_(&analyzer_.model()) {
    for (int rank = 0; rank < 2; ++rank) {
      processes_[rank] = job_.AddProcess(rank);
      job_.Init(processes_[rank], kTensorParallel, rank, 2, kT0);
      job_.Init(processes_[rank], kDataParallel, rank, 2, kT0);
    }
  }
  // `rank` issues collective `seq` on `comm`: completed after 1 ms, or never (`stuck`;
  // `blocking`: its thread stays inside, else it returns at once, as a GPU enqueue).
  void AllReduceOn(int rank, uint64_t comm, uint64_t seq, bool stuck = false, bool blocking = true) {
    int64_t& t = clock_[rank];
    job_.Collective(processes_[rank], comm, rank, 2, seq, AllReduce(comm == kTensorParallel ? "tp" : "dp"), t,
                    stuck ? 0 : t + kMs, blocking);
    t += 2 * kMs;
  }
  // A collective on `comm` whose record names rank 7 of 2 (a damaged ring slot): the model
  // cannot place it on any communicator.
  void DamagedAllReduceOn(int rank, uint64_t comm, uint64_t seq) {
    int64_t& t = clock_[rank];
    job_.Collective(processes_[rank], comm, 7, 2, seq, AllReduce("damaged"), t, t + kMs);
    t += 2 * kMs;
  }
  void SendTo(int rank, int peer, uint64_t seq) { P2p(rank, ApiFn::kSend, peer, seq); }
  void ReceiveFrom(int rank, int peer, uint64_t seq) { P2p(rank, ApiFn::kRecv, peer, seq); }
  void P2p(int rank, ApiFn fn, int peer, uint64_t seq) {
    job_.P2p(processes_[rank], kDataParallel, rank, 2, fn, peer, seq, 1 << 20, 7, clock_[rank], 0);
    clock_[rank] += 2 * kMs;
  }
  std::vector<Finding> Run(double plus_s, bool final_pass = false) {
    return analyzer_.Analyze(std::max(clock_[0], clock_[1]) + static_cast<int64_t>(plus_s * kSecond), final_pass);
  }
  // Rank 0 tensor-parallel then data-parallel, rank 1 the other way round; all complete.
  void InvertedStep(uint64_t seq) {
    AllReduceOn(0, kTensorParallel, seq);
    AllReduceOn(0, kDataParallel, seq);
    AllReduceOn(1, kDataParallel, seq);
    AllReduceOn(1, kTensorParallel, seq);
  }
  // One clean step: tensor-parallel then data-parallel on both ranks.
  void CleanStep(uint64_t seq) {
    for (int rank = 0; rank < 2; ++rank) {
      AllReduceOn(rank, kTensorParallel, seq);
      AllReduceOn(rank, kDataParallel, seq);
    }
  }

 private:
  Analyzer analyzer_;
  SyntheticJob job_;
  ProcessId processes_[2] = {0, 0};
  int64_t clock_[2] = {kT0 + 10 * kMs, kT0 + 10 * kMs};
};

std::vector<FindingKind> KindsOf(const std::vector<Finding>& found) {
  std::vector<FindingKind> kinds;
  for (const Finding& finding : found) kinds.push_back(finding.kind);
  return kinds;
}

TEST(WaitCycleTest, BlockedThreadsInOppositeCommunicatorOrdersAreOneCycle) {
  TwoCommunicators job;
  job.CleanStep(1);
  job.AllReduceOn(0, kTensorParallel, 2, /*stuck=*/true);
  job.AllReduceOn(1, kDataParallel, 2, /*stuck=*/true);
  EXPECT_TRUE(job.Run(5).empty()) << "nothing before the stall threshold";
  const std::vector<Finding> found = job.Run(11);
  ASSERT_EQ(KindsOf(found), std::vector<FindingKind>{FindingKind::kWaitCycle}) << "one finding, not a NOT_JOINED each";
  const Finding& cycle = found[0];
  EXPECT_EQ(cycle.headline,
            "WAIT_CYCLE: (undecided: or NOT_JOINED) rank 0 waits in all-reduce #2 on comm 1111aaaa for rank 1, and "
            "rank 1 waits in all-reduce #2 on comm 2222bbbb for rank 0");
  // Neither rank issued its second call: each may be held, or may never issue it.
  EXPECT_FALSE(cycle.decided);
  EXPECT_EQ(cycle.other_readings, std::vector<FindingKind>{FindingKind::kNotJoined});
  EXPECT_THAT(cycle.summary, HasSubstr("Two readings fit, and the records cannot tell which: rank 1 and rank 0 have "
                                       "not entered the call they are waited for in."));
  EXPECT_THAT(cycle.summary, HasSubstr("rank 1, which has not entered it: it is held in all-reduce #2 on comm 2222bbbb"));
  EXPECT_THAT(cycle.summary, HasSubstr("threads are blocked inside these calls"));
  EXPECT_THAT(cycle.summary, HasSubstr("Fix: issue the process groups' collectives in one global order on every rank"));
  const auto& facts = std::get<CycleFacts>(cycle.evidence);
  ASSERT_EQ(facts.arcs.size(), 2u);
  EXPECT_EQ(facts.arcs[0].peer, 1);
  EXPECT_EQ(facts.arcs[1].peer, 0);
  EXPECT_FALSE(facts.point_to_point);
  EXPECT_EQ(cycle.processes.size(), 2u);
  EXPECT_TRUE(job.Run(30).empty()) << "told once; the stalls it explains are its echo";
}

TEST(WaitCycleTest, EnqueuedCallsHeldBehindEachOtherOnOneQueueAreACycle) {
  TwoCommunicators job;
  job.CleanStep(1);
  // GPU ranks: every call returns at once; nothing completes, as with one hardware queue.
  job.AllReduceOn(0, kTensorParallel, 2, true, /*blocking=*/false);
  job.AllReduceOn(0, kDataParallel, 2, true, false);
  job.AllReduceOn(1, kDataParallel, 2, true, false);
  job.AllReduceOn(1, kTensorParallel, 2, true, false);
  const std::vector<Finding> found = job.Run(11);
  ASSERT_EQ(KindsOf(found), std::vector<FindingKind>{FindingKind::kWaitCycle}) << "not a TRANSPORT_STALL each";
  EXPECT_THAT(found[0].summary, HasSubstr("entered it behind all-reduce #2 on comm 2222bbbb"));
  EXPECT_THAT(found[0].summary, HasSubstr("one hardware queue"));
  EXPECT_TRUE(found[0].decided) << "every rank issued both calls: the order itself is the evidence";
}

TEST(WaitCycleTest, SendsFirstOnBothSidesAreAPointToPointCycle) {
  TwoCommunicators job;
  job.CleanStep(1);
  job.SendTo(0, 1, 1);
  job.SendTo(1, 0, 1);
  const std::vector<Finding> found = job.Run(11);
  ASSERT_EQ(KindsOf(found), std::vector<FindingKind>{FindingKind::kWaitCycle}) << "not a p2p NOT_JOINED each";
  EXPECT_EQ(found[0].headline,
            "WAIT_CYCLE: (undecided: or NOT_JOINED) rank 0 waits in send to rank 1 #1 on comm 2222bbbb for rank 1, and "
            "rank 1 waits in send to rank 0 #1 on comm 2222bbbb for rank 0");
  EXPECT_THAT(found[0].summary, HasSubstr("has not posted the matching receive"));
  EXPECT_THAT(found[0].summary, HasSubstr("batch_isend_irecv"));
  EXPECT_THAT(found[0].summary, HasSubstr("rank parity"));
  EXPECT_TRUE(std::get<CycleFacts>(found[0].evidence).point_to_point);
}

TEST(WaitCycleTest, SendsAndReceivesPairedButQueuedBehindTheSendsAreADecidedCycle) {
  TwoCommunicators job;
  job.CleanStep(1);
  // GPU ranks enqueue both and return: every side is paired, none completes.
  for (int rank = 0; rank < 2; ++rank) {
    job.SendTo(rank, 1 - rank, 1);
    job.ReceiveFrom(rank, 1 - rank, 1);
  }
  EXPECT_TRUE(job.Run(5).empty());
  const std::vector<Finding> found = job.Run(11);
  ASSERT_EQ(KindsOf(found), std::vector<FindingKind>{FindingKind::kWaitCycle});
  EXPECT_TRUE(found[0].decided);
  EXPECT_THAT(found[0].summary, HasSubstr("has posted the matching receive behind send to rank 0 #1"));
}

TEST(WaitCycleTest, ALateRankThatIsNotHeldAnywhereIsNoCycle) {
  TwoCommunicators job;
  job.CleanStep(1);
  job.AllReduceOn(0, kTensorParallel, 2, true);
  // Rank 1 is busy elsewhere, inside no NCCL call: late, not part of a cycle.
  const std::vector<Finding> found = job.Run(11);
  ASSERT_EQ(KindsOf(found), std::vector<FindingKind>{FindingKind::kNotJoined});
}

TEST(OrderInversionTest, OppositeOrdersThatCompletedAreALatentDeadlock) {
  TwoCommunicators job;
  job.CleanStep(1);
  job.InvertedStep(2);
  const std::vector<Finding> found = job.Run(0.1);
  ASSERT_EQ(KindsOf(found), std::vector<FindingKind>{FindingKind::kOrderInversion});
  EXPECT_EQ(found[0].headline,
            "ORDER_INVERSION: rank 0 issued all-reduce #2 on comm 1111aaaa before all-reduce #2 on comm 2222bbbb, "
            "rank 1 the other way round");
  EXPECT_THAT(found[0].summary, HasSubstr("rank 0 issued all-reduce #2 on comm 1111aaaa first, then all-reduce #2 on comm 2222bbbb;"));
  EXPECT_THAT(found[0].summary, HasSubstr("completed all four calls"));
  EXPECT_THAT(found[0].summary, HasSubstr("CUDA_DEVICE_MAX_CONNECTIONS=1"));
  EXPECT_THAT(found[0].summary, HasSubstr("A latent one"));
  job.CleanStep(3);
  EXPECT_TRUE(job.Run(0.1).empty()) << "one finding per pair of communicators";
}

TEST(OrderInversionTest, OneOrderOnEveryRankIsNoFinding) {
  TwoCommunicators job;
  for (uint64_t seq = 1; seq <= 50; ++seq) job.CleanStep(seq);
  // Twice in a row on one communicator, the same on both ranks.
  for (int rank = 0; rank < 2; ++rank) {
    job.AllReduceOn(rank, kDataParallel, 51);
    job.AllReduceOn(rank, kDataParallel, 52);
    job.AllReduceOn(rank, kTensorParallel, 51);
  }
  EXPECT_TRUE(job.Run(0.1).empty());
  EXPECT_TRUE(job.Run(60, /*final_pass=*/true).empty());
}

// The references slide with the communicators: after far more clean steps than the
// window of references holds (analysed as they come, so the old ones are dropped), an
// inversion is still seen, and the clean steps gave none.
TEST(OrderInversionTest, AnInversionLongAfterTheWindowsFirstReferencesIsSeen) {
  TwoCommunicators job;
  for (uint64_t seq = 1; seq <= 2500; ++seq) {
    job.CleanStep(seq);
    if (seq % 100 == 0) {
      ASSERT_TRUE(job.Run(0.1).empty()) << "clean up to " << seq;
    }
  }
  job.InvertedStep(2501);
  const std::vector<Finding> found = job.Run(0.1);
  ASSERT_EQ(KindsOf(found), std::vector<FindingKind>{FindingKind::kOrderInversion});
  EXPECT_THAT(found[0].headline,
              HasSubstr("all-reduce #2501 on comm 1111aaaa before all-reduce #2501 on comm 2222bbbb"));
}

// A collective the model could not place (its record names a rank the communicator does
// not have) belongs to no communicator's order: it must not count as one of another
// communicator's collectives and make an inversion of a clean step.
TEST(OrderInversionTest, ACollectiveNotPlacedOnAnyCommunicatorCountsInNoOrder) {
  TwoCommunicators job;
  job.CleanStep(1);
  job.AllReduceOn(0, kTensorParallel, 2);
  job.AllReduceOn(0, kDataParallel, 2);
  job.AllReduceOn(1, kTensorParallel, 2);
  job.DamagedAllReduceOn(1, kDataParallel, 3);
  job.AllReduceOn(1, kDataParallel, 2);
  job.CleanStep(3);
  for (const Finding& finding : job.Run(0.1)) EXPECT_NE(finding.kind, FindingKind::kOrderInversion) << finding.headline;
}

TEST(OrderInversionTest, AnInversionThatHangsIsTheCycleAlone) {
  TwoCommunicators job;
  job.CleanStep(1);
  job.AllReduceOn(0, kTensorParallel, 2, true);
  job.AllReduceOn(1, kDataParallel, 2, true);
  EXPECT_TRUE(job.Run(1).empty()) << "an inversion not yet completed waits";
  const std::vector<Finding> found = job.Run(60, /*final_pass=*/true);
  ASSERT_EQ(KindsOf(found), std::vector<FindingKind>{FindingKind::kWaitCycle});
  EXPECT_THAT(found[0].summary, Not(HasSubstr("latent")));
}

}  // namespace
}  // namespace collwatch::analyzer::wait_cycles_test
