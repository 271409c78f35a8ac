// Two "nodes" of one job, each wrapped in its own `collwatch run --collector ADDR` with its
// own ring folder (docs/multi-node.md's wrapped form), against one standalone collector on
// loopback. Ranks known from srun's variables alone, the job id from Slurm's: one job, and
// rank 1's real stall named. With no shared id the second node's streams are refused, and
// the finding and the verdict say so instead of blaming rank 1.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/read_files.h"
#include "tests/support/run_env.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_time.h"

namespace collwatch::multi_node_run_test {
namespace {

using testing::ReadFile;
using testing::ReadJson;
using testing::Subprocess;
using testing::TempDir;

bool Has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Waits up to `seconds` for something to accept connections on the loopback `port`.
bool WaitForListener(int port, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool connected = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    close(fd);
    if (connected) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// One job of two ranks on two "nodes": a collector, and per node a `collwatch run` of one
// rank of the test program's skip plan (rank 1 skips the second all-reduce and waits).
class MultiNodeRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = testing::FreeLoopbackPort();
    address_ = "127.0.0.1:" + std::to_string(port_);
    collector_ = std::make_unique<Subprocess>(
        std::vector<std::string>{COLLWATCH_CLI_PATH, "collector", "--listen", address_, "--out", dir_.path() + "/store",
                                 "--stall-after", "3"},
        testing::CollwatchRunEnv({}), dir_.path() + "/collector.out", dir_.path() + "/collector.err");
    ASSERT_TRUE(WaitForListener(port_, testing::Scaled(30))) << ReadFile(dir_.path() + "/collector.err");
  }

  // Starts node `rank` with `env` (the launcher's variables) over the test's own.
  std::unique_ptr<Subprocess> StartNode(int rank, std::map<std::string, std::string> env) {
    const std::string node = dir_.path() + "/node" + std::to_string(rank);
    env["COLLWATCH_CPU_NCCL_SHM_DIR"] = dir_.path();
    for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "COLLWATCH_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID",
                             "SLURM_STEP_ID", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"}) {
      env.try_emplace(name, "");  // empty reads as unset: nothing of the machine's leaks in
    }
    return std::make_unique<Subprocess>(
        std::vector<std::string>{COLLWATCH_CLI_PATH, "run", "--collector", address_, "--out", node + "-out",
                                 "--ring-dir", node + "-rings", "--kill-on-hang", "--no-dashboard", "--",
                                 COLLWATCH_NCCL_RANKS_PATH, "2", "skip", dir_.path()},
        testing::CollwatchRunEnv(env), node + ".out", node + ".err");
  }

  nlohmann::json Report(int rank) { return ReadJson(dir_.path() + "/node" + std::to_string(rank) + "-out/report.json"); }
  std::string Log(int rank) { return ReadFile(dir_.path() + "/node" + std::to_string(rank) + ".err"); }

  TempDir dir_;
  int port_ = 0;
  std::string address_;
  std::unique_ptr<Subprocess> collector_;
};

// srun starts `collwatch run` once per node: SLURM_JOB_ID and SLURM_STEP_ID agree, the
// ranks are SLURM_PROCID (no RANK anywhere).
TEST_F(MultiNodeRunTest, SlurmsJobAndRankVariablesMakeOneJob) {
  auto slurm = [](int rank) {
    return std::map<std::string, std::string>{{"SLURM_JOB_ID", "4711"}, {"SLURM_STEP_ID", "0"},
                                              {"SLURM_PROCID", std::to_string(rank)}, {"SLURM_NTASKS", "2"},
                                              {"SLURM_LOCALID", "0"}};
  };
  std::unique_ptr<Subprocess> node0 = StartNode(0, slurm(0));
  std::unique_ptr<Subprocess> node1 = StartNode(1, slurm(1));
  EXPECT_EQ(node0->Wait(120), 124) << Log(0);
  EXPECT_EQ(node1->Wait(60), 124) << Log(1);
  const nlohmann::json report = Report(0);
  ASSERT_TRUE(report.is_object()) << Log(0);
  EXPECT_EQ(report["job"], "4711_0");
  EXPECT_TRUE(report["refused_streams"].empty()) << report.dump(2);
  ASSERT_FALSE(report["findings"].empty()) << Log(0);
  const nlohmann::json& finding = report["findings"][0];
  EXPECT_EQ(finding["kind"], "NOT_JOINED") << finding.dump(2);
  EXPECT_EQ(finding["lagging_ranks"], nlohmann::json::array({1}));
  EXPECT_EQ(finding["seq"], 2) << "rank 1 did the first all-reduce: its records arrived";
  EXPECT_TRUE(finding["refused_streams"].empty());
  EXPECT_FALSE(Has(Log(1), "refused")) << Log(1);
  // Both ranks' traces are in the one job's store, each ring's header naming its srun rank.
  const std::string analyzed = dir_.path() + "/analyzed.json";
  Subprocess analyze({COLLWATCH_CLI_PATH, "analyze", "--json", dir_.path() + "/store/4711_0"},
                     testing::CollwatchRunEnv({}), analyzed);
  analyze.Wait(60);
  const nlohmann::json stored = ReadJson(analyzed);
  ASSERT_TRUE(stored.is_object());
  ASSERT_EQ(stored["ranks"].size(), 2u) << stored.dump(2);
  EXPECT_EQ(stored["ranks"][0]["global_rank"], 0);
  EXPECT_EQ(stored["ranks"][1]["global_rank"], 1);
}

// No launcher id: each node's run names its own job, so the collector serves the first
// and refuses the second; rank 1's silence is then no evidence of anything.
TEST_F(MultiNodeRunTest, RefusedStreamsAreSaidInTheFindingAndTheVerdict) {
  auto ranks = [](int rank) {
    return std::map<std::string, std::string>{{"RANK", std::to_string(rank)}, {"WORLD_SIZE", "2"},
                                              {"LOCAL_RANK", "0"}};
  };
  std::unique_ptr<Subprocess> node0 = StartNode(0, ranks(0));
  // Node 0's job is the one served: node 1 starts once the store holds it (a folder for
  // its job), not after a fixed time that a loaded machine may not give node 0 enough of.
  bool served = false;
  for (int waited = 0; waited < testing::Scaled(300) && !served; ++waited) {
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(dir_.path() + "/store", error)) {
      served = served || entry.is_directory();
    }
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(served) << Log(0);
  std::unique_ptr<Subprocess> node1 = StartNode(1, ranks(1));
  EXPECT_EQ(node0->Wait(120), 124) << Log(0);
  EXPECT_TRUE(Has(Log(0), "is this run's own")) << "the run warns before it starts\n" << Log(0);
  const nlohmann::json report = Report(0);
  ASSERT_TRUE(report.is_object()) << Log(0);
  EXPECT_EQ(report["healthy"], false);
  EXPECT_EQ(report["complete"], false);
  ASSERT_EQ(report["refused_streams"].size(), 1u) << report.dump(2);
  EXPECT_EQ(report["refused_streams"][0]["rank"], 1);
  ASSERT_FALSE(report["findings"].empty()) << Log(0);
  const nlohmann::json& finding = report["findings"][0];
  ASSERT_EQ(finding["refused_streams"].size(), 1u) << finding.dump(2);
  EXPECT_TRUE(Has(finding["summary"], "the collector refused the records of rank 1")) << finding["summary"];
  EXPECT_TRUE(Has(Log(0), "refused the streams of 1 process")) << "in the verdict\n" << Log(0);
  // Node 1's job still waits: its run hears of no finding for a job nobody serves.
  kill(node1->pid(), SIGTERM);
  EXPECT_NE(node1->Wait(60), -1) << Log(1);
  EXPECT_TRUE(Has(Log(1), "refused")) << Log(1);
}

}  // namespace
}  // namespace collwatch::multi_node_run_test
