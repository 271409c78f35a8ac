// Diff of two runs: identical runs, the first difference with context, rank classes and
// communicators on one side only.
#include "analyzer/schedule_diff.h"

#include "analyzer/schedule_test_job.h"
#include "analyzer/test_job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace collwatch::analyzer::schedule_diff_test {
namespace {

using testing::BuildJob;
using testing::Gather;
using testing::kWorld;
using testing::Op;
using testing::Repeat;
using testing::Step;
using testing::TestJob;
using ::testing::HasSubstr;
using ::testing::Not;

// ---- Diff -------------------------------------------------------------------------------

TEST(DiffTest, IdenticalRunsAndTheFirstDifferenceWithContext) {
  OpTable table;
  JobModel a, b, c;
  BuildJob(&a, 4, [](int) { return Repeat({}, Step(), 3); }, 0x1);
  BuildJob(&b, 4, [](int) { return Repeat({}, Step(), 3); }, 0x2);
  std::vector<Op> changed = Repeat({}, Step(), 3);
  changed.insert(changed.begin() + 11, Gather("bwd/extra"));
  BuildJob(&c, 4, [&](int) { return changed; }, 0x3);
  const JobSchedule sa = ExtractSchedule(a, &table), sb = ExtractSchedule(b, &table), sc = ExtractSchedule(c, &table);
  const ScheduleDiff same = DiffSchedules(sa, sb, table, "runs/a", "runs/b");
  EXPECT_TRUE(same.identical) << same.text;
  EXPECT_THAT(same.text, HasSubstr("identical: 1 communicator, 96 collective calls"));
  const ScheduleDiff diff = DiffSchedules(sa, sc, table, "runs/a", "runs/c");
  EXPECT_FALSE(diff.identical);
  EXPECT_THAT(diff.text, HasSubstr("--- A: runs/a\n+++ B: runs/c\n"));
  EXPECT_THAT(diff.text, HasSubstr("@@ comm 1 (size 4), ranks 0-3: first difference at collective 12 (A: step 2 "
                                   "of 3, line 4 of 8) @@\n"
                                   "  A: all-gather 1024 float32 \"bwd/block1\"\n"
                                   "  B: all-gather 1024 float32 \"bwd/extra\"\n"
                                   "  B inserts 1 collective here\n"
                                   "  ('-' A, '+' B)\n"
                                   "  #9      all-gather 512 float32 \"fwd/embed\"\n"
                                   "  #10     all-gather 1024 float32 \"fwd/block0\"\n"
                                   "  #11     all-gather 1024 float32 \"fwd/block1\"\n"
                                   "+ #12     all-gather 1024 float32 \"bwd/extra\"\n"
                                   "  #13     all-gather 1024 float32 \"bwd/block1\"\n"));
  // The same difference as data, its text the hunk above.
  EXPECT_TRUE(same.differences.empty());
  ASSERT_EQ(diff.differences.size(), 1u);
  EXPECT_EQ(diff.differences[0].kind, DifferenceKind::kCollectives);
  EXPECT_EQ(diff.differences[0].communicator, "comm 1 (size 4)");
  EXPECT_EQ(diff.differences[0].collective, 12u);
  EXPECT_EQ(diff.differences[0].headline,
            "comm 1 (size 4), ranks 0-3: first difference at collective 12 (A: step 2 of 3, line 4 of 8)");
  EXPECT_THAT(diff.text, HasSubstr(diff.differences[0].text));
}

TEST(DiffTest, RankClassesAndCommunicatorsOnOneSideOnly) {
  OpTable table;
  JobModel a, b;
  BuildJob(&a, 4, [](int) { return Repeat({}, Step(), 2); });
  // In b the odd ranks skip the last reduce-scatter of step 1, and a child exists.
  TestJob job(&b);
  for (int r = 0; r < 4; ++r) {
    const ProcessId p = job.AddRank(r);
    job.Init(p, kWorld, r, 4);
    std::vector<Op> ops = Repeat({}, Step(), 2);
    if (r % 2 == 1) ops.erase(ops.begin() + 7);
    for (const Op& op : ops) job.Collective(p, kWorld, r, 4, op);
    if (r < 2) job.Init(p, 0x77, r, 2, kWorld);
  }
  const ScheduleDiff diff = DiffSchedules(ExtractSchedule(a, &table), ExtractSchedule(b, &table), table, "A", "B");
  EXPECT_FALSE(diff.identical);
  EXPECT_THAT(diff.text, HasSubstr("# comm 1 (size 4): ranks that issued different schedules within a run: A: 0-3; "
                                   "B: 0,2 | 1,3\n"));
  EXPECT_THAT(diff.text, HasSubstr("@@ comm 1 (size 4), ranks 1,3: first difference at collective 8"));
  EXPECT_THAT(diff.text, HasSubstr("B leaves out 1 collective"));
  EXPECT_THAT(diff.text, Not(HasSubstr("ranks 0,2:")));
  EXPECT_THAT(diff.text, HasSubstr("@@ comm 2 (size 2, split from comm 1): only in B @@"));
  ASSERT_EQ(diff.differences.size(), 2u);
  EXPECT_EQ(diff.differences[0].ranks, (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(diff.differences[0].collective, 8u);
  EXPECT_EQ(diff.differences[1].kind, DifferenceKind::kCommunicatorAdded);
  EXPECT_EQ(diff.differences[1].text, "@@ comm 2 (size 2, split from comm 1): only in B @@\n");
}

}  // namespace
}  // namespace collwatch::analyzer::schedule_diff_test
