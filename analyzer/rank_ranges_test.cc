// The final pass reading ranks in ranges on several threads (rank_ranges.h) must report
// exactly what reading them all on one thread does.
#include "analyzer/rank_ranges.h"

#include <gtest/gtest.h>

#include <atomic>

#include "analyzer/analyzer_test_job.h"
#include "analyzer/report.h"

namespace collwatch::analyzer {
namespace {

TEST(RankRangesTest, AThreadReadsAtLeastItsShareOfCalls) {
  EXPECT_EQ(RankRangesFor(16, 100, 256), 1);      // 25,600 calls: one thread
  EXPECT_EQ(RankRangesFor(16, 16384, 256), 16);   // limited by the threads
  EXPECT_EQ(RankRangesFor(16, 200, 256), 2);      // 51,200 calls: two threads
  EXPECT_EQ(RankRangesFor(0, 16384, 256), 1);     // no threads given: this one
  EXPECT_EQ(RankRangesFor(8, 2, 1u << 20), 2);    // never more ranges than ranks
}

TEST(RankRangesTest, EveryRankIsReadOnceInItsRange) {
  std::vector<std::atomic<int>> reads(1001);
  std::vector<std::pair<int32_t, int32_t>> bounds(7);
  ForRankRanges(1001, 7, [&](int32_t range, int32_t first_rank, int32_t end_rank) {
    bounds[static_cast<size_t>(range)] = {first_rank, end_rank};
    for (int32_t rank = first_rank; rank < end_rank; ++rank) ++reads[static_cast<size_t>(rank)];
  });
  for (const std::atomic<int>& count : reads) EXPECT_EQ(count.load(), 1);
  for (size_t range = 1; range < bounds.size(); ++range) EXPECT_EQ(bounds[range].first, bounds[range - 1].second);
  EXPECT_EQ(bounds.back().second, 1001);
}

// 200 ranks of 300 collectives, agreeing windows folded: rank 190 (in the last range) enters
// position 40 on 20 s late; with `diverge`, ranks 1, 5, ... skip the collective at 150.
std::string ReportOfJob(unsigned read_threads, bool diverge) {
  AnalyzerOptions options = TestOptions();
  options.read_threads = read_threads;
  Analyzer analyzer(options);
  SyntheticJob job(&analyzer.model());
  constexpr int kRanks = 200;
  for (int rank = 0; rank < kRanks; ++rank) {
    const ProcessId process = job.AddProcess(rank);
    job.Init(process, kComm, rank, kRanks, kT0);
    uint64_t seq = 0;
    for (size_t position = 0; position < 300; ++position) {
      if (diverge && rank % 4 == 1 && position == 150) continue;
      const int64_t t = kT0 + kSecond + static_cast<int64_t>(position) * kMs +
                        (rank == 190 && position >= 40 ? 20 * kSecond : 0);
      job.Collective(process, kComm, rank, kRanks, ++seq, Gather(position % 2 == 0 ? "fwd" : "bwd"), t, t + kMs / 2);
    }
    analyzer.FoldLoadedProcess(process);
  }
  const std::vector<Finding> findings = analyzer.Analyze(kT0 + 100 * kSecond, /*final_pass=*/true);
  const ReportInfo info = DescribeJob(analyzer.model());
  return ReportText(findings, info) + "\n" + ReportJson(findings, info).dump(2);
}

TEST(RankRangesTest, TheFinalPassReadOnSeveralThreadsReportsWhatOneThreadDoes) {
  // The late rank is a straggler the times' reading finds (it is read in the last range).
  const std::string late = ReportOfJob(1, /*diverge=*/false);
  EXPECT_NE(late.find("straggler: rank 190"), std::string::npos) << late;
  EXPECT_EQ(ReportOfJob(3, false), late);
  // The divergence's classes are read in ranges too.
  const std::string diverged = ReportOfJob(1, /*diverge=*/true);
  EXPECT_NE(diverged.find("PATH_DIVERGENCE"), std::string::npos) << diverged;
  EXPECT_EQ(ReportOfJob(3, true), diverged);
}

}  // namespace
}  // namespace collwatch::analyzer
