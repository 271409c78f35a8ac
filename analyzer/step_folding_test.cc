// Step folding: the step found whatever the number of steps, warm-ups and tails, long
// schedules.
#include "analyzer/step_folding.h"

#include "analyzer/schedule.h"
#include "analyzer/schedule_test_job.h"
#include "analyzer/test_job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace collwatch::analyzer::step_folding_test {
namespace {

using testing::Gather;
using testing::Ids;
using testing::Op;
using testing::ReduceScatter;
using testing::Repeat;
using testing::Step;

// ---- Folding ----------------------------------------------------------------------------

TEST(FoldScheduleTest, FindsTheStepWhateverTheNumberOfSteps) {
  OpTable table;
  const std::vector<Op> warmup = {Op{ring::ApiFn::kBroadcast, 99, 7, "init/params", ring::kUnset, 0}};
  const std::vector<Op> tail = {Gather("dump/params"), Gather("dump/grads")};
  std::vector<Segment> first;
  for (int steps = 2; steps <= 7; ++steps) {
    const std::vector<Segment> segments = FoldSchedule(Ids(&table, Repeat(warmup, Step(), steps, tail)));
    ASSERT_EQ(segments.size(), 3u) << steps;
    EXPECT_FALSE(segments[0].steps);
    EXPECT_EQ(segments[0].ops, Ids(&table, warmup));
    EXPECT_TRUE(segments[1].steps);
    EXPECT_EQ(segments[1].repeat, static_cast<uint64_t>(steps));
    EXPECT_EQ(segments[1].ops, Ids(&table, Step()));
    EXPECT_EQ(segments[2].ops, Ids(&table, tail));
  }
}

TEST(FoldScheduleTest, StepsOnlyFoldToOneSegment) {
  OpTable table;
  const std::vector<Segment> segments = FoldSchedule(Ids(&table, Repeat({}, Step(3), 4)));
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_TRUE(segments[0].steps);
  EXPECT_EQ(segments[0].repeat, 4u);
  EXPECT_EQ(segments[0].ops.size(), Step(3).size());
}

TEST(FoldScheduleTest, LayersThatRepeatInsideTheStepDoNotHideTheStep) {
  // Identical layers without regions repeat within a step; the step still wins (k >= 2).
  OpTable table;
  std::vector<Op> step = {Gather("", 64)};
  for (int l = 0; l < 6; ++l) step.push_back(Gather("", 1024));
  for (int l = 0; l < 6; ++l) step.push_back(ReduceScatter("", 256));
  for (int steps : {2, 3, 5}) {
    const std::vector<Segment> segments = FoldSchedule(Ids(&table, Repeat({}, step, steps)));
    ASSERT_EQ(segments.size(), 1u) << steps;
    EXPECT_EQ(segments[0].ops, Ids(&table, step)) << steps;
  }
}

TEST(FoldScheduleTest, AWarmupEndingLikeTheStepFoldsTheSameWayForAnyStepCount) {
  // The step's last op also ends the warm-up: the fold starts one op early (a rotation of
  // the step), and does so whatever the number of steps.
  OpTable table;
  const std::vector<Op> step = Step();
  const std::vector<Op> warmup = {Gather("warmup"), step.back()};
  const std::vector<Segment> reference = FoldSchedule(Ids(&table, Repeat(warmup, step, 2)));
  for (int steps = 3; steps <= 6; ++steps) {
    std::vector<Segment> segments = FoldSchedule(Ids(&table, Repeat(warmup, step, steps)));
    ASSERT_EQ(segments.size(), reference.size());
    for (size_t i = 0; i < segments.size(); ++i) EXPECT_EQ(segments[i].ops, reference[i].ops) << steps;
  }
}

TEST(FoldScheduleTest, NoRepeatStaysLiteral) {
  OpTable table;
  const std::vector<Op> ops = Step();
  const std::vector<Segment> segments = FoldSchedule(Ids(&table, ops));
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_FALSE(segments[0].steps);
  EXPECT_EQ(segments[0].ops.size(), ops.size());
  EXPECT_TRUE(FoldSchedule({}).empty());
  // Two equal ops in a row are not worth a step block.
  EXPECT_FALSE(FoldSchedule(Ids(&table, {Gather("a"), Gather("a")}))[0].steps);
}

TEST(FoldScheduleTest, LongSchedulesFindTheirStepThroughLikelyPeriods) {
  // 300-op steps x 20 = 6,000 ops: past the full scan, the period comes from the gaps.
  OpTable table;
  std::vector<Op> step;
  for (int i = 0; i < 300; ++i) step.push_back(Gather("layer" + std::to_string(i % 100), 1000 + i));
  const std::vector<Op> warmup = {Gather("warmup", 7), Gather("warmup", 8)};
  const std::vector<Segment> segments = FoldSchedule(Ids(&table, Repeat(warmup, step, 20)));
  ASSERT_EQ(segments.size(), 2u);
  EXPECT_EQ(segments[0].ops.size(), 2u);
  EXPECT_TRUE(segments[1].steps);
  EXPECT_EQ(segments[1].ops.size(), 300u);
  EXPECT_EQ(segments[1].repeat, 20u);
}

}  // namespace
}  // namespace collwatch::analyzer::step_folding_test
