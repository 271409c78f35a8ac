// Check against a baseline: step counts, changes named with context, rank classes,
// missing and extra communicators, JUnit.
#include "analyzer/schedule_check.h"

#include "analyzer/baseline.h"
#include "analyzer/schedule_test_job.h"
#include "analyzer/test_job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace collwatch::analyzer::schedule_check_test {
namespace {

using testing::BaselineText;
using testing::BuildJob;
using testing::Gather;
using testing::kWorld;
using testing::Op;
using testing::ReduceScatter;
using testing::Repeat;
using testing::Step;
using testing::TestJob;
using ::testing::HasSubstr;
using ::testing::Not;

// ---- Check ------------------------------------------------------------------------------

CheckResult CheckRun(const std::string& baseline_text, const std::vector<Op>& ops, OpTable* table,
                     int world = 4) {
  absl::StatusOr<Baseline> baseline = ParseBaseline(baseline_text, table);
  EXPECT_TRUE(baseline.ok()) << baseline.status();
  JobModel model;
  BuildJob(&model, world, [&](int) { return ops; }, /*comm=*/0xbeef);
  return CheckSchedule(*baseline, ExtractSchedule(model, table), *table);
}

TEST(CheckTest, PassesForAnyNumberOfIdenticalSteps) {
  OpTable table;
  const std::string baseline = BaselineText(Repeat({Gather("warmup")}, Step(), 3, {Gather("tail")}), &table);
  for (int steps : {1, 2, 3, 10}) {
    const CheckResult result = CheckRun(baseline, Repeat({Gather("warmup")}, Step(), steps, {Gather("tail")}), &table);
    EXPECT_TRUE(result.passed) << steps << "\n" << CheckReportText(result, "b", "r");
    ASSERT_EQ(result.comms.size(), 1u);
    EXPECT_EQ(result.comms[0].name, "comm 1 (size 4)");
  }
  // No step at all, or half a step, is a change.
  EXPECT_FALSE(CheckRun(baseline, {Gather("warmup"), Gather("tail")}, &table).passed);
  std::vector<Op> half = Repeat({Gather("warmup")}, Step(), 2);
  half.resize(half.size() - 3);
  half.push_back(Gather("tail"));
  EXPECT_FALSE(CheckRun(baseline, half, &table).passed);
}

TEST(CheckTest, ACountChangeInTheSecondStepIsNamedWithContext) {
  OpTable table;
  const std::string baseline = BaselineText(Repeat({}, Step(), 3), &table);
  std::vector<Op> ops = Repeat({}, Step(), 3);
  ops[Step().size() + 2].count = 2048;  // step 2, third collective: fwd/block1 all-gather
  const CheckResult result = CheckRun(baseline, ops, &table);
  ASSERT_FALSE(result.passed);
  const std::string& message = result.comms[0].message;
  ASSERT_EQ(result.comms[0].differences.size(), 1u);
  const ScheduleDifference& difference = result.comms[0].differences[0];
  EXPECT_EQ(difference.kind, DifferenceKind::kCollectives);
  EXPECT_EQ(difference.collective, 11u);
  EXPECT_EQ(difference.ranks, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(difference.text, message);
  EXPECT_THAT(message, HasSubstr("@@ comm 1 (size 4), ranks 0-3: collective 11 differs (step 2, line 3 of 8; "
                                 "baseline line 13) @@\n"
                                 "  the baseline: all-gather 1024 float32 \"fwd/block1\"\n"
                                 "  the run:      all-gather 2048 float32 \"fwd/block1\"\n"
                                 "  all-gather changed: count 1024 -> 2048\n"
                                 "  ('-' the baseline, '+' the run)\n"));
  EXPECT_THAT(message, HasSubstr("  #10     all-gather 1024 float32 \"fwd/block0\"\n"
                                 "- #11     all-gather 1024 float32 \"fwd/block1\"\n"
                                 "+ #11     all-gather 2048 float32 \"fwd/block1\"\n"
                                 "  #12     all-gather 1024 float32 \"bwd/block1\"\n"));
  const std::string text = CheckReportText(result, "clean.baseline", "runs/new");
  EXPECT_THAT(text, HasSubstr("FAIL  comm 1 (size 4)\n"));
  EXPECT_THAT(text, HasSubstr("runs/new changes the collective schedule of clean.baseline in 1 of 1"));
}

TEST(CheckTest, DtypeAndInsertedCollectivesAreChanges) {
  OpTable table;
  const std::string baseline = BaselineText(Repeat({}, Step(), 3), &table);
  std::vector<Op> bf16 = Repeat({}, Step(), 3);
  bf16[4].dtype = testing::kBfloat16;
  const CheckResult dtype = CheckRun(baseline, bf16, &table);
  ASSERT_FALSE(dtype.passed);
  EXPECT_THAT(dtype.comms[0].message, HasSubstr("reduce-scatter changed: dtype float32 -> bfloat16"));

  // Per-head backward: the trunk's backward runs inside the first step's heads.
  std::vector<Op> inserted = Repeat({}, Step(), 3);
  inserted.insert(inserted.begin() + 3, {Gather("bwd/extra.block1"), ReduceScatter("bwd/extra.block1")});
  const CheckResult insert = CheckRun(baseline, inserted, &table);
  ASSERT_FALSE(insert.passed);
  EXPECT_THAT(insert.comms[0].message, HasSubstr("collective 4 differs"));
  EXPECT_THAT(insert.comms[0].message, HasSubstr("the run inserts 2 collectives here"));
  EXPECT_THAT(insert.comms[0].message, HasSubstr("+ #4      all-gather 1024 float32 \"bwd/extra.block1\"\n"
                                                 "+ #5      reduce-scatter 256 float32 avg \"bwd/extra.block1\"\n"
                                                 "  #6      all-gather 1024 float32 \"bwd/block1\"\n"));

  std::vector<Op> dropped = Repeat({}, Step(), 3);
  dropped.erase(dropped.begin() + 12);
  const CheckResult drop = CheckRun(baseline, dropped, &table);
  ASSERT_FALSE(drop.passed);
  EXPECT_THAT(drop.comms[0].message, HasSubstr("the run leaves out 1 collective here"));
}

TEST(CheckTest, RegionsCountUnlessIgnored) {
  OpTable table;
  const std::string baseline = BaselineText(Repeat({}, Step(), 3), &table);
  std::vector<Op> renamed = Repeat({}, Step(), 3);
  for (Op& op : renamed) op.region = "renamed/" + op.region;
  EXPECT_FALSE(CheckRun(baseline, renamed, &table).passed);
  OpTable no_regions(/*ignore_regions=*/true);
  EXPECT_TRUE(CheckRun(baseline, renamed, &no_regions).passed);
}

TEST(CheckTest, AStoppedRunAndExtraCollectivesAreChanges) {
  OpTable table;
  const std::string baseline = BaselineText(Repeat({}, Step(), 3, {Gather("tail")}), &table);
  std::vector<Op> stopped = Repeat({}, Step(), 2);
  stopped.resize(stopped.size() - 2);
  const CheckResult early = CheckRun(baseline, stopped, &table);
  ASSERT_FALSE(early.passed);
  EXPECT_THAT(early.comms[0].message, HasSubstr("(the run ends here)"));
  const CheckResult extra = CheckRun(baseline, Repeat({}, Step(), 3, {Gather("tail"), Gather("more")}), &table);
  ASSERT_FALSE(extra.passed);
  EXPECT_THAT(extra.comms[0].message, HasSubstr("collective 26 differs (past the baseline's end) @@\n"
                                                "  the baseline: (nothing more)\n"
                                                "  the run:      all-gather 1024 float32 \"more\"\n"
                                                "  the run goes on past the end of the baseline\n"));
  EXPECT_THAT(extra.comms[0].message,
              HasSubstr("+ #26     all-gather 1024 float32 \"more\"\n  (the baseline ends here)"));
}

TEST(CheckTest, APinnedStepCountIsKept) {
  OpTable table;
  const std::string text = "collwatch-baseline 1\ncomm 1 size 4\n  ranks 0-3\n    step x 2\n"
                           "      all-gather 1 float32 -\n      all-reduce 1 float32 sum -\n    end\n";
  const std::vector<Op> step = {Op{ring::ApiFn::kAllGather, 1, 7, ""}, Op{ring::ApiFn::kAllReduce, 1, 7, "", 0}};
  EXPECT_TRUE(CheckRun(text, Repeat({}, step, 2), &table).passed);
  EXPECT_FALSE(CheckRun(text, Repeat({}, step, 3), &table).passed);
  // A huge pinned count costs nothing: nothing is expanded up front.
  const std::string huge = "collwatch-baseline 1\ncomm 1 size 4\n  ranks 0-3\n    step x 1000000000000\n"
                           "      all-gather 1 float32 -\n    end\n";
  const CheckResult result = CheckRun(huge, Repeat({}, {step[0]}, 3), &table);
  ASSERT_FALSE(result.passed);
  EXPECT_THAT(result.comms[0].message, HasSubstr("the run stops here"));
}

TEST(CheckTest, RankClassesAreCheckedOneByOne) {
  OpTable table;
  // The baseline's odd ranks run one more collective.
  const std::string text = "collwatch-baseline 1\ncomm 1 size 4\n  ranks 0,2\n    all-gather 1 float32 -\n"
                           "  ranks 1,3\n    all-gather 1 float32 -\n    all-gather 2 float32 -\n";
  absl::StatusOr<Baseline> baseline = ParseBaseline(text, &table);
  ASSERT_TRUE(baseline.ok()) << baseline.status();
  JobModel model;
  BuildJob(&model, 4, [](int r) {
    std::vector<Op> ops = {Op{ring::ApiFn::kAllGather, 1, 7, ""}};
    if (r == 1 || r == 3 || r == 2) ops.push_back(Op{ring::ApiFn::kAllGather, 2, 7, ""});
    return ops;
  });
  const CheckResult result = CheckSchedule(*baseline, ExtractSchedule(model, &table), table);
  ASSERT_FALSE(result.passed);
  EXPECT_THAT(result.comms[0].message, HasSubstr("ranks 2: collective 2 differs"));
  EXPECT_THAT(result.comms[0].message, Not(HasSubstr("ranks 1,3")));
}

TEST(CheckTest, MissingAndExtraCommunicatorsFail) {
  OpTable table;
  const std::string text = "collwatch-baseline 1\ncomm 1 size 4\n  ranks 0-3\n    all-gather 1 float32 -\n"
                           "comm 2 size 2 parent 1\n  ranks 0-1\n";
  absl::StatusOr<Baseline> baseline = ParseBaseline(text, &table);
  ASSERT_TRUE(baseline.ok()) << baseline.status();
  JobModel model;
  TestJob job(&model);
  for (int r = 0; r < 4; ++r) {
    const ProcessId p = job.AddRank(r);
    job.Init(p, kWorld, r, 4);
    job.Collective(p, kWorld, r, 4, Op{ring::ApiFn::kAllGather, 1, 7, ""});
    job.Init(p, 0x5151, r, 4, kWorld);  // a child of size 4, not 2
  }
  const CheckResult result = CheckSchedule(*baseline, ExtractSchedule(model, &table), table);
  ASSERT_FALSE(result.passed);
  ASSERT_EQ(result.comms.size(), 3u);
  EXPECT_TRUE(result.comms[0].passed);
  EXPECT_FALSE(result.comms[1].passed);
  EXPECT_THAT(result.comms[1].message, HasSubstr("comm 2 (size 2, split from comm 1): not in the run"));
  EXPECT_THAT(result.comms[2].message,
              HasSubstr("comm 2 (size 4, split from comm 1): a communicator the baseline does not have"));
  ASSERT_EQ(result.comms[1].differences.size(), 1u);
  EXPECT_EQ(result.comms[1].differences[0].kind, DifferenceKind::kCommunicatorMissing);
  EXPECT_EQ(result.comms[1].differences[0].collective, 0u);
  ASSERT_EQ(result.comms[2].differences.size(), 1u);
  EXPECT_EQ(result.comms[2].differences[0].kind, DifferenceKind::kCommunicatorAdded);
}

TEST(CheckTest, JunitHasATestcasePerCommunicatorAndTheDiffAsFailure) {
  OpTable table;
  const std::string baseline = BaselineText(Repeat({}, {Gather("a<&>\"'\x01")}, 3), &table);
  CheckResult result = CheckRun(baseline, Repeat({}, {Gather("a<&>\"'\x01", 8)}, 3), &table);
  ASSERT_FALSE(result.passed);
  ASSERT_EQ(result.comms[0].differences.size(), 1u);
  CommCheck extra;
  extra.name = "comm 2 (size 2)";
  extra.passed = true;
  extra.seconds = 0.25;
  result.comms.push_back(extra);
  const std::string xml = CheckJunitXml(result, {"collwatch check clean.baseline", 1.5, ""});
  EXPECT_THAT(xml, HasSubstr("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"));
  EXPECT_THAT(xml, HasSubstr("<testsuite name=\"collwatch check clean.baseline\" tests=\"2\" failures=\"1\" "
                             "errors=\"0\" skipped=\"0\" time=\"1.500\">"));
  EXPECT_THAT(xml, HasSubstr("<testcase classname=\"collwatch.schedule\" name=\"comm 1 (size 4)\" time=\""));
  // The message is the first difference's one line; the hunk is the body.
  const std::string headline = result.comms[0].differences[0].headline;
  EXPECT_THAT(headline, HasSubstr("comm 1 (size 4), ranks 0-3: collective 1 differs"));
  EXPECT_EQ(headline.find('\n'), std::string::npos);
  const size_t message = xml.find("message=\"");
  ASSERT_NE(message, std::string::npos);
  const std::string attribute = xml.substr(message, xml.find("\">", message) - message);
  EXPECT_THAT(attribute, HasSubstr("comm 1 (size 4), ranks 0-3: collective 1 differs"));
  EXPECT_THAT(attribute, Not(HasSubstr("&#10;")));
  EXPECT_THAT(xml.substr(message + attribute.size()), HasSubstr("@@ comm 1 (size 4), ranks 0-3"));
  EXPECT_THAT(xml, HasSubstr("&quot;a&lt;&amp;&gt;\\&quot;&apos;\\x01&quot;"));  // the region as the line quotes it
  EXPECT_THAT(xml, HasSubstr("<testcase classname=\"collwatch.schedule\" name=\"comm 2 (size 2)\" time=\"0.250\"/>"));
  EXPECT_EQ(xml.find('\x01'), std::string::npos);
}

TEST(CheckTest, JunitOfInputThatCouldNotBeCheckedHoldsAnErrorCase) {
  const std::string xml =
      CheckJunitXml({}, {"collwatch check a.baseline", 0.01, "collwatch check: a.baseline: not there\nmore words"});
  EXPECT_THAT(xml, HasSubstr("tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\" time=\"0.010\">"));
  EXPECT_THAT(xml, HasSubstr("<testcase classname=\"collwatch.check\" name=\"input\" time=\"0.000\">\n"
                             "      <error type=\"BadInput\" message=\"collwatch check: a.baseline: not there\">"
                             "collwatch check: a.baseline: not there\nmore words</error>"));
}

}  // namespace
}  // namespace collwatch::analyzer::schedule_check_test
