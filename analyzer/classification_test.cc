// Divergences without any NVTX region, as unannotated PyTorch jobs produce them: every
// shape (inserted forward runs, skipped reduce-scatters, a consistent dtype difference, a
// single differing count that realigns, a size difference of the same calls), on GPU-style
// ranks that keep enqueueing and on blocking CPU-style ranks, and the settle window that
// waits for the calls that decide.
#include "analyzer/classification.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "analyzer/analyzer.h"
#include "analyzer/report.h"
#include "analyzer/test_job.h"

namespace collwatch::analyzer::classification_test {
namespace {

using ring::ApiFn;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::Op;
using testing::TestJob;

constexpr uint64_t kComm = 0x5eed5eed5eed5eedull;
constexpr int64_t kStart = 1'700'000'000'000'000'000;  // TestJob's clock origin
constexpr uint64_t k6MiB = 6 * 1024 * 1024 / 4;          // float32 elements
constexpr uint64_t k3MiB = k6MiB / 2;
constexpr uint64_t k24MiB = 4 * k6MiB + k6MiB / 12;       // a language-model unit, 24.5 MiB

Op AllGather(uint64_t count, uint8_t dtype = testing::kFloat32) { return Op{ApiFn::kAllGather, count, dtype, ""}; }
Op ReduceScatter(uint64_t count) { return Op{ApiFn::kReduceScatter, count, testing::kFloat32, "", testing::kAvg}; }

// Unannotated FSDP-like steps: an image batch gathers four vision units and a projector
// before the language model; a text-only batch goes straight to the language model.
std::vector<Op> Forward(bool image) {
  std::vector<Op> ops;
  if (image) ops = {AllGather(k6MiB), AllGather(k6MiB), AllGather(k6MiB), AllGather(k6MiB), AllGather(k3MiB)};
  for (int unit = 0; unit < 3; ++unit) ops.push_back(AllGather(k24MiB));
  return ops;
}
std::vector<Op> Backward() {
  return {AllGather(k24MiB), ReduceScatter(k24MiB / 2), AllGather(k24MiB), ReduceScatter(k24MiB / 2)};
}

class Job {
 public:
  explicit Job(int nranks) : job_(&analyzer_.model()), nranks_(nranks) {
    for (int rank = 0; rank < nranks; ++rank) {
      processes_.push_back(job_.AddRank(rank));
      job_.Init(processes_.back(), kComm, rank, nranks);
    }
  }
  // Blocking (CPU backend): each call returns before the next; the last one hangs when `stuck`.
  void Blocking(int rank, const std::vector<Op>& ops, bool stuck = false) {
    for (size_t i = 0; i < ops.size(); ++i) {
      job_.Collective(processes_[static_cast<size_t>(rank)], kComm, rank, nranks_, ops[i], !(stuck && i + 1 == ops.size()));
    }
  }
  // GPU style: every call returns at once and completes later (here: never).
  void Enqueue(int rank, const std::vector<Op>& ops) {
    for (const Op& op : ops) job_.AsyncCollective(processes_[static_cast<size_t>(rank)], kComm, rank, nranks_, op);
  }
  void CleanSteps(int steps) {
    for (int step = 0; step < steps; ++step) {
      for (int rank = 0; rank < nranks_; ++rank) {
        Blocking(rank, Forward(true));
        Blocking(rank, Backward());
      }
    }
  }
  std::vector<Finding> AnalyzeAt(double seconds, bool final_pass = false) {
    return analyzer_.Analyze(kStart + static_cast<int64_t>(seconds * kSecond), final_pass);
  }

 private:
  Analyzer analyzer_;
  TestJob job_;
  int nranks_;
  std::vector<ProcessId> processes_;
};

TEST(ClassificationTest, GpuInsertedForwardRunIsAPathDivergenceNamedByItsRun) {
  Job job(2);
  job.Enqueue(0, Forward(true));
  job.Enqueue(1, Forward(false));
  const std::vector<Finding> found = job.AnalyzeAt(0.1);
  ASSERT_EQ(found.size(), 1u);
  const Finding& finding = found[0];
  EXPECT_EQ(finding.kind, FindingKind::kPathDivergence) << finding.summary;
  EXPECT_TRUE(finding.decided);
  EXPECT_THAT(finding.headline, HasSubstr("rank 0 ran 5 all-gathers (6.0 MiB x4, 3.0 MiB) that rank 1 skipped"));
  EXPECT_THAT(finding.summary, HasSubstr("dummy image"));
  EXPECT_THAT(finding.summary, Not(HasSubstr("pad")));
  EXPECT_THAT(finding.summary, Not(HasSubstr("NVTX")));
  EXPECT_TRUE(finding.regions.empty());
}

TEST(ClassificationTest, GpuVerdictWaitsForTheCallsThatDecideIt) {
  Job job(2);
  // At first each rank has reported only its first differing all-gather: 6 MiB vs 24.5 MiB.
  job.Enqueue(0, {AllGather(k6MiB)});
  job.Enqueue(1, {AllGather(k24MiB)});
  EXPECT_TRUE(job.AnalyzeAt(0.1).empty()) << "a size difference alone cannot tell a mismatch from an inserted run";
  // The ranks keep enqueueing; the alignment now shows rank 0's vision run.
  job.Enqueue(0, {AllGather(k6MiB), AllGather(k6MiB), AllGather(k6MiB), AllGather(k3MiB), AllGather(k24MiB),
                  AllGather(k24MiB), AllGather(k24MiB)});
  job.Enqueue(1, {AllGather(k24MiB), AllGather(k24MiB)});
  const std::vector<Finding> found = job.AnalyzeAt(0.2);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kPathDivergence) << found[0].summary;
  EXPECT_LT(found[0].detect_latency_s, 1.0);
}

TEST(ClassificationTest, GpuSettleWindowEndsInAnHonestUndecidedVerdict) {
  Job job(2);
  job.Enqueue(0, {AllGather(k6MiB)});
  job.Enqueue(1, {AllGather(k24MiB)});
  EXPECT_TRUE(job.AnalyzeAt(0.1).empty());
  EXPECT_TRUE(job.AnalyzeAt(0.3).empty());
  const std::vector<Finding> found = job.AnalyzeAt(0.45);
  ASSERT_EQ(found.size(), 1u);
  const Finding& finding = found[0];
  EXPECT_FALSE(finding.decided);
  EXPECT_EQ(finding.kind, FindingKind::kSignatureMismatch);
  EXPECT_EQ(finding.other_readings, (std::vector<FindingKind>{FindingKind::kPathDivergence}));
  EXPECT_THAT(finding.headline, HasSubstr("undecided: or PATH_DIVERGENCE"));
  EXPECT_THAT(finding.summary, HasSubstr("pad"));          // the mismatch reading's fix
  EXPECT_THAT(finding.summary, HasSubstr("dummy image"));  // the path reading's fix
  EXPECT_LT(finding.detect_latency_s, 1.0);
  const nlohmann::json json = FindingJson(finding);
  EXPECT_FALSE(json["decided"].get<bool>());
  EXPECT_EQ(json["other_readings"], nlohmann::json::array({"PATH_DIVERGENCE"}));
}

TEST(ClassificationTest, BlockingFirstCollectiveWithoutHistoryIsUndecidedAtOnce) {
  Job job(2);
  job.Blocking(0, {AllGather(k6MiB)}, /*stuck=*/true);
  job.Blocking(1, {AllGather(k24MiB)}, /*stuck=*/true);
  // Every rank is inside its call: nothing more can come, so no settle wait.
  const std::vector<Finding> found = job.AnalyzeAt(0.1);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_FALSE(found[0].decided);
  EXPECT_THAT(found[0].summary, HasSubstr("no rank issued a call after it"));
  EXPECT_THAT(found[0].summary, HasSubstr("(1) SIGNATURE_MISMATCH"));
  EXPECT_THAT(found[0].summary, HasSubstr("(2) PATH_DIVERGENCE"));
}

// FSDP's all-gather issued from the model's forward at `line`, as the preload reads it.
CallPath ForwardAt(int line) {
  return CallPath{{{"/opt/torch/distributed/fsdp/_flat_param.py", "unshard", 1310},
                   {"/home/me/model.py", "VisionLanguageModel.forward", line},
                   {"/home/me/train.py", "step", 12}}};
}
Op AllGatherFrom(uint64_t count, CallPath path) {
  Op op = AllGather(count);
  op.call_path = std::move(path);
  return op;
}

// The same first-step split on blocking ranks, but with the call paths the preload reads:
// the ranks issued their all-gathers from different lines of one function (the vision
// tower's on one, the first decoder block's on the other), so these are different calls.
TEST(ClassificationTest, FirstDifferingCallsFromDifferentLinesAreAPathDivergence) {
  Job job(2);
  job.Blocking(0, {AllGatherFrom(k6MiB, ForwardAt(346))}, /*stuck=*/true);
  job.Blocking(1, {AllGatherFrom(k24MiB, ForwardAt(348))}, /*stuck=*/true);
  const std::vector<Finding> found = job.AnalyzeAt(0.1);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_TRUE(found[0].decided) << found[0].summary;
  EXPECT_EQ(found[0].kind, FindingKind::kPathDivergence) << found[0].summary;
  EXPECT_THAT(found[0].summary, HasSubstr("different statements"));
  EXPECT_THAT(found[0].summary, HasSubstr("line 346"));
  EXPECT_THAT(found[0].summary, HasSubstr("dummy image"));
}

// Issued from the same line, the calls may be one call with other sizes: still undecided.
TEST(ClassificationTest, FirstDifferingCallsFromTheSameLineStayUndecided) {
  Job job(2);
  job.Blocking(0, {AllGatherFrom(k6MiB, ForwardAt(346))}, /*stuck=*/true);
  job.Blocking(1, {AllGatherFrom(k24MiB, ForwardAt(346))}, /*stuck=*/true);
  const std::vector<Finding> found = job.AnalyzeAt(0.1);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_FALSE(found[0].decided) << found[0].summary;
  EXPECT_THAT(found[0].summary, HasSubstr("(2) PATH_DIVERGENCE"));
}

TEST(ClassificationTest, BlockingDivergenceAfterCleanStepsReadsTheRunOffTheHistory) {
  Job job(4);
  job.CleanSteps(2);
  for (int rank = 0; rank < 4; ++rank) job.Blocking(rank, {Forward(rank % 2 == 0).front()}, /*stuck=*/true);
  const std::vector<Finding> found = job.AnalyzeAt(0.1);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kPathDivergence) << found[0].summary;
  EXPECT_TRUE(found[0].decided);
  EXPECT_EQ(found[0].rank_classes[0].ranks, (std::vector<int32_t>{0, 2}));
  EXPECT_THAT(found[0].headline, HasSubstr("ranks 0,2 ran 5 all-gathers (6.0 MiB x4, 3.0 MiB) that ranks 1,3 skipped"));
  EXPECT_THAT(found[0].summary, HasSubstr("agreed on before"));
}

TEST(ClassificationTest, BlockingSkippedReduceScatterIsNamedByItsUnitWithoutRegions) {
  Job job(2);
  job.CleanSteps(1);
  job.Blocking(0, {AllGather(k24MiB), ReduceScatter(k24MiB / 2)}, /*stuck=*/true);
  job.Blocking(1, {AllGather(k24MiB), AllGather(k24MiB)}, /*stuck=*/true);
  const std::vector<Finding> found = job.AnalyzeAt(0.1);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kSkippedReduceScatter) << found[0].summary;
  EXPECT_THAT(found[0].headline, HasSubstr("rank 1 did not reduce-scatter a 24.5 MiB gradient unit"));
  EXPECT_THAT(found[0].headline, Not(HasSubstr("NVTX")));
}

// The communicator's first collectives differ, an all-gather against a reduce-scatter, one
// call each and nothing after: undecided, both readings given. With one agreed step before
// it, the same heads read as above (a skipped reduce-scatter of the unit).
TEST(ClassificationTest, FirstCallsAllGatherAgainstReduceScatterAreUndecided) {
  Job job(2);
  job.Blocking(0, {AllGather(k24MiB)}, /*stuck=*/true);
  job.Blocking(1, {ReduceScatter(k24MiB / 2)}, /*stuck=*/true);
  const std::vector<Finding> found = job.AnalyzeAt(0.1);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kOpMismatch) << found[0].summary;
  EXPECT_FALSE(found[0].decided);
  EXPECT_EQ(found[0].other_readings, (std::vector<FindingKind>{FindingKind::kSkippedReduceScatter}));
  EXPECT_THAT(found[0].headline, HasSubstr("(undecided: or SKIPPED_REDUCE_SCATTER)"));
  EXPECT_THAT(found[0].summary, HasSubstr("rank 0 skipped a reduce-scatter that rank 1 issued"));
}

TEST(ClassificationTest, GpuSkippedReduceScatterAlignsIntoARun) {
  Job job(2);
  job.Enqueue(0, {AllGather(k24MiB), ReduceScatter(k24MiB / 2), AllGather(k24MiB), ReduceScatter(k24MiB / 2),
                  AllGather(k6MiB)});
  job.Enqueue(1, {AllGather(k24MiB), AllGather(k24MiB), ReduceScatter(k24MiB / 2), AllGather(k6MiB)});
  const std::vector<Finding> found = job.AnalyzeAt(0.1);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kSkippedReduceScatter) << found[0].summary;
  EXPECT_EQ(found[0].seq, 2u);
  EXPECT_TRUE(found[0].decided);
}

TEST(ClassificationTest, ConsistentDtypeDifferenceIsASignatureMismatch) {
  Job job(2);
  std::vector<Op> fp32 = Forward(false), bf16;
  for (const Op& op : fp32) bf16.push_back(AllGather(op.count, testing::kBfloat16));
  job.Enqueue(0, fp32);
  job.Enqueue(1, bf16);
  const std::vector<Finding> found = job.AnalyzeAt(0.1);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kSignatureMismatch);
  EXPECT_TRUE(found[0].decided);
  EXPECT_THAT(found[0].summary, HasSubstr("float32 vs bfloat16, byte ratio 2.00"));
}

TEST(ClassificationTest, SingleDifferingCountThatRealignsIsASignatureMismatch) {
  Job job(2);
  job.Enqueue(0, {AllGather(1000), AllGather(2000), AllGather(3000), AllGather(4000)});
  job.Enqueue(1, {AllGather(1200), AllGather(2000), AllGather(3000), AllGather(4000)});
  const std::vector<Finding> found = job.AnalyzeAt(0.1);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kSignatureMismatch) << found[0].summary;
  EXPECT_TRUE(found[0].decided);
  EXPECT_THAT(found[0].summary, HasSubstr("only this call's size differs"));
}

TEST(ClassificationTest, SameCallsWithScaledSizesAreASignatureMismatch) {
  // One rank built with another hidden size: every unit differs, in the same pattern.
  Job job(2);
  job.Enqueue(0, {AllGather(1000), AllGather(3000), AllGather(1000), AllGather(3000)});
  job.Enqueue(1, {AllGather(1250), AllGather(3750), AllGather(1250), AllGather(3750)});
  EXPECT_TRUE(job.AnalyzeAt(0.1).empty()) << "waits for calls that could still change the verdict";
  const std::vector<Finding> found = job.AnalyzeAt(0.5);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kSignatureMismatch) << found[0].summary;
  EXPECT_TRUE(found[0].decided);
  EXPECT_THAT(found[0].summary, HasSubstr("same size pattern"));
}

TEST(ClassificationTest, StretchesOfDifferentShapeArePathDivergenceWithoutRealignment) {
  // Rank 0 stopped enqueueing inside its vision run: no realignment yet, but the shapes
  // differ (the 3 MiB projector has no counterpart in rank 1's uniform units).
  Job job(2);
  job.Enqueue(0, {AllGather(k6MiB), AllGather(k6MiB), AllGather(k6MiB), AllGather(k6MiB), AllGather(k3MiB)});
  job.Enqueue(1, {AllGather(k24MiB), AllGather(k24MiB), AllGather(k24MiB), AllGather(k24MiB), AllGather(k24MiB),
                  AllGather(k24MiB)});
  EXPECT_TRUE(job.AnalyzeAt(0.1).empty()) << "waits for calls that could still change the verdict";
  const std::vector<Finding> found = job.AnalyzeAt(0.5);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kPathDivergence) << found[0].summary;
  EXPECT_TRUE(found[0].decided);
  EXPECT_THAT(found[0].headline, HasSubstr("rank 0 issued 5 all-gathers (6.0 MiB x4, 3.0 MiB) where rank 1 issued"));
}

TEST(ClassificationTest, UniformStretchesStayUndecided) {
  Job job(2);
  job.Enqueue(0, {AllGather(k6MiB), AllGather(k6MiB), AllGather(k6MiB)});
  job.Enqueue(1, {AllGather(k24MiB), AllGather(k24MiB), AllGather(k24MiB)});
  EXPECT_TRUE(job.AnalyzeAt(0.1).empty()) << "waits for calls that could still change the verdict";
  const std::vector<Finding> found = job.AnalyzeAt(0.5);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_FALSE(found[0].decided) << found[0].summary;
  EXPECT_THAT(found[0].summary, HasSubstr("the calls after it look alike"));
}

TEST(ClassificationTest, PostMortemGivesTheOnlineVerdict) {
  Job job(2);
  job.Enqueue(0, Forward(true));
  job.Enqueue(1, Forward(false));
  const std::vector<Finding> found = job.AnalyzeAt(60, /*final_pass=*/true);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kPathDivergence);
  EXPECT_LT(found[0].detect_latency_s, 0.01) << "post-mortem latency counts to the call that decided";
}

}  // namespace
}  // namespace collwatch::analyzer::classification_test
