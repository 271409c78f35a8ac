// The status line: ranks, processes only when they differ from ranks, rate, events, lost
// only when some are, and the collective in flight the longest or "nothing in flight".
#include "cli/run_status_line.h"

#include "gtest/gtest.h"

namespace collwatch {
namespace {

TEST(RunStatusLine, NothingInFlight) {
  LiveSummary summary;
  summary.ranks_reporting = 2;
  summary.ranks_known = 2;
  summary.processes_known = 2;
  summary.collectives_per_second = 12.34;
  summary.events = 100;
  EXPECT_EQ(RunStatusLine(summary), "collwatch: 2/2 ranks reporting, 12.3 coll/s, 100 events, nothing in flight");
}

TEST(RunStatusLine, ProcessesHoldingSeveralRanksLostRanksAndTheOldestInFlight) {
  LiveSummary summary;
  summary.ranks_reporting = 3;
  summary.ranks_known = 4;
  summary.processes_known = 1;
  summary.ranks_lost = 1;
  summary.collectives_per_second = 0;
  summary.events = 7;
  summary.oldest_inflight_comm = 0xbeef;
  summary.oldest_inflight_seq = 42;
  summary.oldest_inflight_age_s = 31.3;
  EXPECT_EQ(RunStatusLine(summary),
            "collwatch: 3/4 ranks reporting (1 processes), 0.0 coll/s, 7 events, 1 lost, oldest in flight: comm "
            "beef seq 42 for 31.3 s");
}

TEST(RunStatusLine, BeforeAnyRankReports) {
  EXPECT_EQ(RunStatusLine(LiveSummary{}), "collwatch: 0/0 ranks reporting, 0.0 coll/s, 0 events, nothing in flight");
}

}  // namespace
}  // namespace collwatch
