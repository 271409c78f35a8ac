// `collwatch import --flight-recorder` then `collwatch analyze` on Flight Recorder dumps that
// PyTorch 2.11 wrote when its watchdog timed out real hangs on 2 x H100
// (scripts/gpu_flight_recorder.sh; tests/data/flight_recorder/*/fr_trace.txt is what
// PyTorch's own analyzer said of each): every case named with its kind, place and ranks.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/analyze_command.h"
#include "cli/import_command.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/analyze_both_ways.h"

namespace collwatch::flight_recorder_end_to_end_test {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::HasSubstr;

const std::string kFixtures = COLLWATCH_FR_FIXTURES;

class FlightRecorderEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/collwatch-fr-e2e-XXXXXX";
    dir_ = ::mkdtemp(pattern);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Imports `inputs`, analyses the result; the report as JSON (null: the import failed).
  nlohmann::json ImportAndAnalyze(const std::vector<std::string>& inputs, int* analyze_exit = nullptr) {
    ImportCommandOptions import;
    import.flight_recorder = inputs;
    import.out_dir = dir_ + "/import-" + std::to_string(imports_++);
    std::ostringstream out, err;
    if (RunImportCommand(import, out, err) != 0) {
      import_error_ = err.str();
      return nullptr;
    }
    AnalyzeOptions analyze;
    analyze.path = import.out_dir;
    analyze.json = true;
    const testing::AnalyzedBothWays report = testing::AnalyzeBothWays(analyze);
    if (analyze_exit != nullptr) *analyze_exit = report.exit_code;
    return nlohmann::json::parse(report.out);
  }

  std::string dir_;
  std::string import_error_;
  int imports_ = 0;
};

struct Expected {
  std::string fixture;
  std::string kind;
  uint64_t seq;
  std::vector<std::vector<int>> classes;  // divergences
  std::vector<int> lagging;               // stalls
};

TEST_F(FlightRecorderEndToEndTest, EachRealHangIsNamedAsItHappened) {
  const std::vector<Expected> cases = {
      // FSDP2, odd ranks text-only: rank 0 all-gathers the vision tower, rank 1 does not.
      {"fsdp-divergent-path", "PATH_DIVERGENCE", 2, {{0}, {1}}, {}},
      // Rank 1's parameters in bf16: the first all-gather differs in dtype only.
      {"fsdp-dtype-mismatch", "SIGNATURE_MISMATCH", 1, {{0}, {1}}, {}},
      // No token reaches expert 1 on rank 1: FSDP skips its reduce-scatter there.
      {"fsdp-skipped-reduce-scatter", "SKIPPED_REDUCE_SCATTER", 9, {{0}, {1}}, {}},
      // Rank 1 sleeps before step 1's forward; both dumped.
      {"fsdp-late-rank", "NOT_JOINED", 22, {}, {1}},
      // Rank 1 stopped (SIGSTOP) before step 1: it wrote no dump.
      {"fsdp-stopped-rank", "NOT_JOINED", 22, {}, {1}},
      // Text-only batches from step 3, 60 entries kept: the overlap is compared.
      {"fsdp-history-cut", "PATH_DIVERGENCE", 65, {{0}, {1}}, {}},
      // DDP: rank 1 all-reduces a metric rank 0 never does, between gradient buckets.
      {"ddp-divergent-path", "PATH_DIVERGENCE", 14, {{0}, {1}}, {}},
      // DDP: rank 1's replica in bf16: the first parameter broadcast differs in dtype.
      {"ddp-dtype-mismatch", "SIGNATURE_MISMATCH", 3, {{0}, {1}}, {}},
      // The skipped reduce-scatter where rank 1 finished the job before rank 0 timed out.
      {"fsdp-skipped-reduce-scatter-rank1-finished", "NOT_JOINED", 61, {}, {1}},
  };
  for (const Expected& expected : cases) {
    SCOPED_TRACE(expected.fixture);
    int exit = 0;
    const nlohmann::json report = ImportAndAnalyze({kFixtures + "/" + expected.fixture}, &exit);
    ASSERT_FALSE(report.is_null()) << import_error_;
    EXPECT_EQ(exit, 1);
    ASSERT_FALSE(report["findings"].empty());
    const nlohmann::json& finding = report["findings"][0];
    EXPECT_EQ(finding["kind"], expected.kind);
    EXPECT_EQ(finding["seq"], expected.seq);
    EXPECT_TRUE(finding["decided"].get<bool>());
    if (!expected.classes.empty()) {
      EXPECT_EQ(finding["rank_classes"], nlohmann::json(expected.classes));
    }
    if (!expected.lagging.empty()) {
      EXPECT_EQ(finding["lagging_ranks"], nlohmann::json(expected.lagging));
    }
    EXPECT_THAT(report["source"].get<std::string>(), HasSubstr("Flight Recorder"));
  }
}

TEST_F(FlightRecorderEndToEndTest, TheBranchPointIsInTheUsersCode) {
  // Rank 0 ran the vision tower's line, rank 1 the decoder block's: the branch in forward().
  const nlohmann::json report = ImportAndAnalyze({kFixtures + "/fsdp-divergent-path"});
  ASSERT_FALSE(report.is_null()) << import_error_;
  const nlohmann::json& branch = report["findings"][0]["branch_point"];
  ASSERT_TRUE(branch.is_object()) << report["findings"][0].dump(2);
  EXPECT_EQ(branch["function"], "forward");
  EXPECT_THAT(branch["file"].get<std::string>(), HasSubstr("torch_job.py"));
  ASSERT_EQ(branch["arms"].size(), 2u);
  EXPECT_NE(branch["arms"][0]["line"], branch["arms"][1]["line"]);
  // The skipped reduce-scatter's code comes from its unit's forward all-gather (inferred).
  const nlohmann::json skipped = ImportAndAnalyze({kFixtures + "/fsdp-skipped-reduce-scatter"});
  ASSERT_FALSE(skipped.is_null()) << import_error_;
  EXPECT_TRUE(skipped["findings"][0]["branch_point"].is_object());
}

TEST_F(FlightRecorderEndToEndTest, MissingDumpsAndCutHistoriesAreSaid) {
  nlohmann::json report = ImportAndAnalyze({kFixtures + "/fsdp-stopped-rank"});
  ASSERT_FALSE(report.is_null()) << import_error_;
  EXPECT_THAT(report["notes"], Contains(HasSubstr("rank 1 wrote no dump")));
  EXPECT_THAT(report["findings"][0]["summary"].get<std::string>(), HasSubstr("Rank 1 left no trace"));
  // A dump taken away from a divergence: what is left cannot show the divergence, and
  // the finding says the missing rank took part up to where its peers completed.
  report = ImportAndAnalyze({kFixtures + "/fsdp-divergent-path/nccl_trace_rank_0"});
  ASSERT_FALSE(report.is_null()) << import_error_;
  EXPECT_EQ(report["findings"][0]["kind"], "NOT_JOINED");
  EXPECT_THAT(report["findings"][0]["summary"].get<std::string>(), HasSubstr("took part up to seq 17"));
  report = ImportAndAnalyze({kFixtures + "/fsdp-history-cut"});
  ASSERT_FALSE(report.is_null()) << import_error_;
  EXPECT_THAT(report["notes"], Contains(HasSubstr("its history of group 0 (default_pg) starts at collective #25")));
  EXPECT_THAT(report["notes"], Contains(HasSubstr("starts at collective #40")));
}

TEST_F(FlightRecorderEndToEndTest, AHealthyJobInEitherFormIsHealthy) {
  for (const std::string suffix : {"", ".json"}) {
    int exit = -1;
    const nlohmann::json report = ImportAndAnalyze(
        {kFixtures + "/ddp-clean-json/nccl_trace_rank_0" + suffix, kFixtures + "/ddp-clean-json/nccl_trace_rank_1" + suffix},
        &exit);
    ASSERT_FALSE(report.is_null()) << import_error_;
    EXPECT_TRUE(report["findings"].empty()) << report["findings"].dump(2);
    EXPECT_EQ(exit, 0);
    EXPECT_EQ(report["calls"], 26);
  }
}

TEST_F(FlightRecorderEndToEndTest, BadDumpsAreRefusedWithTheFileNamed) {
  const std::string truncated = dir_ + "/nccl_trace_rank_1";
  {
    std::ifstream in(kFixtures + "/fsdp-late-rank/nccl_trace_rank_1", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() - 7);
  }
  EXPECT_TRUE(ImportAndAnalyze({kFixtures + "/fsdp-late-rank/nccl_trace_rank_0", truncated}).is_null());
  EXPECT_THAT(import_error_, HasSubstr(truncated + ": pickle: "));
  EXPECT_THAT(import_error_, HasSubstr("nothing written"));
  EXPECT_FALSE(fs::exists(dir_ + "/import-0"));
}

}  // namespace
}  // namespace collwatch::flight_recorder_end_to_end_test
