#include "analyzer/progress_frontier.h"

#include <gtest/gtest.h>

namespace collwatch::analyzer {
namespace {

TEST(ProgressFrontierTest, CompletionsInOrderMoveTheFrontier) {
  ProgressFrontier frontier;
  EXPECT_EQ(frontier.entered(), 0u);
  EXPECT_EQ(frontier.completed(), 0u);
  frontier.Entered(1);
  frontier.Entered(2);
  EXPECT_EQ(frontier.entered(), 2u);
  EXPECT_EQ(frontier.completed(), 0u);
  frontier.Completed(1);
  EXPECT_EQ(frontier.completed(), 1u);
  frontier.Completed(2);
  EXPECT_EQ(frontier.completed(), 2u);
}

// Work on two streams may finish out of order: the frontier waits for the older one.
TEST(ProgressFrontierTest, AnOpenOlderCollectiveHoldsTheFrontierBack) {
  ProgressFrontier frontier;
  for (uint64_t seq = 1; seq <= 4; ++seq) frontier.Entered(seq);
  frontier.Completed(1);
  frontier.Completed(3);
  frontier.Completed(4);
  EXPECT_EQ(frontier.completed(), 1u);
  frontier.Completed(2);
  EXPECT_EQ(frontier.completed(), 4u);
}

TEST(ProgressFrontierTest, ASeqWhoseRecordsWereLostDoesNotHoldItBack) {
  ProgressFrontier frontier;
  frontier.Entered(1);
  frontier.Completed(1);
  frontier.Entered(3);  // 2 lost in the ring
  EXPECT_EQ(frontier.completed(), 2u);
  frontier.Completed(3);
  EXPECT_EQ(frontier.completed(), 3u);
}

TEST(ProgressFrontierTest, ACompletionBeforeItsEnterCountsWhenTheEnterComes) {
  ProgressFrontier frontier;
  frontier.Completed(1);  // the watcher's lane arrived first
  EXPECT_EQ(frontier.completed(), 0u);
  frontier.Entered(1);
  EXPECT_EQ(frontier.entered(), 1u);
  EXPECT_EQ(frontier.completed(), 1u);
  frontier.Entered(2);
  EXPECT_EQ(frontier.completed(), 1u);
}

TEST(ProgressFrontierTest, ResentEntersAndCompletionsChangeNothing) {
  ProgressFrontier frontier;
  frontier.Entered(1);
  frontier.Completed(1);
  frontier.Entered(2);
  frontier.Entered(1);    // resent after a reconnect
  frontier.Completed(1);  // resent
  frontier.Completed(0);  // no seq
  EXPECT_EQ(frontier.entered(), 2u);
  EXPECT_EQ(frontier.completed(), 1u);
  frontier.Completed(2);
  frontier.Entered(2);
  EXPECT_EQ(frontier.completed(), 2u);
}

// A stream whose completions never come must not grow memory without end.
TEST(ProgressFrontierTest, NeverCompletedCollectivesAreBounded) {
  ProgressFrontier frontier;
  constexpr uint64_t kMany = 200000;
  for (uint64_t seq = 1; seq <= kMany; ++seq) frontier.Entered(seq);
  EXPECT_EQ(frontier.entered(), kMany);
  EXPECT_GT(frontier.completed(), 0u);  // the oldest were forgotten
  EXPECT_LT(frontier.completed(), kMany);
  frontier.Completed(kMany);
  EXPECT_LT(frontier.completed(), kMany);
}

}  // namespace
}  // namespace collwatch::analyzer
