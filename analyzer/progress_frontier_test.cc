#include "analyzer/progress_frontier.h"

#include <gtest/gtest.h>

#include <vector>

namespace collwatch::analyzer::progress_frontier_test {
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

// Thousands open at once (a long prefetch, a completion lane read after the enters), then
// completed in order with one held back: the frontier reads right throughout, as the
// completed front is given back and the held one is found among the rest.
TEST(ProgressFrontierTest, ManyOpenCompletedInOrderWithOneHeldBack) {
  ProgressFrontier frontier;
  for (uint64_t seq = 1; seq <= 3000; ++seq) frontier.Entered(seq);
  EXPECT_EQ(frontier.completed(), 0u);
  for (uint64_t seq = 1; seq <= 2500; ++seq) {
    if (seq == 1800) continue;
    frontier.Completed(seq);
    ASSERT_EQ(frontier.completed(), seq < 1800 ? seq : 1799u) << "after completing " << seq;
  }
  frontier.Completed(1800);
  EXPECT_EQ(frontier.completed(), 2500u);
  for (uint64_t seq = 3000; seq > 2500; --seq) frontier.Completed(seq);  // the rest, newest first
  EXPECT_EQ(frontier.completed(), 3000u);
  frontier.Entered(3001);
  EXPECT_EQ(frontier.completed(), 3000u);
  frontier.Completed(3001);
  EXPECT_EQ(frontier.completed(), 3001u);
}

TEST(GroupedCollectivesTest, ADeviceCompletionCoversItsStreamAReturnCoversAll) {
  GroupedCollectives<int> groups;
  groups.Add(7, /*stream=*/1, 10);
  groups.Add(7, /*stream=*/2, 11);
  groups.Add(8, /*stream=*/1, 20);
  std::vector<int> done;
  auto record = [&](int member) { done.push_back(member); };
  const uint64_t stream_one = 1;
  groups.Complete(7, &stream_one, record);
  EXPECT_EQ(done, std::vector<int>{10});
  EXPECT_TRUE(groups.Waiting(7)) << "its member on stream 2 still waits";
  groups.Complete(7, nullptr, record);
  EXPECT_EQ(done, (std::vector<int>{10, 11}));
  EXPECT_FALSE(groups.Waiting(7));
  groups.Complete(9, nullptr, record);  // no such group
  EXPECT_EQ(done.size(), 2u);
  std::vector<int> left;
  groups.ForEachMember([&](int member) { left.push_back(member); });
  EXPECT_EQ(left, std::vector<int>{20});
}

// A stream whose GroupEnd records never come must not grow memory without end.
TEST(GroupedCollectivesTest, GroupsThatNeverEndAreBounded) {
  GroupedCollectives<int> groups;
  for (uint64_t group = 1; group <= 5000; ++group) groups.Add(group, 0, static_cast<int>(group));
  size_t members = 0;
  groups.ForEachMember([&](int) { ++members; });
  EXPECT_LT(members, 5000u);
  EXPECT_TRUE(groups.Waiting(5000)) << "the newest are kept";
  EXPECT_FALSE(groups.Waiting(1)) << "the oldest are forgotten";
}

}  // namespace
}  // namespace collwatch::analyzer::progress_frontier_test
