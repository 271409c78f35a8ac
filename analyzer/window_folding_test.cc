// Post-mortem folding of agreeing windows (JobModel::FoldAgreeingWindows, issue 39): each
// job is read as `collwatch analyze` reads a trace store, one process's records after
// another, twice: folding each process once it is in, and keeping every call. The reports
// must be the same byte for byte, every collective must read the same field by field, and
// the folded model must hold fewer calls.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <tuple>

#include "analyzer/analyzer.h"
#include "analyzer/analyzer_test_job.h"
#include "analyzer/report.h"

namespace collwatch::analyzer::window_folding_test {
namespace {

using ring::ApiFn;

constexpr uint64_t kCommA = 0x1111aaaa;
constexpr uint64_t kCommB = 0x2222bbbb;
constexpr int kRanks = 8;
constexpr size_t kPositions = 400;  // six windows of 64 and a part
constexpr size_t kFault = 200;      // inside the fourth window
// Where a stall is: late in the run, five full windows before it.
constexpr size_t kLateFault = 350;

// When position `position` of the schedule starts: 1 ms apart.
int64_t At(size_t position) { return kT0 + 10 * kMs + static_cast<int64_t>(position) * kMs; }

// Every record of one rank (its process made already), as its trace holds them.
using RankTrace = std::function<void(SyntheticJob& job, ProcessId process, int rank)>;

struct Analysed {
  std::vector<Finding> findings;
  std::string report;    // report.txt and report.json
  size_t calls_held = 0;  // calls the model holds in memory, every process
  int ranks_folded = 0;   // communicator ranks with a window folded
  std::vector<size_t> folded_slots;  // by rank of the first communicator: collectives folded
};

// Reads `trace` into `analyzer` and analyses it as of `now`.
Analysed Analyse(Analyzer& analyzer, int nranks, const RankTrace& trace, bool fold, int64_t now) {
  SyntheticJob job(&analyzer.model());
  for (int rank = 0; rank < nranks; ++rank) {
    const ProcessId process = job.AddProcess(rank);
    trace(job, process, rank);
    if (fold) analyzer.FoldLoadedProcess(process);
  }
  Analysed analysed;
  analysed.findings = analyzer.Analyze(now, /*final_pass=*/true);
  const ReportInfo info = DescribeJob(analyzer.model());
  analysed.report = ReportText(analysed.findings, info) + "\n" + ReportJson(analysed.findings, info).dump(2);
  const JobModel& model = analyzer.model();
  for (ProcessId p = 0; p < model.process_count(); ++p) analysed.calls_held += model.process(p).calls.stored();
  for (const Comm& comm : model.comms()) {
    for (const CommRank& rank : comm.ranks) analysed.ranks_folded += rank.folded.size() > rank.folded.first() ? 1 : 0;
  }
  for (const CommRank& rank : model.comms().at(0).ranks) analysed.folded_slots.push_back(rank.folded.size());
  return analysed;
}

// Every collective of every rank reads the same, field by field, folded or not.
void ExpectEveryCollectiveReadsTheSame(const JobModel& folded, const JobModel& whole) {
  ASSERT_EQ(folded.comms().size(), whole.comms().size());
  for (size_t c = 0; c < whole.comms().size(); ++c) {
    const Comm& comm = whole.comms()[c];
    for (int32_t rank = 0; rank < static_cast<int32_t>(comm.ranks.size()); ++rank) {
      for (uint64_t seq = 1; seq <= comm.ranks[static_cast<size_t>(rank)].collectives.size(); ++seq) {
        const Call* want = whole.Collective(comm, rank, seq);
        const Call* got = folded.Collective(folded.comms()[c], rank, seq);
        ASSERT_EQ(got == nullptr, want == nullptr) << "rank " << rank << " seq " << seq;
        if (want != nullptr) {
          ASSERT_TRUE(CallFieldsOf(*got) == CallFieldsOf(*want)) << "rank " << rank << " seq " << seq;
        }
      }
    }
  }
}

// Both readings of `trace`: the same report, every collective read the same, and the
// folded model holding fewer calls. Returns the folded reading.
Analysed ExpectFoldingChangesNothing(int nranks, const RankTrace& trace, int64_t now,
                                     AnalyzerOptions options = TestOptions()) {
  Analyzer whole_analyzer(options), folded_analyzer(options);
  const Analysed whole = Analyse(whole_analyzer, nranks, trace, /*fold=*/false, now);
  const Analysed folded = Analyse(folded_analyzer, nranks, trace, /*fold=*/true, now);
  EXPECT_EQ(folded.report, whole.report);
  EXPECT_EQ(whole.ranks_folded, 0);
  EXPECT_GT(folded.ranks_folded, 0) << "nothing was folded: the test would prove nothing";
  EXPECT_LT(folded.calls_held, whole.calls_held);
  ExpectEveryCollectiveReadsTheSame(folded_analyzer.model(), whole_analyzer.model());
  return folded;
}

std::vector<FindingKind> KindsOf(const std::vector<Finding>& findings) {
  std::vector<FindingKind> kinds;
  for (const Finding& finding : findings) kinds.push_back(finding.kind);
  return kinds;
}

// The ZeRO-3-like step of the benchmarks, one collective a position on communicator A;
// `op_at` may change what a rank issues at a position (nullopt: it skips it).
RankTrace Schedule(const std::function<std::optional<SyntheticOp>(int rank, size_t position, SyntheticOp op)>& op_at,
                   const std::function<int64_t(int rank, size_t position)>& late_by = nullptr) {
  return [=](SyntheticJob& job, ProcessId process, int rank) {
    const std::vector<SyntheticOp> step = FsdpLikeStep(0);
    job.Init(process, kCommA, rank, kRanks, kT0);
    uint64_t seq = 1;
    for (size_t position = 0; position < kPositions; ++position) {
      const std::optional<SyntheticOp> op = op_at(rank, position, step[position % step.size()]);
      if (!op) continue;
      const int64_t t = At(position) + (late_by ? late_by(rank, position) : 0);
      job.Collective(process, kCommA, rank, kRanks, seq++, *op, t, t + kMs / 2);
    }
  };
}

TEST(WindowFoldingTest, ADivergenceReadsTheSame) {
  // Every fourth rank skips two collectives and goes on: a class of its own after them,
  // whose later ranks fold into its first.
  const Analysed folded = ExpectFoldingChangesNothing(
      kRanks, Schedule([](int rank, size_t position, SyntheticOp op) -> std::optional<SyntheticOp> {
        if (rank % 4 == 1 && (position == kFault || position == kFault + 1)) return std::nullopt;
        // Flags differ from rank to rank (what a return says of its timing): kept per call.
        if (rank == 3 && position % 2 == 1) op.flags = ring::kFlagUnknownComm;
        return op;
      }),
      At(kPositions + 10));
  ASSERT_EQ(KindsOf(folded.findings), std::vector<FindingKind>{FindingKind::kPathDivergence});
  // Rank 1, the first of its class, folds only the windows before the fault into rank 0's.
  EXPECT_EQ(folded.ranks_folded, kRanks - 1) << "every rank but the first";
}

TEST(WindowFoldingTest, ADtypeMismatchReadsTheSame) {
  const Analysed folded = ExpectFoldingChangesNothing(
      kRanks, Schedule([](int rank, size_t position, SyntheticOp op) -> std::optional<SyntheticOp> {
        if (rank % 4 == 1 && position == kFault) op.dtype = 6;
        return op;
      }),
      At(kPositions + 10));
  ASSERT_EQ(KindsOf(folded.findings), std::vector<FindingKind>{FindingKind::kSignatureMismatch});
}

TEST(WindowFoldingTest, AStalledRankReadsTheSame) {
  // Rank 5 never enters collective kLateFault + 1; the others wait inside it.
  const RankTrace trace = [](SyntheticJob& job, ProcessId process, int rank) {
    const std::vector<SyntheticOp> step = FsdpLikeStep(0);
    job.Init(process, kCommA, rank, kRanks, kT0);
    for (size_t position = 0; position <= kLateFault; ++position) {
      if (position == kLateFault && rank == 5) break;
      job.Collective(process, kCommA, rank, kRanks, position + 1, step[position % step.size()], At(position),
                     position == kLateFault ? 0 : At(position) + kMs / 2);
    }
  };
  const Analysed folded = ExpectFoldingChangesNothing(kRanks, trace, At(kLateFault) + 60 * kSecond);
  ASSERT_EQ(KindsOf(folded.findings), std::vector<FindingKind>{FindingKind::kNotJoined});
  EXPECT_EQ(folded.findings[0].lagging_ranks, std::vector<int32_t>{5});
}

TEST(WindowFoldingTest, ATransportStallReadsTheSame) {
  // Every rank enters collective kLateFault + 1; none completes it.
  const RankTrace trace = [](SyntheticJob& job, ProcessId process, int rank) {
    const std::vector<SyntheticOp> step = FsdpLikeStep(0);
    job.Init(process, kCommA, rank, kRanks, kT0);
    for (size_t position = 0; position <= kLateFault; ++position) {
      job.Collective(process, kCommA, rank, kRanks, position + 1, step[position % step.size()], At(position),
                     position == kLateFault ? 0 : At(position) + kMs / 2);
    }
  };
  const Analysed folded = ExpectFoldingChangesNothing(kRanks, trace, At(kLateFault) + 60 * kSecond);
  ASSERT_EQ(KindsOf(folded.findings), std::vector<FindingKind>{FindingKind::kTransportStall});
}

TEST(WindowFoldingTest, APastStragglerInAFoldedWindowReadsTheSame) {
  // Rank 6 comes 1.5 s late to collective 100 (the floor is 1 s here); everyone waits for
  // it, and the job goes on. Its window folds too: 1.5 s is an offset a folded call keeps.
  AnalyzerOptions options = TestOptions();
  options.stall_after_s = 1;
  const auto late_by = [](int rank, size_t position) -> int64_t {
    if (position < 99) return 0;
    return position > 99 || rank == 6 ? 1'500 * kMs : 0;
  };
  const RankTrace trace = [&](SyntheticJob& job, ProcessId process, int rank) {
    const std::vector<SyntheticOp> step = FsdpLikeStep(0);
    job.Init(process, kCommA, rank, kRanks, kT0);
    for (size_t position = 0; position < kPositions; ++position) {
      const int64_t t = At(position) + late_by(rank, position);
      // At collective 100 the ranks on time complete when rank 6 arrives.
      const int64_t done = position == 99 ? At(position) + 1'500 * kMs + kMs / 2 : t + kMs / 2;
      job.Collective(process, kCommA, rank, kRanks, position + 1, step[position % step.size()], t, done);
    }
  };
  const Analysed folded = ExpectFoldingChangesNothing(kRanks, trace, At(kPositions) + 2 * kSecond, options);
  ASSERT_EQ(KindsOf(folded.findings), std::vector<FindingKind>{FindingKind::kNotJoined});
  EXPECT_EQ(folded.findings[0].lagging_ranks, std::vector<int32_t>{6});
  EXPECT_TRUE(folded.findings[0].resolution.has_value());
  EXPECT_EQ(folded.ranks_folded, kRanks - 1);
}

// Two communicators of every rank, A's collective then B's at each position; rank 3 swaps
// them at `inverted`.
RankTrace TwoCommunicators(size_t positions, size_t inverted) {
  return [=](SyntheticJob& job, ProcessId process, int rank) {
    const SyntheticOp all_reduce{ApiFn::kAllReduce, 4096, 7, "", 0};
    job.Init(process, kCommA, rank, kRanks, kT0);
    job.Init(process, kCommB, rank, kRanks, kT0);
    for (size_t position = 0; position < positions; ++position) {
      const bool swap = rank == 3 && position == inverted;
      for (int i = 0; i < 2; ++i) {
        const uint64_t comm = (i == 0) != swap ? kCommA : kCommB;
        const int64_t t = At(position) + i * (kMs / 4);
        job.Collective(process, comm, rank, kRanks, position + 1, all_reduce, t, t + kMs / 8);
      }
    }
  };
}

TEST(WindowFoldingTest, AnOrderInversionInAFoldedWindowReadsTheSame) {
  const Analysed folded = ExpectFoldingChangesNothing(kRanks, TwoCommunicators(kPositions, 150), At(kPositions + 10));
  ASSERT_EQ(KindsOf(folded.findings), std::vector<FindingKind>{FindingKind::kOrderInversion});
  EXPECT_THAT(folded.findings[0].headline, ::testing::HasSubstr("#151"));
}

TEST(WindowFoldingTest, AnInversionFarBehindTheNewestCollectiveIsStillSeen) {
  // The order check keeps the references of the processes read first for those still to
  // come, however far behind their newest collective (post-mortem reads one after another).
  const Analysed folded = ExpectFoldingChangesNothing(kRanks, TwoCommunicators(1500, 10), At(1510));
  ASSERT_EQ(KindsOf(folded.findings), std::vector<FindingKind>{FindingKind::kOrderInversion});
  EXPECT_THAT(folded.findings[0].headline, ::testing::HasSubstr("#11"));
}

TEST(WindowFoldingTest, RanksWhoseClocksAreFarApartAndALostCallKeepTheirCalls) {
  // Rank 2's clock is 5 s ahead (no 32-bit offset holds it); rank 4 lost collective 150
  // in its ring (a gap: that window and all after stay); rank 6's ring holds collective
  // 100 twice (damage: that window stands for no class). Folded is only what can be.
  const RankTrace trace = [](SyntheticJob& job, ProcessId process, int rank) {
    const std::vector<SyntheticOp> step = FsdpLikeStep(0);
    job.Init(process, kCommA, rank, kRanks, kT0);
    const int64_t ahead = rank == 2 ? 5 * kSecond : 0;
    for (size_t position = 0; position < kPositions; ++position) {
      if (rank == 4 && position == 149) continue;
      for (int copies = rank == 6 && position == 99 ? 2 : 1; copies > 0; --copies) {
        job.Collective(process, kCommA, rank, kRanks, position + 1, step[position % step.size()],
                       At(position) + ahead, At(position) + ahead + kMs / 2);
      }
    }
  };
  const Analysed folded = ExpectFoldingChangesNothing(kRanks, trace, At(kPositions + 10));
  EXPECT_EQ(folded.ranks_folded, kRanks - 2) << "all but rank 0 (the reference) and rank 2";
  EXPECT_EQ(folded.folded_slots[4], 2 * kChainWindow) << "rank 4: the windows before its gap";
  EXPECT_EQ(folded.folded_slots[6], kChainWindow) << "rank 6: the window before the one placed twice";
  EXPECT_EQ(folded.folded_slots[1], 6 * kChainWindow) << "rank 1: every full window";
}

}  // namespace
}  // namespace collwatch::analyzer::window_folding_test
