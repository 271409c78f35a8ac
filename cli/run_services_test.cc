// The services beside the command: with no --collector, an embedded collector on loopback
// whose fresh secret waits in OUT/.collwatch-token (its owner's alone) until the services
// go; with --collector, no collector and no token file, the given secret used.
#include "cli/run_services.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/stop_signals.h"
#include "gtest/gtest.h"

namespace collwatch {
namespace {

class RunServicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BlockStopSignals();  // as RunJobCommand does before the services start threads
    out_ = std::filesystem::path(::testing::TempDir()) / ("run-services-" + std::to_string(getpid()));
    std::filesystem::remove_all(out_);
    std::filesystem::create_directories(out_ / "rings");
    options_.out_dir = out_.string();
  }
  void TearDown() override { std::filesystem::remove_all(out_); }

  std::filesystem::path out_;
  RunOptions options_;
};

TEST_F(RunServicesTest, EmbeddedCollectorWithAFreshSecretInAnOwnerOnlyFile) {
  const std::string token_file = (out_ / ".collwatch-token").string();
  {
    absl::StatusOr<std::unique_ptr<RunServices>> services =
        RunServices::Start(options_, "job-1", (out_ / "rings").string());
    ASSERT_TRUE(services.ok()) << services.status();
    ASSERT_NE((*services)->embedded(), nullptr);
    EXPECT_EQ((*services)->address(), (*services)->embedded()->address());
    EXPECT_EQ((*services)->address().rfind("127.0.0.1:", 0), 0u) << (*services)->address();
    EXPECT_EQ((*services)->token().size(), 48u);
    EXPECT_EQ((*services)->token_file(), token_file);
    std::ifstream file(token_file);
    std::stringstream contents;
    contents << file.rdbuf();
    EXPECT_EQ(contents.str(), (*services)->token() + "\n");
    struct stat info {};
    ASSERT_EQ(lstat(token_file.c_str(), &info), 0);
    EXPECT_TRUE(S_ISREG(info.st_mode));
    EXPECT_EQ(info.st_mode & 0777, 0600u);
  }
  EXPECT_FALSE(std::filesystem::exists(token_file));  // removed with the services
}

TEST_F(RunServicesTest, EachRunHasItsOwnSecret) {
  absl::StatusOr<std::unique_ptr<RunServices>> first =
      RunServices::Start(options_, "job-1", (out_ / "rings").string());
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string first_token = (*first)->token();
  first->reset();
  absl::StatusOr<std::unique_ptr<RunServices>> second =
      RunServices::Start(options_, "job-1", (out_ / "rings").string());
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE((*second)->token(), first_token);
}

TEST_F(RunServicesTest, ExternalCollectorGetsTheGivenSecretAndNoFile) {
  options_.collector = "127.0.0.1:9";  // nobody listens: the agent keeps retrying
  options_.token = "given-secret";
  absl::StatusOr<std::unique_ptr<RunServices>> services =
      RunServices::Start(options_, "job-1", (out_ / "rings").string());
  ASSERT_TRUE(services.ok()) << services.status();
  EXPECT_EQ((*services)->embedded(), nullptr);
  EXPECT_EQ((*services)->address(), "127.0.0.1:9");
  EXPECT_EQ((*services)->token(), "given-secret");
  EXPECT_EQ((*services)->token_file(), "");
  EXPECT_FALSE(std::filesystem::exists(out_ / ".collwatch-token"));
}

TEST_F(RunServicesTest, SecretThatCannotBeWrittenStopsTheRunWithASentence) {
  options_.out_dir = (out_ / "not-there").string();
  const absl::StatusOr<std::unique_ptr<RunServices>> services =
      RunServices::Start(options_, "job-1", (out_ / "rings").string());
  ASSERT_FALSE(services.ok());
  EXPECT_EQ(services.status().message().rfind("no secret for the embedded collector: cannot create ", 0), 0u)
      << services.status().message();
}

}  // namespace
}  // namespace collwatch
