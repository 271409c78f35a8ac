// `collwatch import --flight-recorder` and `analyze` on dumps that are not what they seem
// (issue #38 items 3 and 4): files of a dump folder that cannot be read (a FIFO, a link
// to /dev/zero, a rank number beyond any rank) were dropped without a word and the rank
// blamed; dumps of two jobs were imported as one. Threading: single-threaded.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "cli/analyze_command.h"
#include "cli/import_command.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace collwatch {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kFixtures = COLLWATCH_FR_FIXTURES;

class FlightRecorderInputsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/collwatch-fr-inputs-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A folder of dumps named `name` holding `copies` (fixture path -> name in the folder).
  std::string Folder(const std::string& name, const std::vector<std::pair<std::string, std::string>>& copies) {
    const std::string folder = dir_ + "/" + name;
    fs::create_directories(folder);
    for (const auto& [from, to] : copies) fs::copy_file(kFixtures + "/" + from, folder + "/" + to);
    return folder;
  }

  // `collwatch import`: its exit status; stdout and stderr in import_text_.
  int Import(const std::vector<std::string>& inputs, const std::string& out) {
    ImportCommandOptions options;
    options.flight_recorder = inputs;
    options.out_dir = out;
    std::ostringstream text, err;
    const int status = RunImportCommand(options, text, err);
    import_text_ = text.str() + err.str();
    return status;
  }

  // `collwatch analyze --json`: report.json; the exit status in `status`.
  nlohmann::json Analyze(const std::string& path, int* status) {
    AnalyzeOptions options;
    options.path = path;
    options.json = true;
    std::ostringstream out, err;
    *status = RunAnalyzeCommand(options, out, err);
    return nlohmann::json::parse(out.str(), nullptr, /*allow_exceptions=*/false);
  }

  std::string dir_;
  std::string import_text_;
};

// Rank 1's dump in the folder is a FIFO, a link to /dev/zero, or a copy of it named with a
// number beyond any rank: each was passed over without a word, and the report said "rank 1
// wrote no dump (given none)". Each is named, on stderr and among the report's data gaps,
// and the verdict is that the data is incomplete.
TEST_F(FlightRecorderInputsTest, ADumpFileThatCannotBeReadIsNamedAndTheVerdictIncomplete) {
  const std::string rank1 = kFixtures + "/fsdp-late-rank/nccl_trace_rank_1";
  struct Case {
    std::string name;
    std::function<void(const std::string& folder)> make;
    std::string words;
  };
  const std::vector<Case> cases = {
      {"nccl_trace_rank_1", [](const std::string& at) { ASSERT_EQ(mkfifo(at.c_str(), 0600), 0); }, "is a FIFO"},
      {"nccl_trace_rank_1", [](const std::string& at) { fs::create_symlink("/dev/zero", at); }, "character device"},
      {"nccl_trace_rank_99999999999999999999", [&](const std::string& at) { fs::copy_file(rank1, at); },
       "beyond any rank"},
      {"nccl_trace_rank_2147483648", [&](const std::string& at) { fs::copy_file(rank1, at); }, "beyond any rank"},
  };
  int index = 0;
  for (const Case& spoilt : cases) {
    SCOPED_TRACE(spoilt.name + ": " + spoilt.words);
    const std::string folder = Folder("dumps" + std::to_string(index), {{"fsdp-late-rank/nccl_trace_rank_0",
                                                                         "nccl_trace_rank_0"}});
    const std::string file = folder + "/" + spoilt.name;
    spoilt.make(file);
    const std::string out = dir_ + "/out" + std::to_string(index++);
    ASSERT_EQ(Import({folder}, out), 0) << import_text_;
    EXPECT_THAT(import_text_, AllOf(HasSubstr("warning: " + file), HasSubstr(spoilt.words))) << import_text_;
    EXPECT_THAT(import_text_, Not(HasSubstr("rank 1 wrote no dump (given none)"))) << import_text_;
    int status = 0;
    const nlohmann::json report = Analyze(out, &status);
    ASSERT_TRUE(report.is_object());
    EXPECT_EQ(status, 1);
    EXPECT_FALSE(report["complete"].get<bool>()) << report.dump(2);
    EXPECT_THAT(report["data_gaps"].dump(), AllOf(HasSubstr(file), HasSubstr(spoilt.words))) << report.dump(2);
    EXPECT_THAT(report["notes"].dump(), Not(HasSubstr("wrote no dump (given none)"))) << report.dump(2);
  }
}

// A FIFO beside each rank's dump (PyTorch's dump pipe, PREFIX<rank>.pipe, made in the same
// folder) holds no rank's calls: named in a note, the healthy job stays healthy.
TEST_F(FlightRecorderInputsTest, APipeBesideARanksDumpIsANoteNotAGap) {
  const std::string folder = Folder("clean", {{"ddp-clean-json/nccl_trace_rank_0", "nccl_trace_rank_0"},
                                              {"ddp-clean-json/nccl_trace_rank_1", "nccl_trace_rank_1"}});
  ASSERT_EQ(mkfifo((folder + "/nccl_trace_rank_1.pipe").c_str(), 0600), 0);
  ASSERT_EQ(Import({folder}, dir_ + "/out"), 0) << import_text_;
  EXPECT_THAT(import_text_, HasSubstr("nccl_trace_rank_1.pipe: is a FIFO")) << import_text_;
  int status = 0;
  const nlohmann::json report = Analyze(dir_ + "/out", &status);
  EXPECT_EQ(status, 0) << report.dump(2);
}

// Rank 0 of one job's dumps beside rank 1 of another's (same world, same group, same
// format): imported without a word, a PATH_DIVERGENCE between two programs. Refused,
// naming both files, nothing written.
TEST_F(FlightRecorderInputsTest, DumpsOfTwoJobsAreRefusedNamingBoth) {
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"fsdp-divergent-path/nccl_trace_rank_0", "ddp-divergent-path/nccl_trace_rank_1"},
      {"ddp-divergent-path/nccl_trace_rank_0", "fsdp-divergent-path/nccl_trace_rank_1"},
      {"fsdp-dtype-mismatch/nccl_trace_rank_0", "fsdp-late-rank/nccl_trace_rank_1"},
  };
  int index = 0;
  for (const auto& [first, second] : pairs) {
    SCOPED_TRACE(first + " + " + second);
    const std::string folder =
        Folder("two" + std::to_string(index), {{first, "nccl_trace_rank_0"}, {second, "nccl_trace_rank_1"}});
    const std::string out = dir_ + "/two-out" + std::to_string(index++);
    EXPECT_EQ(Import({folder}, out), 2) << import_text_;
    EXPECT_THAT(import_text_, AllOf(HasSubstr("dumps of different jobs"), HasSubstr(folder + "/nccl_trace_rank_0"),
                                    HasSubstr(folder + "/nccl_trace_rank_1"), HasSubstr("nothing written")))
        << import_text_;
    EXPECT_FALSE(fs::exists(out));
  }
  // Each real hang's own two dumps are one job.
  for (const char* fixture : {"fsdp-divergent-path", "fsdp-late-rank", "fsdp-history-cut", "ddp-dtype-mismatch",
                              "fsdp-skipped-reduce-scatter", "ddp-divergent-path", "fsdp-dtype-mismatch"}) {
    SCOPED_TRACE(fixture);
    const std::string one = std::string(fixture) + "/nccl_trace_rank_";
    const std::string folder = Folder(std::string("one-") + fixture,
                                      {{one + "0", "nccl_trace_rank_0"}, {one + "1", "nccl_trace_rank_1"}});
    EXPECT_EQ(Import({folder}, dir_ + "/one-out-" + fixture), 0) << import_text_;
  }
}

}  // namespace
}  // namespace collwatch
