// WindowedLog: indexes stay global while the front is dropped, kept entries below the
// window stay readable until released, and a read of a dropped entry dies loudly.
// Threading: single-threaded.
#include "analyzer/windowed_log.h"

#include "gtest/gtest.h"

namespace collwatch::analyzer::windowed_log_test {
namespace {

TEST(WindowedLogTest, IndexesStayGlobalWhileTheFrontIsDropped) {
  WindowedLog<int> log;
  for (int i = 0; i < 10; ++i) log.push_back(i * 10);
  log.DropBefore(6, /*keep=*/{2});
  EXPECT_EQ(log.size(), 10u);
  EXPECT_EQ(log.first(), 6u);
  EXPECT_EQ(log.stored(), 5u);
  EXPECT_EQ(log[7], 70);
  EXPECT_EQ(log[2], 20) << "a kept entry below the window stays readable";
  EXPECT_TRUE(log.Holds(2));
  EXPECT_FALSE(log.Holds(3));
  EXPECT_EQ(log.front(), 60);
  log.resize(12, -1);
  EXPECT_EQ(log[11], -1);
  log.DropBefore(8);
  EXPECT_FALSE(log.Holds(2)) << "not named again: released";
  EXPECT_EQ(log.stored(), 4u);
  log.DropBefore(3);  // below the window: nothing comes back
  EXPECT_EQ(log.first(), 8u);
  EXPECT_DEATH(static_cast<void>(log[5]), "pruned history entry 5");
}

// Kept entries that reach the cut without a hole stay in the window (no copy); the rest
// are kept one by one, and what is neither is dropped.
TEST(WindowedLogTest, KeptEntriesRunningUpToTheCutStayInTheWindow) {
  WindowedLog<int> log;
  for (int i = 0; i < 10; ++i) log.push_back(i * 10);
  log.DropBefore(6, /*keep=*/{5, 2, 4, 5});
  EXPECT_EQ(log.first(), 4u) << "4 and 5 run up to the cut";
  EXPECT_EQ(log.stored(), 7u) << "4-9 in the window, 2 by itself";
  EXPECT_EQ(log[4], 40);
  EXPECT_EQ(log[5], 50);
  EXPECT_EQ(log[2], 20);
  EXPECT_FALSE(log.Holds(3));
  EXPECT_FALSE(log.Holds(1));
  log.DropBefore(7, /*keep=*/{6, 2});
  EXPECT_EQ(log.first(), 6u);
  EXPECT_TRUE(log.Holds(2));
  EXPECT_FALSE(log.Holds(4)) << "not named again: dropped with the window's front";
}

}  // namespace
}  // namespace collwatch::analyzer::windowed_log_test
