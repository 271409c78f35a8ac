#include "analyzer/rank_set.h"

#include <gtest/gtest.h>

namespace collwatch::analyzer {
namespace {

TEST(RankSetTest, MergesRemovesAndSaysItsMembers) {
  RankSet set = RankSet::Range(0, 4);
  set.Merge(RankSet{10, 12});
  set.Remove(RankSet{1, 12});
  EXPECT_EQ(set.ToVector(), (std::vector<int32_t>{0, 2, 3, 10}));
  EXPECT_EQ(set.size(), 4u);
  EXPECT_EQ(set.lowest(), 0);
  EXPECT_EQ(set.highest(), 10);
  EXPECT_TRUE(set.Contains(10));
  EXPECT_FALSE(set.Contains(1));
  EXPECT_EQ(set.Common(RankSet{3, 10, 11}), (RankSet{3, 10}));
}

TEST(RankSetTest, EveryFourthRankOf131072TravelsInKilobytesAndComesBackTheSame) {
  RankSet every_fourth;
  for (int32_t rank = 1; rank < 131'072; rank += 4) every_fourth.Add(rank);
  const std::string bytes = every_fourth.Serialize();
  EXPECT_LE(bytes.size(), 16'408u) << "a bit a rank (a bitmap of each 65,536), not a word a member";
  EXPECT_EQ(RankSet::Parse(bytes, 131'072), every_fourth);
  // A run of ranks takes a few bytes whatever its length.
  EXPECT_LE(RankSet::Range(0, 131'072).Serialize().size(), 25u);
}

TEST(RankSetTest, BytesThatAreNotARankSetOfTheCommunicatorAreRefused) {
  const std::string bytes = RankSet{0, 5, 7}.Serialize();
  EXPECT_EQ(RankSet::Parse(bytes, 8), (RankSet{0, 5, 7}));
  EXPECT_EQ(RankSet::Parse(bytes, 7), std::nullopt) << "rank 7 of a communicator of 7";
  EXPECT_EQ(RankSet::Parse("", 8), std::nullopt);
  EXPECT_EQ(RankSet::Parse("not a rank set", 8), std::nullopt);
  EXPECT_EQ(RankSet::Parse(bytes.substr(0, bytes.size() - 1), 8), std::nullopt) << "cut short";
  EXPECT_EQ(RankSet::Parse(bytes + "x", 8), std::nullopt) << "bytes past its end";
  EXPECT_EQ(RankSet::Parse(RankSet{}.Serialize(), 8), RankSet{});
}

}  // namespace
}  // namespace collwatch::analyzer
