// `collwatch analyze` of a trace store large enough that its ranks fold into their classes
// (JobModel::FoldAgreeingWindows, issue 39): the same report byte for byte as with
// --keep-every-call, and a model that holds a fraction of the calls. Threading:
// single-threaded.
#include <stdlib.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "analyzer/analyzer.h"
#include "analyzer/synthetic_job.h"
#include "cli/analyze_command.h"
#include "gtest/gtest.h"
#include "store/trace_store.h"
#include "tests/support/analyze_both_ways.h"
#include "tests/support/synthetic_store.h"

namespace collwatch::analyze_folding_test {
namespace {

namespace fs = std::filesystem;
using analyzer::kMs;
using analyzer::SyntheticJob;
using analyzer::SyntheticOp;

constexpr char kJob[] = "fold";
constexpr uint64_t kComm = 0x5ca1ab1e;
constexpr int kRanks = 16;
constexpr size_t kPositions = 600;
constexpr size_t kFault = 300;
constexpr int64_t kStartNs = 1'700'000'000'000'000'000;

// Every fourth rank skips two collectives at kFault and goes on: a ZeRO-3-like job whose
// ranks fall into two classes, written under `out_dir` as the collector writes its agents'
// streams (tests/support/synthetic_store.h). Returns the job's folder ("" on failure).
std::string StoreDivergingJob(const std::string& out_dir) {
  testing::SyntheticStore store(out_dir, kJob);
  SyntheticJob job(&store);
  const std::vector<SyntheticOp> step = analyzer::FsdpLikeStep(0);
  for (int rank = 0; rank < kRanks; ++rank) {
    const analyzer::ProcessId process = job.AddProcess(rank);
    job.Init(process, kComm, rank, kRanks, kStartNs);
    uint64_t seq = 1;
    for (size_t position = 0; position < kPositions; ++position) {
      if (rank % 4 == 1 && (position == kFault || position == kFault + 1)) continue;
      const int64_t t = kStartNs + 10 * kMs + static_cast<int64_t>(position) * kMs;
      job.Collective(process, kComm, rank, kRanks, seq++, step[position % step.size()], t, t + kMs / 2);
    }
  }
  const absl::Status stored = store.Finish();
  EXPECT_TRUE(stored.ok()) << stored;
  return stored.ok() ? JobTracesDir(out_dir, kJob) : "";
}

class AnalyzeFoldingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/collwatch-fold-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    scratch_ = pattern;
    job_dir_ = StoreDivergingJob(scratch_ + "/out");
    ASSERT_FALSE(job_dir_.empty());
  }
  void TearDown() override { fs::remove_all(scratch_); }

  std::string Report(bool json) {
    const testing::AnalyzedBothWays report = testing::AnalyzeBothWays(AnalyzeOptions{job_dir_, json, 0});
    EXPECT_EQ(report.exit_code, 1) << report.err;
    EXPECT_EQ(report.err, "");
    return report.out;
  }

  std::string scratch_;
  std::string job_dir_;
};

TEST_F(AnalyzeFoldingTest, FoldingRanksIntoTheirClassesChangesNoByteOfTheReport) {
  for (const bool json : {false, true}) {
    const std::string folded = Report(json);  // the same with --keep-every-call
    EXPECT_NE(folded.find("PATH_DIVERGENCE"), std::string::npos) << folded;
  }
}

TEST_F(AnalyzeFoldingTest, TheFoldedModelHoldsAFractionOfTheCalls) {
  size_t held[2] = {0, 0};
  for (const bool keep_every_call : {false, true}) {
    analyzer::Analyzer analysis;
    LoadSummary summary;
    AnalyzeOptions options{job_dir_, false, 0};
    options.keep_every_call = keep_every_call;
    std::ostringstream err;
    ASSERT_TRUE(AnalyzeTraces(options, &analysis, &summary, err)) << err.str();
    const analyzer::JobModel& model = analysis.model();
    for (analyzer::ProcessId p = 0; p < model.process_count(); ++p) {
      held[keep_every_call] += model.process(p).calls.stored();
    }
  }
  // Every call of every rank kept; folded, the first rank of each class keeps its calls and
  // the others only what follows their last full window.
  EXPECT_EQ(held[1], kRanks * (kPositions + 1) - 2 * (kRanks / 4));
  EXPECT_LT(held[0] * 4, held[1]) << "folded: " << held[0] << " calls, kept: " << held[1];
}

// Real jobs' stores (tests/data/gpu/README.md): FSDP and a Hugging Face-style VLM on
// 2 x H200 whose rank 1 takes another code path late in the run. Rank 1 folds the windows
// before it into rank 0's; the report is the same either way.
TEST(AnalyzeFoldingRealJobTest, RealJobsFoldAndReadTheSame) {
  for (const std::string store : {"2026-11-28-h200x2-torch-fsdp-divergent-late",
                                  "2026-11-28-h200x2-torch-hf-vlm-divergent-late"}) {
    SCOPED_TRACE(store);
    const std::string path = std::string(COLLWATCH_GPU_TRACES_DIR) + "/" + store;
    for (const bool json : {false, true}) {
      const testing::AnalyzedBothWays report = testing::AnalyzeBothWays(AnalyzeOptions{path, json, 0});
      EXPECT_EQ(report.exit_code, 1) << report.err;
      EXPECT_NE(report.out.find("PATH_DIVERGENCE"), std::string::npos) << report.out;
    }
    analyzer::Analyzer analysis;
    LoadSummary summary;
    std::ostringstream err;
    ASSERT_TRUE(AnalyzeTraces(AnalyzeOptions{path, false, 0}, &analysis, &summary, err)) << err.str();
    const analyzer::Comm& comm = analysis.model().comms().at(0);
    EXPECT_GE(comm.ranks.at(1).folded.size(), 4 * analyzer::kChainWindow) << "rank 1 folded at least 4 windows";
  }
}

}  // namespace
}  // namespace collwatch::analyze_folding_test
