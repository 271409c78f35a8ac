// An agent whose collector takes every stream and ends it (its store cannot be written:
// a file-size limit) backs off, gives up when --give-up-after says, keeps the ring and
// says so in a few lines (it reconnected and was cut off forever, 80 lines a second).
// Threading: single-threaded test code over real collector, agent and job processes.
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ring/ring_reader.h"
#include "tests/support/read_files.h"
#include "tests/support/run_env.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_time.h"

namespace collwatch::stuck_store_test {
namespace {

using ::testing::HasSubstr;
using testing::ReadFile;
using testing::Subprocess;
using testing::TempDir;

size_t Lines(const std::string& text) {
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

TEST(StuckStoreTest, AnAgentCutOffAtEveryStreamGivesUpWhenPromisedAndKeepsTheRing) {
  TempDir dir;
  const std::string rings = dir.path() + "/rings";
  ASSERT_EQ(mkdir(rings.c_str(), 0700), 0);
  // An ended writer's ring, of more records than the first block of a trace holds.
  Subprocess job({COLLWATCH_NCCL_RANKS_PATH, "1", "loop", dir.path()},
                 {{"LD_PRELOAD", COLLWATCH_PRELOAD_LIST}, {"COLLWATCH_RING_DIR", rings}, {"COLLWATCH_JOB_ID", "stuck"},
                  {"RANK", "0"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "1"}, {"COLLWATCH_TEST_LOOP_STEPS", "300"},
                  {"COLLWATCH_CPU_NCCL_SHM_DIR", dir.path()}});
  ASSERT_EQ(job.Wait(60), 0);
  absl::StatusOr<std::vector<std::string>> ring_paths = ListRingFiles(rings);
  ASSERT_TRUE(ring_paths.ok() && ring_paths->size() == 1u);
  const std::string ring = ring_paths->front();

  // A collector that takes every stream (a trace's first block fits) but can store no
  // batch: a file-size limit of one block. Its log goes through a pipe to a `cat` outside
  // the limit, or the limit would silence it too.
  const std::string socket = "unix:" + dir.path() + "/c.sock";
  Subprocess collector({"/bin/sh", "-c",
                        "(ulimit -f 1; exec " + std::string(COLLWATCH_CLI_PATH) + " collector --listen " + socket +
                            " --out " + dir.path() + "/store) 2>&1 | cat"},
                       testing::CollwatchRunEnv({}), dir.path() + "/collector.err");
  testing::WaitForText(dir.path() + "/collector.err", "listening", 10);
  ASSERT_THAT(ReadFile(dir.path() + "/collector.err"), HasSubstr("listening on"));

  const auto start = std::chrono::steady_clock::now();
  Subprocess agent({COLLWATCH_CLI_PATH, "agent", "--collector", socket, "--ring-dir", rings, "--idle-exit", "1",
                    "--give-up-after", "5"},
                   testing::CollwatchRunEnv({}), "", dir.path() + "/agent.err");
  const int status = agent.Wait(60);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string log = ReadFile(dir.path() + "/agent.err");
  ASSERT_NE(status, -1) << "still reconnecting after 60 s; " << Lines(log) << " log lines:\n" << log.substr(0, 4000);
  EXPECT_EQ(status, 1) << "its ring was not shipped: a failure, said as one\n" << log;
  EXPECT_GE(seconds, 5) << "it gave up before --give-up-after\n" << log;
  EXPECT_LT(Lines(log), 20u) << log;
  EXPECT_THAT(log, HasSubstr("ended the stream")) << log;
  EXPECT_THAT(log, HasSubstr("giving up on rank 0")) << log;
  EXPECT_THAT(log, HasSubstr("stored none of its records for 5 s")) << log;
  EXPECT_TRUE(std::filesystem::exists(ring)) << "the records stay in the ring\n" << log;
  EXPECT_TRUE(collector.Running()) << "the collector itself goes on";
  EXPECT_THAT(ReadFile(dir.path() + "/collector.err"), HasSubstr("File too large"));
}

}  // namespace
}  // namespace collwatch::stuck_store_test
