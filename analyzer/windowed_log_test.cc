// WindowedLog: indexes stay global while the front is dropped, kept entries below the
// window stay readable until released, and a read of a dropped entry dies loudly.
// Threading: single-threaded.
#include "analyzer/windowed_log.h"

#include <algorithm>
#include <cstdint>

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

// A limit on the entries kept one by one: over it, nothing is dropped; the entries that
// run up to the cut stay in the window and do not count.
TEST(WindowedLogTest, NothingIsDroppedWhereMoreThanTheLimitWouldBeKeptOneByOne) {
  WindowedLog<int> log;
  for (int i = 0; i < 10; ++i) log.push_back(i * 10);
  EXPECT_FALSE(log.DropBefore(8, /*keep=*/{1, 3, 5, 7}, /*most_kept=*/2)) << "1, 3 and 5 by themselves";
  EXPECT_EQ(log.first(), 0u);
  EXPECT_EQ(log.stored(), 10u);
  EXPECT_TRUE(log.DropBefore(8, /*keep=*/{3, 6, 7}, /*most_kept=*/1)) << "6 and 7 run up to the cut";
  EXPECT_EQ(log.first(), 6u);
  EXPECT_EQ(log[3], 30);
  EXPECT_FALSE(log.Holds(5));
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

// Entries live in chunks: indexes far apart, a window dropped chunk after chunk (the list
// of chunks compacted on the way), a binary search over the window and a copy all read
// every entry where it was put.
TEST(WindowedLogTest, ManyChunksReadBackThroughDropsSearchesAndCopies) {
  WindowedLog<uint32_t> log;
  constexpr uint32_t kEntries = 100'000;  // hundreds of chunks of 256
  for (uint32_t i = 0; i < kEntries; ++i) log.push_back(i * 3);
  for (size_t cut = 0; cut < kEntries; cut += 7'777) {
    const size_t keep = cut - 5;  // in the window until now, not next to the cut
    log.DropBefore(cut, cut > 0 ? std::vector<size_t>{keep} : std::vector<size_t>{});
    ASSERT_EQ(log.first(), cut);
    ASSERT_EQ(log.stored(), kEntries - cut + (cut > 0 ? 1 : 0)) << "the window and the one kept";
    for (size_t i = cut; i < kEntries; i += 1'001) ASSERT_EQ(log[i], i * 3) << "cut " << cut;
    if (cut > 0) {
      EXPECT_EQ(log[keep], keep * 3) << "kept below the window";
      EXPECT_FALSE(log.Holds(cut - 7'777 - 5)) << "the one kept before, not named again";
    }
    EXPECT_TRUE(std::binary_search(log.begin(), log.end(), static_cast<uint32_t>((kEntries - 1) * 3)));
    EXPECT_FALSE(std::binary_search(log.begin(), log.end(), 1u));
    EXPECT_EQ(static_cast<size_t>(log.end() - log.begin()), kEntries - cut);
  }
  log.push_back(7);
  const WindowedLog<uint32_t> copy = log;
  EXPECT_EQ(copy.first(), log.first());
  EXPECT_EQ(copy.size(), log.size());
  EXPECT_TRUE(std::equal(copy.begin(), copy.end(), log.begin(), log.end()));
  EXPECT_EQ(copy[kEntries], 7u);
  log.DropBefore(log.size());
  EXPECT_EQ(log.stored(), 0u) << "a window dropped whole holds nothing";
  log.push_back(9);
  EXPECT_EQ(log[kEntries + 1], 9u) << "and starts a chunk again";
  EXPECT_EQ(copy[kEntries], 7u) << "the copy is its own";
}

// Small chunks (64 entries of 4 bytes): a run inside one chunk is read in place, one that
// crosses a chunk or leaves the window is not; a long log cut to its last entries reads on
// and grows on.
TEST(WindowedLogTest, RunsInOneChunkAreReadInPlaceAndACutLogGrowsOn) {
  WindowedLog<uint32_t, 256> log;
  for (uint32_t i = 0; i < 10'000; ++i) log.push_back(i);
  const uint32_t* run = log.Run(128, 64);
  ASSERT_NE(run, nullptr);
  for (uint32_t i = 0; i < 64; ++i) ASSERT_EQ(run[i], 128 + i);
  EXPECT_EQ(log.Run(120, 16), nullptr) << "crosses from one chunk into the next";
  EXPECT_EQ(log.Run(9'990, 16), nullptr) << "runs past the last entry";
  log.DropBefore(9'984, /*keep=*/{5, 5, 9'000});
  EXPECT_EQ(log.Run(9'900, 8), nullptr) << "below the window";
  EXPECT_EQ(log[5], 5u) << "kept once though named twice";
  EXPECT_EQ(log[9'000], 9'000u);
  EXPECT_EQ(log.stored(), 16u + 2u);
  for (uint32_t i = 10'000; i < 10'200; ++i) log.push_back(i);
  for (uint32_t i = 9'984; i < 10'200; ++i) ASSERT_EQ(log[i], i);
  run = log.Run(10'048, 64);
  ASSERT_NE(run, nullptr);
  EXPECT_EQ(run[63], 10'111u);
}

}  // namespace
}  // namespace collwatch::analyzer::windowed_log_test
