// The LCS alignment: inserted runs on either side, substitutions, no anchor.
#include "analyzer/alignment.h"

#include <gtest/gtest.h>

namespace collwatch::analyzer::alignment_test {
namespace {

TEST(AlignmentTest, RunInsertedInTheFirstSequence) {
  const std::vector<uint64_t> a = {7, 8, 9, 1, 2, 3};
  const std::vector<uint64_t> b = {1, 2, 3};
  const FirstDifference first = AlignFirstDifference(a, b);
  EXPECT_EQ(first.a_run, 3u);
  EXPECT_EQ(first.b_run, 0u);
  EXPECT_EQ(first.matched_after, 3u);
}

TEST(AlignmentTest, RunInsertedInTheSecondSequence) {
  const std::vector<uint64_t> a = {1, 2, 1, 2};
  const std::vector<uint64_t> b = {5, 1, 2, 1, 2};
  const FirstDifference first = AlignFirstDifference(a, b);
  EXPECT_EQ(first.a_run, 0u);
  EXPECT_EQ(first.b_run, 1u);
  EXPECT_EQ(first.matched_after, 4u);
}

TEST(AlignmentTest, SubstitutionThenAgreement) {
  const std::vector<uint64_t> a = {4, 1, 2};
  const std::vector<uint64_t> b = {5, 1, 2};
  const FirstDifference first = AlignFirstDifference(a, b);
  EXPECT_EQ(first.a_run, 1u);
  EXPECT_EQ(first.b_run, 1u);
  EXPECT_EQ(first.matched_after, 2u);
}

TEST(AlignmentTest, NothingInCommon) {
  const std::vector<uint64_t> a = {4};
  const std::vector<uint64_t> b = {5, 6};
  const FirstDifference first = AlignFirstDifference(a, b);
  EXPECT_EQ(first.a_run, 1u);
  EXPECT_EQ(first.b_run, 2u);
  EXPECT_EQ(first.matched_after, 0u);
}

TEST(AlignmentTest, PairsAreInOrderAndMarked) {
  const std::vector<uint64_t> a = {1, 9, 2, 3};
  const std::vector<uint64_t> b = {1, 2, 8, 3};
  const Alignment alignment = Align(a, b);
  EXPECT_EQ(alignment.pairs, (std::vector<std::pair<size_t, size_t>>{{0, 0}, {2, 1}, {3, 3}}));
  EXPECT_EQ(alignment.a_matched, (std::vector<bool>{true, false, true, true}));
  EXPECT_EQ(alignment.b_matched, (std::vector<bool>{true, true, false, true}));
}

TEST(AlignmentTest, TiesSkipTheChosenSide) {
  // x y against y x: either x or y is kept; the walk leaves the chosen side's element out.
  const std::vector<uint64_t> a = {1, 2};
  const std::vector<uint64_t> b = {2, 1};
  EXPECT_EQ(Align(a, b).pairs, (std::vector<std::pair<size_t, size_t>>{{1, 0}}));
  EXPECT_EQ(Align(a, b, AlignTie::kSkipA).pairs, (std::vector<std::pair<size_t, size_t>>{{1, 0}}));
  EXPECT_EQ(Align(a, b, AlignTie::kSkipB).pairs, (std::vector<std::pair<size_t, size_t>>{{0, 1}}));
  // Without a tie the two agree.
  const std::vector<uint64_t> c = {1, 9, 2, 3};
  const std::vector<uint64_t> d = {1, 2, 8, 3};
  EXPECT_EQ(Align(c, d, AlignTie::kSkipB).pairs, Align(c, d).pairs);
}

}  // namespace
}  // namespace collwatch::analyzer::alignment_test
