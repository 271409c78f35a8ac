// The spawned agent's pid as the preload reads it back from the lock file (to name the
// agent as its tracer): a whole pid above 1, never through a link.
#include "interposer/agent_spawn.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace collwatch {
namespace {

class SpawnedAgentPidTest : public testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/collwatch-agent-pid-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    std::snprintf(config_.ring_dir, sizeof config_.ring_dir, "%s", dir_.c_str());
    std::snprintf(config_.job, sizeof config_.job, "job1");
  }
  void TearDown() override {
    unlink(LockPath().c_str());
    unlink((dir_ + "/elsewhere").c_str());
    rmdir(dir_.c_str());
  }
  std::string LockPath() const { return dir_ + "/agent.job1.lock"; }
  void WriteLock(const std::string& text) { std::ofstream(LockPath(), std::ios::trunc) << text; }

  std::string dir_;
  Config config_;
};

TEST_F(SpawnedAgentPidTest, ReadsTheWholePidTheSpawnerWrote) {
  EXPECT_EQ(SpawnedAgentPid(config_), 0) << "no lock file yet";
  WriteLock("");
  EXPECT_EQ(SpawnedAgentPid(config_), 0) << "locked, pid not written yet";
  WriteLock("4242\n");
  EXPECT_EQ(SpawnedAgentPid(config_), 4242);
  WriteLock("4242");
  EXPECT_EQ(SpawnedAgentPid(config_), 4242);
}

TEST_F(SpawnedAgentPidTest, AnythingButAPidAboveOneIsNone) {
  for (const char* text : {"1\n", "0\n", "-5\n", "42x\n", "abc", "99999999999\n", " 42\n"}) {
    WriteLock(text);
    EXPECT_EQ(SpawnedAgentPid(config_), 0) << text;
  }
}

TEST_F(SpawnedAgentPidTest, ALinkInItsPlaceIsNotFollowed) {
  std::ofstream(dir_ + "/elsewhere") << "4242\n";
  ASSERT_EQ(symlink((dir_ + "/elsewhere").c_str(), LockPath().c_str()), 0);
  EXPECT_EQ(SpawnedAgentPid(config_), 0);
}

}  // namespace
}  // namespace collwatch
