// `collwatch import --flight-recorder` and `analyze` on dumps that are not what they seem
// (issue #38 items 3, 4 and 10): files of a dump folder that cannot be read (a FIFO, a link
// to /dev/zero, a rank number beyond any rank) were dropped without a word and the rank
// blamed; dumps of two jobs were imported as one; the files a dump's frames name were
// opened and their lines printed. Threading: single-threaded.
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
  nlohmann::json Analyze(const std::string& path, int* status, const std::string& source_root = "") {
    AnalyzeOptions options;
    options.path = path;
    options.json = true;
    options.source_root = source_root;
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

// Two ranks' dumps (JSON, with frames) whose calls part at `main`'s lines 30 and 31 of
// `source`: a branch point whose lines the report would print.
void WriteDumpsNaming(const std::string& folder, const std::string& source) {
  const auto frames = [&](const char* inner, int line) {
    return std::string(R"("frames": [{"name": ")") + inner + R"(", "filename": ")" + source +
           R"(", "line": 5}, {"name": "main", "filename": ")" + source + R"(", "line": )" + std::to_string(line) +
           "}]";
  };
  const auto entry = [&](int id, int seq, const char* op, bool done, const std::string& where) {
    const std::string created = std::to_string(1'795'000'000'000'000'000 + id * 1'000'000);
    return std::string(R"({"record_id": )") + std::to_string(id) + R"(, "process_group": ["0", "default_pg"], )" +
           R"("collective_seq_id": )" + std::to_string(seq) + R"(, "p2p_seq_id": 0, "profiling_name": "nccl:)" + op +
           R"(", "time_created_ns": )" + created + R"(, "input_sizes": [[4]], "output_sizes": [[4]], )" +
           R"("input_dtypes": ["Float"], "output_dtypes": ["Float"], "state": ")" +
           (done ? "completed" : "scheduled") + R"(", "time_discovered_completed_ns": )" +
           (done ? created : std::string("0")) + R"(, "timeout_ms": 1000, "is_p2p": false, )" + where + "}";
  };
  const std::string head = R"({"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg",
    "ranks": "[0, 1]"}}, "entries": [)";
  std::ofstream(folder + "/nccl_trace_rank_0.json")
      << head << entry(0, 1, "all_reduce", true, frames("step", 29)) << ", "
      << entry(1, 2, "all_reduce", false, frames("vision", 30)) << "]}";
  std::ofstream(folder + "/nccl_trace_rank_1.json")
      << head << entry(0, 1, "all_reduce", true, frames("step", 29)) << ", "
      << entry(1, 2, "all_gather", false, frames("text", 31)) << "]}";
}

// The frames of a dump handed over name a local file (here "secret.py"): its lines were
// printed in the report. They are read only under a source root the user names.
TEST_F(FlightRecorderInputsTest, SourceLinesOfDumpsAreReadOnlyUnderARootTheUserNames) {
  const std::string root = dir_ + "/src";
  fs::create_directories(root);
  std::ofstream secret(root + "/secret.py");
  for (int line = 1; line <= 40; ++line) secret << "secret_value_" << line << " = 1\n";
  secret.close();
  const std::string folder = dir_ + "/named";
  fs::create_directories(folder);
  WriteDumpsNaming(folder, root + "/secret.py");
  ASSERT_EQ(Import({folder}, dir_ + "/out"), 0) << import_text_;

  int status = 0;
  nlohmann::json report = Analyze(dir_ + "/out", &status);
  ASSERT_TRUE(report.is_object());
  ASSERT_FALSE(report["findings"].empty()) << report.dump(2);
  ASSERT_TRUE(report["findings"][0]["branch_point"].is_object()) << report.dump(2);
  EXPECT_THAT(report.dump(), Not(HasSubstr("secret_value_"))) << "never read by default";
  EXPECT_THAT(report["notes"].dump(), HasSubstr("give --source-root DIR to read them"));
  EXPECT_THAT(report["findings"][0]["branch_point"]["text"].get<std::string>(),
              AllOf(HasSubstr("line 30"), HasSubstr("line 31")))
      << "file:line all the same";

  report = Analyze(dir_ + "/out", &status, root);
  EXPECT_THAT(report["findings"][0]["branch_point"].dump(),
              AllOf(HasSubstr("secret_value_30 = 1"), HasSubstr("secret_value_31 = 1")));

  // A root elsewhere, or one the file is reached from only through "..": not read.
  fs::create_directories(dir_ + "/elsewhere/sub");
  for (const std::string& other : {dir_ + "/elsewhere", dir_ + "/elsewhere/sub"}) {
    report = Analyze(dir_ + "/out", &status, other);
    EXPECT_THAT(report.dump(), Not(HasSubstr("secret_value_"))) << other;
  }
  // A link under the root to the file outside it: not read either.
  fs::create_directories(dir_ + "/linked");
  fs::create_symlink(root + "/secret.py", dir_ + "/linked/secret.py");
  const std::string relinked = dir_ + "/relinked";
  fs::create_directories(relinked);
  WriteDumpsNaming(relinked, dir_ + "/linked/secret.py");
  ASSERT_EQ(Import({relinked}, dir_ + "/out-linked"), 0) << import_text_;
  report = Analyze(dir_ + "/out-linked", &status, dir_ + "/linked");
  EXPECT_THAT(report.dump(), Not(HasSubstr("secret_value_")));

  AnalyzeOptions missing_root;
  missing_root.path = dir_ + "/out";
  missing_root.source_root = dir_ + "/no-such-folder";
  std::ostringstream out, err;
  EXPECT_EQ(RunAnalyzeCommand(missing_root, out, err), 2);
  EXPECT_THAT(err.str(), HasSubstr("--source-root " + dir_ + "/no-such-folder: not a folder"));
}

}  // namespace
}  // namespace collwatch
