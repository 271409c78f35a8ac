// JobProcessTree on a real process tree: a shell (no RANK) starting rank 0 and rank 1,
// rank 1 with a worker of its own that inherits its RANK. The walk finds the two ranks
// and not the worker, sees a stopped rank stopped, and reports a rank that left the
// tree as gone, once.
#include "cli/job_processes.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <thread>

#include "gtest/gtest.h"
#include "ring/clocks.h"

namespace collwatch::job_processes_test {
namespace {

pid_t ParentOf(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t after_name = line.rfind(')');
  return after_name == std::string::npos ? -1 : std::atoi(line.c_str() + after_name + 4);
}

class JobProcessTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fork();
    ASSERT_GE(root_, 0);
    if (root_ == 0) {
      setpgid(0, 0);
      char* const environment[] = {const_cast<char*>("PATH=/usr/bin:/bin"), nullptr};
      execle("/bin/sh", "sh", "-c",
             "RANK=0 WORLD_SIZE=2 sleep 30 & RANK=1 WORLD_SIZE=2 sh -c 'sleep 30 & sleep 30' & wait",
             static_cast<char*>(nullptr), environment);
      _exit(127);
    }
    setpgid(root_, root_);
  }
  void TearDown() override {
    kill(-root_, SIGKILL);
    waitpid(root_, nullptr, 0);
  }

  // Walks until `want` rank processes are found (the shells take a moment), up to 5 s.
  std::map<int32_t, RankProcess> WalkUntil(JobProcessTree& tree, size_t want) {
    std::map<int32_t, RankProcess> ranks;
    for (int attempt = 0; attempt < 100 && ranks.size() != want; ++attempt) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      ranks.clear();
      for (const RankProcess& rank : tree.Walk(static_cast<int64_t>(RealtimeNs()))) ranks[rank.info.global_rank] = rank;
    }
    return ranks;
  }

  pid_t root_ = -1;
};

TEST_F(JobProcessTreeTest, FindsEachRankOnceStoppedAndGone) {
  JobProcessTree tree(root_);
  std::map<int32_t, RankProcess> ranks = WalkUntil(tree, 2);
  ASSERT_EQ(ranks.size(), 2u);
  for (const auto& [rank, process] : ranks) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(process.info.world_size, 2);
    EXPECT_EQ(ParentOf(process.info.pid), root_) << "the topmost process of the rank, not its worker";
    EXPECT_FALSE(process.info.host.empty());
    EXPECT_NE(process.sample.sampled_ns, 0);
  }

  const pid_t stopped = ranks.at(1).info.pid;
  ASSERT_EQ(kill(stopped, SIGSTOP), 0);
  const pid_t killed = ranks.at(0).info.pid;
  ASSERT_EQ(kill(killed, SIGKILL), 0);  // the shell's `wait` reaps it
  bool saw_gone = false;
  for (int attempt = 0; attempt < 100 && !saw_gone; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (const RankProcess& rank : tree.Walk(static_cast<int64_t>(RealtimeNs()))) {
      if (rank.info.pid == killed && rank.sample.state == ProcessState::kGone) saw_gone = true;
    }
  }
  EXPECT_TRUE(saw_gone);
  const std::vector<RankProcess> after = tree.Walk(static_cast<int64_t>(RealtimeNs()));
  ASSERT_EQ(after.size(), 1u) << "the gone rank is said once";
  EXPECT_EQ(after[0].info.pid, stopped);
  EXPECT_EQ(after[0].sample.state, ProcessState::kStopped);
  kill(stopped, SIGCONT);
}

// srun's variables name ranks where RANK is unset (srun python train.py); a launcher that
// srun started and that starts the ranks itself (torchrun) is no rank, though it has them.
TEST(JobProcessTreeLaunchersTest, SrunRanksCountAndATorchrunUnderSrunDoesNot) {
  const pid_t root = fork();
  ASSERT_GE(root, 0);
  if (root == 0) {
    setpgid(0, 0);
    char* const environment[] = {const_cast<char*>("PATH=/usr/bin:/bin"), nullptr};
    execle("/bin/bash", "bash", "-c",
           "SLURM_PROCID=0 SLURM_NTASKS=2 sleep 30 & "
           "SLURM_PROCID=1 SLURM_NTASKS=2 bash -c 'exec -a torchrun sh -c \"RANK=2 WORLD_SIZE=4 sleep 30 & "
           "RANK=3 WORLD_SIZE=4 sleep 30 & wait\"' & wait",
           static_cast<char*>(nullptr), environment);
    _exit(127);
  }
  setpgid(root, root);
  JobProcessTree tree(root);
  std::map<int32_t, RankProcess> ranks;
  // srun's ranks are believed from their second look on.
  for (int attempt = 0; attempt < 100 && ranks.size() < 3; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (const RankProcess& rank : tree.Walk(static_cast<int64_t>(RealtimeNs()))) {
      if (rank.sample.state != ProcessState::kGone) ranks[rank.info.global_rank] = rank;
    }
  }
  kill(-root, SIGKILL);
  waitpid(root, nullptr, 0);
  ASSERT_EQ(ranks.size(), 3u);
  EXPECT_EQ(ranks.count(1), 0u) << "torchrun's SLURM_PROCID is its node's task, not a rank";
  EXPECT_EQ(ranks.at(0).info.world_size, 2) << "SLURM_NTASKS";
  EXPECT_EQ(ranks.at(2).info.world_size, 4);
  EXPECT_EQ(ranks.at(3).info.world_size, 4);
}

}  // namespace
}  // namespace collwatch::job_processes_test
