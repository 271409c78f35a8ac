// The agent the preload starts (COLLWATCH_COLLECTOR) authenticates like a hand-started
// one: with COLLWATCH_TOKEN_FILE it reaches a collector that wants a token, and with
// COLLWATCH_TLS_CA too it speaks TLS; without the token the collector stores nothing and
// the agent says why in its log. The 4-rank NCCL job runs the same either way.
// Threading: single-threaded test code driving child processes.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "gtest/gtest.h"
#include "tests/collector/trace_check.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_time.h"

namespace collwatch::spawned_agent_auth_test {
namespace {

using testing::Subprocess;
using testing::TempDir;

constexpr char kJob[] = "spawned-auth";
constexpr char kToken[] = "spawned-agent-token-1b7e";

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

void Sleep(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

class SpawnedAgentAuthTest : public ::testing::Test {
 protected:
  SpawnedAgentAuthTest() : address_("127.0.0.1:" + std::to_string(testing::FreeLoopbackPort())) {
    std::ofstream(TokenFile()) << kToken << "\n";
  }
  // The agent lives in its own session, out of reach of the job's process group.
  ~SpawnedAgentAuthTest() override {
    if (const pid_t agent = AgentPid(); agent > 0) kill(agent, SIGKILL);
  }

  std::string Out() const { return dir_.path() + "/out"; }
  std::string Rings() const { return dir_.path() + "/rings"; }
  std::string TokenFile() const { return dir_.path() + "/token"; }
  static std::string TlsFile(const std::string& name) { return std::string(COLLWATCH_TEST_DATA_DIR) + "/tls/" + name; }

  std::unique_ptr<Subprocess> StartCollector(bool tls) {
    std::vector<std::string> argv = {COLLWATCH_CLI_PATH, "collector", "--listen", address_, "--out", Out(),
                                     "--job", kJob, "--token-file", TokenFile()};
    if (tls) {
      for (const std::string& arg : {std::string("--tls-cert"), TlsFile("test-cert.pem"), std::string("--tls-key"),
                                     TlsFile("test-key.pem")}) {
        argv.push_back(arg);
      }
    }
    auto collector =
        std::make_unique<Subprocess>(argv, std::map<std::string, std::string>{}, "", dir_.path() + "/collector.log");
    // Listening before the job starts: else the agent's first attempts meet a closed port
    // (slow starts under the sanitizers) and "Connection refused" reads like a refusal.
    for (int i = 0; i < testing::Scaled(300) && ReadFile(dir_.path() + "/collector.log").find("listening on") == std::string::npos;
         ++i) {
      Sleep(0.05);
    }
    EXPECT_NE(ReadFile(dir_.path() + "/collector.log").find("listening on"), std::string::npos);
    return collector;
  }

  // Runs the 4-rank job with the preload, which starts the agent; `extra` adds to its env.
  int RunJob(const std::map<std::string, std::string>& extra) {
    std::map<std::string, std::string> env = {{"LD_PRELOAD", COLLWATCH_PRELOAD_LIST},
                                              {"COLLWATCH_RING_DIR", Rings()},
                                              {"COLLWATCH_JOB_ID", kJob},
                                              {"COLLWATCH_COLLECTOR", address_},
                                              {"COLLWATCH_AGENT", COLLWATCH_CLI_PATH},
                                              {"COLLWATCH_CPU_NCCL_SHM_DIR", dir_.path()},
                                              // Kept, to be compared with the store byte for byte.
                                              {"COLLWATCH_KEEP_RINGS", "1"}};
    for (const auto& [name, value] : extra) env[name] = value;
    Subprocess job({COLLWATCH_NCCL_RANKS_PATH, "4", "all", dir_.path()}, env);
    return job.Wait(60);
  }

  pid_t AgentPid() const {
    std::ifstream lock(Rings() + "/agent." + kJob + ".lock");
    pid_t pid = 0;
    lock >> pid;
    return pid;
  }
  std::string AgentLog() const { return ReadFile(Rings() + "/agent." + std::string(kJob) + ".log"); }

  // Every ring stored, byte for byte.
  void ExpectEverythingStored() {
    testing::TraceComparison comparison;
    for (double waited = 0; waited < testing::Scaled(20); waited += 0.2) {
      comparison = testing::CompareTracesWithRings(Rings(), Out(), kJob);
      if (comparison.mismatch.empty() && comparison.traces == 4) break;
      Sleep(0.2);
    }
    EXPECT_EQ(comparison.rings, 4);
    EXPECT_EQ(comparison.traces, 4) << AgentLog();
    EXPECT_EQ(comparison.mismatch, "");
    EXPECT_EQ(comparison.stored_records, comparison.ring_records);
  }

  TempDir dir_;
  std::string address_;
};

TEST_F(SpawnedAgentAuthTest, TokenFileReachesACollectorThatWantsOne) {
  auto collector = StartCollector(/*tls=*/false);
  ASSERT_EQ(RunJob({{"COLLWATCH_TOKEN_FILE", TokenFile()}}), 0);
  ExpectEverythingStored();
  EXPECT_EQ(AgentLog().find(kToken), std::string::npos) << "the token itself was logged";
}

TEST_F(SpawnedAgentAuthTest, TokenAndTlsTogether) {
  auto collector = StartCollector(/*tls=*/true);
  ASSERT_EQ(RunJob({{"COLLWATCH_TOKEN_FILE", TokenFile()}, {"COLLWATCH_TLS_CA", TlsFile("test-cert.pem")}}), 0);
  ExpectEverythingStored();
}

TEST_F(SpawnedAgentAuthTest, WithoutTheTokenNothingIsStoredAndTheAgentSaysWhy) {
  auto collector = StartCollector(/*tls=*/false);
  ASSERT_EQ(RunJob({}), 0);
  std::string log;
  for (int i = 0; i < testing::Scaled(200) && log.find("the collector refused") == std::string::npos; ++i) {
    Sleep(0.05);
    log = AgentLog();
  }
  EXPECT_NE(log.find("the collector refused"), std::string::npos) << log;
  EXPECT_NE(log.find("token"), std::string::npos) << log;
  EXPECT_TRUE(ListRankTraces(Out(), kJob).empty());
}

// Outside `collwatch run` nothing else frees /dev/shm: the agent removes each ring once its
// process ended and the collector acknowledged every record, and not before. The collector
// comes up only after the job, so the rings are still whole when copied for the check.
TEST_F(SpawnedAgentAuthTest, RingsOfEndedWritersAreRemovedOnceStored) {
  ASSERT_EQ(RunJob({{"COLLWATCH_TOKEN_FILE", TokenFile()}, {"COLLWATCH_KEEP_RINGS", "0"}}), 0);
  Sleep(1.0);  // the agent tries, and backs off
  const std::string copies = dir_.path() + "/copies";
  std::filesystem::create_directory(copies);
  const absl::StatusOr<std::vector<std::string>> rings = ListRingFiles(Rings());
  ASSERT_TRUE(rings.ok());
  ASSERT_EQ(rings->size(), 4u) << "no record is acknowledged yet: every ring stays";
  for (const std::string& ring : *rings) {
    std::filesystem::copy_file(ring, copies + "/" + std::filesystem::path(ring).filename().string());
  }
  auto collector = StartCollector(/*tls=*/false);
  for (double waited = 0; waited < testing::Scaled(30) && !ListRingFiles(Rings())->empty(); waited += 0.2) Sleep(0.2);
  EXPECT_TRUE(ListRingFiles(Rings())->empty()) << AgentLog();
  const testing::TraceComparison comparison = testing::CompareTracesWithRings(copies, Out(), kJob);
  EXPECT_EQ(comparison.rings, 4);
  EXPECT_EQ(comparison.traces, 4);
  EXPECT_EQ(comparison.mismatch, "");
  EXPECT_EQ(comparison.stored_records, comparison.ring_records);
  EXPECT_NE(AgentLog().find("removed the ring of"), std::string::npos) << AgentLog();
}

}  // namespace
}  // namespace collwatch::spawned_agent_auth_test
