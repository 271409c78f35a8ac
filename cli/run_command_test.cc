// RunJobCommand on real commands (/bin/sh, with the preload just built): the command's
// exit status is the run's, a signal reads 128 + signal, a stop signal sent to collwatch
// reaches the command; the command sees the preload, ring folder and job id; run.json and
// the report are written, the token file and the private ring folder removed after.
#include "cli/run_command.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <iterator>
#include <string>

#include "cli/stop_signals.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace collwatch {
namespace {

class RunCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A stop signal sent to this process must wait for the supervising thread: block it
    // before anything (gtest included) could start a thread that would take it.
    BlockStopSignals();
    setenv("COLLWATCH_PRELOAD", COLLWATCH_TEST_PRELOAD, 1);
    // A sanitized preload in /bin/sh needs its sanitizer's runtime loaded first; `run`
    // keeps what the caller preloads ahead of its own (empty without a sanitizer).
    setenv("LD_PRELOAD", COLLWATCH_SANITIZER_RUNTIME, 1);
    setenv("COLLWATCH_JOB_ID", "run-command-test", 1);
    out_ = std::filesystem::path(::testing::TempDir()) / ("run-command-" + std::to_string(getpid()));
    std::filesystem::remove_all(out_);
    options_.out_dir = out_.string();
    options_.dashboard = false;
    options_.drain_timeout_s = 10;
  }
  void TearDown() override { std::filesystem::remove_all(out_); }

  int Run(const std::string& script) {
    options_.command = {"/bin/sh", "-c", script};
    return RunJobCommand(options_);
  }
  nlohmann::json RunJson() const {
    std::ifstream file(out_ / "run.json");
    return nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  }
  // KEY=VALUE lines the command wrote with `env`.
  std::map<std::string, std::string> CommandEnvironment() const {
    std::map<std::string, std::string> environment;
    std::ifstream file(out_ / "env.txt");
    for (std::string line; std::getline(file, line);) {
      const size_t equals = line.find('=');
      if (equals != std::string::npos) environment[line.substr(0, equals)] = line.substr(equals + 1);
    }
    return environment;
  }

  std::filesystem::path out_;
  RunOptions options_;
};

TEST_F(RunCommandTest, NoCommandIsCollwatchsOwnFailure) {
  options_.command.clear();
  EXPECT_EQ(RunJobCommand(options_), kExitRunFailed) << "not 2, which a job's argument parser exits with";
}

// A run that recorded no NCCL call checked nothing: never "healthy", whatever the command did.
TEST_F(RunCommandTest, NoNcclCallRecordedIsNotHealthy) {
  EXPECT_EQ(Run("exit 0"), 0) << "the job's own status without --fail-on-findings";
  std::ifstream file(out_ / "report.json");
  const nlohmann::json report = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["healthy"], false);
  EXPECT_EQ(report["calls"], 0);
  std::ifstream text_file(out_ / "report.txt");
  const std::string text((std::istreambuf_iterator<char>(text_file)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("no NCCL call was recorded, so nothing was checked"), std::string::npos) << text;
  EXPECT_EQ(text.find("No findings"), std::string::npos) << text;
}

TEST_F(RunCommandTest, FailOnFindingsTurnsAnUnhealthyZeroIntoItsOwnStatus) {
  options_.fail_on_findings = true;
  EXPECT_EQ(Run("exit 0"), kExitRunNotHealthy) << "nothing recorded is not healthy";
  EXPECT_EQ(Run("exit 5"), 5) << "a failing job keeps its own status";
}

TEST_F(RunCommandTest, ExitStatusOfTheCommandAndTheFilesOfTheRun) {
  EXPECT_EQ(Run("exit 3"), 3);
  const nlohmann::json run = RunJson();
  ASSERT_TRUE(run.is_object());
  EXPECT_EQ(run["job"], "run-command-test");
  EXPECT_EQ(run["exit_status"], 3);
  EXPECT_EQ(run["command"], nlohmann::json({"/bin/sh", "-c", "exit 3"}));
  EXPECT_EQ(run["stopped_hung_job"], false);
  EXPECT_EQ(run["stall_after_s"], 30.0) << "the default in force, not 0";
  EXPECT_EQ(run["drained"], true);
  EXPECT_EQ(run["traces"], (out_ / "run-command-test").string());
  EXPECT_TRUE(std::filesystem::exists(out_ / "report.txt"));
  EXPECT_TRUE(std::filesystem::exists(out_ / "report.json"));
  EXPECT_FALSE(std::filesystem::exists(out_ / ".collwatch-token"));  // the secret goes with the run
}

TEST_F(RunCommandTest, SuccessIsZero) { EXPECT_EQ(Run("exit 0"), 0); }

TEST_F(RunCommandTest, CommandKilledBySignalIsHundredTwentyEightPlusIt) {
  EXPECT_EQ(Run("kill -KILL $$"), 128 + SIGKILL);
  EXPECT_EQ(RunJson()["exit_status"], 128 + SIGKILL);
}

TEST_F(RunCommandTest, CommandThatCannotRunIs127) {
  options_.command = {"/nonexistent/collwatch-no-such-command"};
  EXPECT_EQ(RunJobCommand(options_), 127);
}

TEST_F(RunCommandTest, CommandSeesThePreloadRingFolderAndJob) {
  EXPECT_EQ(Run("env > '" + (out_ / "env.txt").string() + "'"), 0);
  const std::map<std::string, std::string> environment = CommandEnvironment();
  ASSERT_TRUE(environment.count("LD_PRELOAD")) << "no LD_PRELOAD in the command's environment";
  const std::string runtime = COLLWATCH_SANITIZER_RUNTIME;
  EXPECT_EQ(environment.at("LD_PRELOAD"), runtime.empty() ? COLLWATCH_TEST_PRELOAD : runtime + ":" + COLLWATCH_TEST_PRELOAD);
  EXPECT_EQ(environment.at("NVTX_INJECTION64_PATH"), COLLWATCH_TEST_PRELOAD);
  EXPECT_EQ(environment.at("COLLWATCH_JOB_ID"), "run-command-test");
  const std::string rings = environment.at("COLLWATCH_RING_DIR");
  EXPECT_FALSE(rings.empty());
  // A private folder made for the run, removed once everything was shipped.
  EXPECT_FALSE(std::filesystem::exists(rings)) << rings;
}

TEST_F(RunCommandTest, AskedRingFolderIsKept) {
  options_.ring_dir = (out_ / "my-rings").string();
  std::filesystem::create_directories(options_.ring_dir);
  EXPECT_EQ(Run("env > '" + (out_ / "env.txt").string() + "'"), 0);
  EXPECT_EQ(CommandEnvironment().at("COLLWATCH_RING_DIR"), options_.ring_dir);
  EXPECT_TRUE(std::filesystem::is_directory(options_.ring_dir));
}

TEST_F(RunCommandTest, StopSignalToCollwatchGoesToTheCommand) {
  // The command asks collwatch (its parent) to stop, as Ctrl-C or a scheduler would; the
  // signal is passed on to the command, which ends its own way, and collwatch waits for it.
  EXPECT_EQ(Run("trap 'exit 7' TERM; kill -TERM $PPID; while :; do sleep 0.05; done"), 7);
  EXPECT_EQ(RunJson()["exit_status"], 7);
}

TEST_F(RunCommandTest, StopSignalEndsACommandThatDoesNotHandleIt) {
  // Short sleeps: a signal that reaches the group before one starts is acted on when it
  // ends (the shell defers it while it waits), not 30 s later.
  EXPECT_EQ(Run("kill -INT $PPID; while :; do sleep 0.05; done"), 128 + SIGINT);
}

}  // namespace
}  // namespace collwatch
