// Faults under a running 4-rank NCCL job with a standalone collector and agent: the
// collector SIGKILLed and restarted, the agent SIGKILLed and restarted, one rank
// SIGKILLed. Afterwards the store holds exactly what the rings held, byte for byte, and
// the dead rank is reported. The job's length is a count of calls, and the faults fall at
// steps the test holds it at (tests/support/loop_gate.h), so a slow machine runs the same
// test; time limits are safety nets, scaled for the build (tests/support/test_time.h).
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>

#include "gtest/gtest.h"
#include "tests/collector/trace_check.h"
#include "tests/support/loop_gate.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_time.h"

namespace collwatch::fault_test {
namespace {

using testing::LoopGate;
using testing::Scaled;
using testing::Subprocess;
using testing::TempDir;

constexpr char kJob[] = "faults";
constexpr int kRanks = 4;
// All-reduces of the loop plan in each third of the job: before the fault, while the
// collector or agent is down, after it is back.
constexpr int kThird = 300;

void Sleep(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

class FaultTest : public ::testing::Test {
 protected:
  FaultTest() : address_("127.0.0.1:" + std::to_string(testing::FreeLoopbackPort())) {}

  std::string Out() const { return dir_.path() + "/out"; }
  std::string Rings() const { return dir_.path() + "/rings"; }

  std::unique_ptr<Subprocess> StartCollector() {
    return std::make_unique<Subprocess>(
        std::vector<std::string>{COLLWATCH_CLI_PATH, "collector", "--listen", address_, "--out", Out(), "--job", kJob},
        std::map<std::string, std::string>{});
  }
  std::unique_ptr<Subprocess> StartAgent() {
    return std::make_unique<Subprocess>(
        std::vector<std::string>{COLLWATCH_CLI_PATH, "agent", "--keep-rings", "--collector", address_, "--ring-dir", Rings(), "--job",
                                 kJob},
        std::map<std::string, std::string>{});
  }
  // `plan` in 4 ranks; the loop plan makes 3 x kThird calls, held at the steps gate_ allows.
  std::unique_ptr<Subprocess> StartJob(const std::string& plan) {
    return std::make_unique<Subprocess>(
        std::vector<std::string>{COLLWATCH_NCCL_RANKS_PATH, std::to_string(kRanks), plan, dir_.path()},
        std::map<std::string, std::string>{{"LD_PRELOAD", COLLWATCH_PRELOAD_LIST},
                                           {"COLLWATCH_RING_DIR", Rings()},
                                           {"COLLWATCH_JOB_ID", kJob},
                                           {"COLLWATCH_TEST_LOOP_STEPS", std::to_string(3 * kThird)},
                                           {"COLLWATCH_TEST_LOOP_GATE", gate_.path()},
                                           {"COLLWATCH_CPU_NCCL_SHM_DIR", dir_.path()}});
  }

  // Polls until the store equals the rings (the agent ships asynchronously), up to
  // `seconds` of the default build.
  testing::TraceComparison WaitForStoreToMatchRings(double seconds) {
    testing::TraceComparison comparison;
    for (double waited = 0; waited < Scaled(seconds); waited += 0.2) {
      comparison = testing::CompareTracesWithRings(Rings(), Out(), kJob);
      if (comparison.mismatch.empty() && comparison.rings == 4 && comparison.traces == 4) break;
      Sleep(0.2);
    }
    return comparison;
  }

  // The store holds every record of the rings, and the rings hold at least the
  // `min_records` the job's calls must have written (a count of calls, not of time).
  void ExpectComplete(const testing::TraceComparison& comparison, uint64_t min_records) {
    EXPECT_EQ(comparison.rings, 4);
    EXPECT_EQ(comparison.traces, 4);
    EXPECT_EQ(comparison.mismatch, "");
    EXPECT_EQ(comparison.stored_records, comparison.ring_records);
    EXPECT_GE(comparison.ring_records, min_records) << "a record for each call at least";
  }

  // Runs the loop job through a fault: the first third is stored before it; `fault` falls
  // while the second third is written; the job finishes that third before `recover` runs,
  // then the last third. Afterwards the store equals the rings.
  void RunThroughAFault(const std::function<void()>& fault, const std::function<void()>& recover) {
    auto job = StartJob("loop");
    gate_.Open(kThird);
    ASSERT_TRUE(gate_.AwaitAll(kThird)) << "the job's first third";
    const testing::TraceComparison before = WaitForStoreToMatchRings(20);
    ASSERT_EQ(before.mismatch, "");
    ASSERT_EQ(before.stored_records, before.ring_records) << "the first third is stored before the fault";
    gate_.Open(2 * kThird);
    fault();
    ASSERT_TRUE(gate_.AwaitAll(2 * kThird)) << "the job goes on through the fault";
    recover();
    gate_.Open(3 * kThird);
    ASSERT_EQ(job->Wait(60), 0);
    ExpectComplete(WaitForStoreToMatchRings(20), uint64_t{kRanks} * 3 * kThird);
  }

  TempDir dir_;
  std::string address_;
  LoopGate gate_{dir_.path() + "/gate", kRanks};
};

TEST_F(FaultTest, CollectorKilledAndRestartedLosesNothing) {
  auto collector = StartCollector();
  auto agent = StartAgent();
  // SIGKILL: no chance to flush anything; the job goes on, the agent keeps reading and
  // backs off until the new collector listens.
  RunThroughAFault([&] { collector->KillGroup(); }, [&] { collector = StartCollector(); });
}

TEST_F(FaultTest, AgentKilledAndRestartedLosesNothing) {
  auto collector = StartCollector();
  auto agent = StartAgent();
  // Its unacknowledged batches die with it; the new one resumes where the store ends.
  RunThroughAFault([&] { agent->KillGroup(); }, [&] { agent = StartAgent(); });
}

TEST_F(FaultTest, KilledRankIsReportedAndItsRingShipped) {
  auto collector = StartCollector();
  auto agent = StartAgent();
  auto job = StartJob("skip");  // rank 1 waits in pause(), the others hang in an all-reduce
  // Find rank 1's process from its ring.
  pid_t rank1 = 0;
  for (int attempt = 0; attempt < Scaled(200) && rank1 == 0; ++attempt) {
    auto paths = ListRingFiles(Rings());
    for (const std::string& path : paths.ok() ? *paths : std::vector<std::string>{}) {
      auto reader = RingReader::Open(path);
      if (reader.ok() && (*reader)->identity().rank == 1 && (*reader)->records_written() >= 2) {
        rank1 = (*reader)->identity().pid;
      }
    }
    Sleep(0.05);
  }
  ASSERT_NE(rank1, 0);
  Sleep(0.5);
  ASSERT_EQ(kill(rank1, SIGKILL), 0);

  // While the others still run, the store says rank 1 is dead and rank 0 is running.
  testing::TraceComparison comparison;
  for (double waited = 0; waited < Scaled(15); waited += 0.2) {
    comparison = testing::CompareTracesWithRings(Rings(), Out(), kJob);
    // Each rank's status arrives on its own stream: wait for both (slow under TSan).
    if (comparison.status_by_rank[1].writer_status() == v1::WRITER_STATUS_DEAD &&
        comparison.status_by_rank[0].writer_status() == v1::WRITER_STATUS_RUNNING) {
      break;
    }
    Sleep(0.2);
  }
  EXPECT_EQ(comparison.status_by_rank[1].writer_status(), v1::WRITER_STATUS_DEAD);
  EXPECT_EQ(comparison.status_by_rank[0].writer_status(), v1::WRITER_STATUS_RUNNING);

  job->KillGroup();
  ExpectComplete(WaitForStoreToMatchRings(20), 4 * 3);
}

// No agent started by hand: the preload starts one (COLLWATCH_COLLECTOR), once for the
// four ranks of the node, and it ships everything.
TEST_F(FaultTest, PreloadStartsOneAgentPerNodeAndJob) {
  auto collector = StartCollector();
  Subprocess job({COLLWATCH_NCCL_RANKS_PATH, "4", "all", dir_.path()},
                 {{"LD_PRELOAD", COLLWATCH_PRELOAD_LIST},
                  {"COLLWATCH_RING_DIR", Rings()},
                  {"COLLWATCH_JOB_ID", kJob},
                  {"COLLWATCH_COLLECTOR", address_},
                  {"COLLWATCH_KEEP_RINGS", "1"},  // compared with the store below
                  {"COLLWATCH_AGENT", COLLWATCH_CLI_PATH},
                  {"COLLWATCH_CPU_NCCL_SHM_DIR", dir_.path()}});
  ASSERT_EQ(job.Wait(60), 0);
  const testing::TraceComparison comparison = WaitForStoreToMatchRings(20);
  ExpectComplete(comparison, 4 * 40);

  std::ifstream lock(Rings() + "/agent." + kJob + ".lock");
  pid_t agent = 0;
  lock >> agent;
  ASSERT_GT(agent, 0) << "the lock file names the agent";
  EXPECT_EQ(kill(agent, 0), 0) << "the agent outlives the job until its idle timeout";
  std::ifstream log(Rings() + "/agent." + std::string(kJob) + ".log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  size_t starts = 0;
  for (size_t at = text.find("shipping rings"); at != std::string::npos; at = text.find("shipping rings", at + 1)) ++starts;
  EXPECT_EQ(starts, 1u) << text;
  kill(agent, SIGTERM);
}

// The job ran while no collector was up and none ever comes: the agent cannot ship what
// the rings hold. Without --give-up-after it waits for ever (that ring stays live); with
// it, it leaves once the collector was unreachable that long after the writers ended,
// says so, and the records stay in the rings.
TEST_F(FaultTest, AgentGivesUpOnACollectorThatNeverComesBack) {
  auto job = StartJob("all");
  ASSERT_EQ(job->Wait(60), 0);
  const testing::DeadLoopbackPort never_a_collector;
  auto agent_for = [&](const std::vector<std::string>& extra, const std::string& log) {
    std::vector<std::string> argv{COLLWATCH_CLI_PATH, "agent", "--keep-rings", "--collector", never_a_collector.address(), "--ring-dir", Rings(),
                                  "--job", kJob, "--idle-exit", "1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return std::make_unique<Subprocess>(argv, std::map<std::string, std::string>{}, "", log);
  };
  const std::string waiting_log = dir_.path() + "/waiting.log";
  const std::string giving_up_log = dir_.path() + "/giving-up.log";
  auto waiting = agent_for({}, waiting_log);
  auto giving_up = agent_for({"--give-up-after", "2"}, giving_up_log);
  EXPECT_EQ(giving_up->Wait(30), 1) << "its rings were not shipped: a failure, said as one";
  Sleep(2);  // not a limit but the time to show it: no scaling
  EXPECT_TRUE(waiting->Running()) << "without --give-up-after the agent still waits for the collector";
  std::ifstream log(giving_up_log);
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  size_t given_up = 0;
  for (size_t at = text.find("giving up on rank"); at != std::string::npos; at = text.find("giving up on rank", at + 1)) {
    ++given_up;
  }
  EXPECT_EQ(given_up, 4u) << text;
  EXPECT_NE(text.find("no live ring for 1 s; exiting"), std::string::npos) << text;
  EXPECT_NE(text.find("4 of 4 rings were not shipped whole"), std::string::npos) << text;
  const testing::TraceComparison comparison = testing::CompareTracesWithRings(Rings(), Out(), kJob);
  EXPECT_EQ(comparison.rings, 4) << "the records stay in the rings";
}

}  // namespace
}  // namespace collwatch::fault_test
