// `collwatch gc`: on a folder with the ring of a writer that ended and the ring of one that
// runs, only the first may go, and only when shipped (or --force); `--job` of analyze and
// dump on a folder holding two jobs' rings.
#include "cli/gc_command.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "cli/dump_command.h"
#include "cli/trace_loader.h"
#include "gtest/gtest.h"
#include "interposer/ring_writer.h"
#include "ring/ring_leftovers.h"
#include "ring/ring_reader.h"

namespace collwatch::gc_command_test {
namespace {

class RingFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/collwatch-gc-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Config ConfigOf(const char* job) const {
    Config config;
    config.ring_records = 64;
    config.ring_records_set = true;
    std::snprintf(config.ring_dir, sizeof config.ring_dir, "%s", dir_.c_str());
    std::snprintf(config.job, sizeof config.job, "%s", job);
    return config;
  }
  // A ring written by a child process that has ended (and was reaped): its path.
  std::string RingOfEndedWriter(const char* job) {
    const pid_t child = fork();
    if (child == 0) {
      std::unique_ptr<RingWriter> writer = RingWriter::Create(ConfigOf(job));
      _exit(writer != nullptr ? 0 : 1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT_EQ(status, 0);
    const absl::StatusOr<std::vector<std::string>> rings = ListRingFiles(dir_);
    for (const std::string& path : *rings) {
      if (path.find("." + std::to_string(child) + ".ring") != std::string::npos) return path;
    }
    ADD_FAILURE() << "the child made no ring";
    return "";
  }
  int Gc(bool force, std::string* out) {
    std::ostringstream text, err;
    const int status = RunGcCommand(GcOptions{.dir = dir_, .force = force}, text, err);
    *out = text.str() + err.str();
    return status;
  }

  std::string dir_;
};

bool Exists(const std::string& path) { return std::filesystem::exists(path); }

TEST_F(RingFolderTest, GcRemovesOnlyTheShippedRingOfAnEndedWriter) {
  const std::string ended = RingOfEndedWriter("gcjob");
  std::unique_ptr<RingWriter> live = RingWriter::Create(ConfigOf("gcjob"));
  ASSERT_NE(live, nullptr);
  std::string out;
  // Nothing says the ended writer's records were shipped: kept, and said why.
  ASSERT_EQ(Gc(/*force=*/false, &out), 0);
  EXPECT_TRUE(Exists(ended));
  EXPECT_TRUE(Exists(live->path()));
  EXPECT_NE(out.find("removed 0 rings"), std::string::npos) << out;
  EXPECT_NE(out.find("nothing says its records were shipped"), std::string::npos) << out;
  EXPECT_NE(out.find("is running"), std::string::npos) << out;
  EXPECT_NE(out.find("job gcjob"), std::string::npos) << out;

  // Marked shipped by an agent: removed; the live writer's ring stays.
  auto reader = RingReader::Open(ended);
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE(MarkShipped((*reader)->identity()).ok());
  reader->reset();
  ASSERT_EQ(Gc(/*force=*/false, &out), 0);
  EXPECT_FALSE(Exists(ended)) << out;
  EXPECT_FALSE(Exists(SideFilePath(ended, ".shipped")));
  EXPECT_TRUE(Exists(live->path()));
  EXPECT_NE(out.find("removed 1 ring, "), std::string::npos) << out;
  EXPECT_NE(out.find(" MiB freed"), std::string::npos) << out;
}

TEST_F(RingFolderTest, GcForceRemovesUnshippedRingsOfEndedWritersOnly) {
  const std::string ended = RingOfEndedWriter("gcjob");
  std::unique_ptr<RingWriter> live = RingWriter::Create(ConfigOf("gcjob"));
  ASSERT_NE(live, nullptr);
  std::string out;
  ASSERT_EQ(Gc(/*force=*/true, &out), 0);
  EXPECT_FALSE(Exists(ended)) << out;
  EXPECT_TRUE(Exists(live->path())) << out;
}

TEST_F(RingFolderTest, AShippedMarkOfAnEarlierProcessDoesNotCount) {
  const std::string ended = RingOfEndedWriter("gcjob");
  RingIdentity other;
  other.path = ended;
  other.pid = 1;  // another process than the one that wrote the ring
  ASSERT_TRUE(MarkShipped(other).ok());
  std::string out;
  ASSERT_EQ(Gc(/*force=*/false, &out), 0);
  EXPECT_TRUE(Exists(ended)) << out;
}

TEST_F(RingFolderTest, SeveralJobsAreNeverMergedAndJobPicksOne) {
  std::unique_ptr<RingWriter> first = RingWriter::Create(ConfigOf("job-a"));
  std::unique_ptr<RingWriter> second = RingWriter::Create(ConfigOf("job-b"));
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  const absl::StatusOr<TraceSources> both = FindTraces(dir_);
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("job-a (1 ring), job-b (1 ring)"), std::string::npos) << both.status();
  EXPECT_NE(both.status().message().find("--job"), std::string::npos);

  const absl::StatusOr<TraceSources> one = FindTraces(dir_, "job-b");
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->paths.size(), 1u);
  EXPECT_EQ(one->paths[0], second->path());
  EXPECT_EQ(FindTraces(dir_, "job-c").status().code(), absl::StatusCode::kNotFound);

  std::ostringstream out, err;
  ASSERT_TRUE(DumpTraces(dir_, "job-a", DumpFormat::kText, out, err).ok()) << err.str();
  EXPECT_NE(out.str().find("job=job-a"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("job=job-b"), std::string::npos) << out.str();
  EXPECT_FALSE(DumpTraces(dir_, "", DumpFormat::kText, out, err).ok());

  analyzer::JobModel model;
  LoadSummary summary;
  ASSERT_TRUE(LoadTraces(dir_, &model, &summary, "job-b").ok());
  EXPECT_EQ(summary.job, "job-b");
  EXPECT_EQ(model.process_count(), 1u);
}

}  // namespace
}  // namespace collwatch::gc_command_test
