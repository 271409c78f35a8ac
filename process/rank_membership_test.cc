// Rank lists as every report writes them: runs, progressions, and "all but" for a long
// list whose complement is short (RankListText), and as people type them (ParseRankList;
// analyzer/process_ranks_test.cc tests the rank rule on job models). Threading: single-threaded.
#include "process/rank_membership.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace collwatch::rank_membership_test {
namespace {

TEST(RankListTextTest, CompressesRunsAndProgressions) {
  EXPECT_EQ(RankListText({0, 1, 2, 3}), "0-3");
  EXPECT_EQ(RankListText({0, 2, 4, 6, 8}), "0-8/2");
  EXPECT_EQ(RankListText({0, 2}), "0,2");
  EXPECT_EQ(RankListText({5, 1, 2, 3, 9}), "1-3,5,9");
  EXPECT_EQ(RankListText({}), "none");
  std::vector<int32_t> most;
  for (int32_t rank = 0; rank < 64; ++rank) {
    if (rank % 4 != 1) most.push_back(rank);
  }
  EXPECT_EQ(RankListText(most, 8, 64), "all but 1-61/4");
}

TEST(RankListTextTest, ARankListIsReadAsPeopleTypeIt) {
  EXPECT_EQ(ParseRankList("0,3-5"), (std::vector<int32_t>{0, 3, 4, 5}));
  EXPECT_EQ(ParseRankList(" 5 , 2, 2-3 "), (std::vector<int32_t>{2, 3, 5}));
  EXPECT_EQ(ParseRankList("7"), (std::vector<int32_t>{7}));
  for (const char* bad : {"", ",", "a", "3-1", "-1", "1-", "1-2-3", "0-99999999", "2147483648"}) {
    EXPECT_FALSE(ParseRankList(bad).has_value()) << bad;
  }
  // What RankListText writes reads back.
  const std::vector<int32_t> ranks = {0, 1, 2, 3, 8, 10, 11};
  EXPECT_EQ(ParseRankList(RankListText(ranks)), ranks);
}

}  // namespace
}  // namespace collwatch::rank_membership_test
