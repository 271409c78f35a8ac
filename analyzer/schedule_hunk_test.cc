// Hunks: how a tie between two readings of a change is shown (the second side inserted),
// and the windows a hunk is cut from.
#include "analyzer/schedule_hunk.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace collwatch::analyzer::schedule_hunk_test {
namespace {

TEST(ScheduleHunkTest, ATieReadsAsAnInsertionOnThePlusSide) {
  // A issued x y, B issued y x: dropping x or dropping y keeps one op in common either
  // way; the hunk reads B as having inserted y, then done what A did.
  OpTable table;
  const uint32_t x = table.Intern({ring::ApiFn::kAllGather, 1, 7, ring::kUnset, ring::kUnset, "x"});
  const uint32_t y = table.Intern({ring::ApiFn::kAllGather, 1, 7, ring::kUnset, ring::kUnset, "y"});
  HunkSides sides;
  sides.minus = {x, y};
  sides.plus = {y, x};
  EXPECT_EQ(RenderHunk(table, 0, sides, "h", "A", "B"),
            "@@ h @@\n"
            "  A: all-gather 1 float32 \"x\"\n"
            "  B: all-gather 1 float32 \"y\"\n"
            "  B inserts 1 collective here\n"
            "  ('-' A, '+' B)\n"
            "+ #1      all-gather 1 float32 \"y\"\n"
            "  #2      all-gather 1 float32 \"x\"\n"
            "- #2      all-gather 1 float32 \"y\"\n");
}

TEST(ScheduleHunkTest, RemovalsComeBeforeAdditionsWithinABlock) {
  OpTable table;
  const uint32_t a = table.Intern({ring::ApiFn::kAllGather, 1, 7, ring::kUnset, ring::kUnset, "a"});
  const uint32_t b = table.Intern({ring::ApiFn::kAllGather, 2, 7, ring::kUnset, ring::kUnset, "b"});
  const uint32_t c = table.Intern({ring::ApiFn::kAllGather, 3, 7, ring::kUnset, ring::kUnset, "c"});
  HunkSides sides;
  sides.context = {c};
  sides.minus = {a, c};
  sides.plus = {b, c};
  EXPECT_EQ(RenderHunk(table, 1, sides, "h", "the baseline", "the run"),
            "@@ h @@\n"
            "  the baseline: all-gather 1 float32 \"a\"\n"
            "  the run:      all-gather 2 float32 \"b\"\n"
            "  ('-' the baseline, '+' the run)\n"
            "  #1      all-gather 3 float32 \"c\"\n"
            "- #2      all-gather 1 float32 \"a\"\n"
            "+ #2      all-gather 2 float32 \"b\"\n"
            "  #3      all-gather 3 float32 \"c\"\n");
}

TEST(ScheduleHunkTest, SlicesAndContextAreClippedToTheSequence) {
  const std::vector<uint32_t> ops = {10, 11, 12, 13, 14};
  EXPECT_EQ(HunkSlice(ops, 3, 64), (std::vector<uint32_t>{13, 14}));
  EXPECT_TRUE(HunkSlice(ops, 5, 64).empty());
  EXPECT_EQ(HunkContextBefore(ops, 4), (std::vector<uint32_t>{11, 12, 13}));
  EXPECT_EQ(HunkContextBefore(ops, 1), (std::vector<uint32_t>{10}));
  EXPECT_TRUE(HunkContextBefore(ops, 0).empty());
}

}  // namespace
}  // namespace collwatch::analyzer::schedule_hunk_test
