// The failure semantics of the CPU NCCL backend, tested for real: what hangs on GPUs
// with real NCCL hangs here too (no error, no diagnosis), asleep rather than spinning;
// only a local ncclCommAbort ends the wait. Each scenario runs its ranks, checks after
// 2 s that the expected ones are still blocked (waitpid WNOHANG), then kills them.
// Threading: forked processes; the abort test uses a second thread in a rank.
#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "tests/cpu_nccl/rank_harness.h"

namespace collwatch::cpu_nccl_test {
namespace {

constexpr double kBlockedFor = 2.0;   // seconds a blocked rank must stay blocked
constexpr double kMaxCpu = 0.5;       // CPU seconds it may use meanwhile (it sleeps)
constexpr int kReturned = 3;          // exit code of a rank whose blocking call returned

class HangTest : public ShmDirTest {};

// Two ranks of a fresh communicator; each runs its own part after init.
std::unique_ptr<Ranks> TwoRanks(const std::function<int(int rank, ncclComm_t comm)>& part) {
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  return std::make_unique<Ranks>(2, [id, part](int rank) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, 2, id, rank));
    return part(rank, comm);
  });
}

void SleepFor(double seconds) {
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

TEST_F(HangTest, CollectiveSkippedByAPeerBlocksForever) {
  std::vector<float> buf(1024, 1.0f);
  // Job A: rank 1 never issues the all-reduce and leaves.
  auto a = TwoRanks([&](int rank, ncclComm_t comm) {
    if (rank == 0) {
      ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
      return kReturned;
    }
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
  // Job B: rank 1 skips the reduce-scatter and goes on to the next all-gather.
  auto b = TwoRanks([&](int rank, ncclComm_t comm) {
    std::vector<float> out(2048);
    if (rank == 0) {
      ncclReduceScatter(buf.data(), out.data(), 512, ncclFloat32, ncclSum, comm, nullptr);
      return kReturned;
    }
    ncclAllGather(buf.data(), out.data(), 1024, ncclFloat32, comm, nullptr);
    return kReturned;
  });
  SleepFor(kBlockedFor);
  EXPECT_TRUE(a->Running(0)) << "exit code " << a->ExitCode(0);
  EXPECT_LT(a->CpuSeconds(0), kMaxCpu) << "a blocked rank must sleep, not spin";
  EXPECT_FALSE(a->Running(1));
  EXPECT_EQ(a->ExitCode(1), 0);
  EXPECT_TRUE(b->Running(0)) << "exit code " << b->ExitCode(0);
  EXPECT_TRUE(b->Running(1)) << "exit code " << b->ExitCode(1);
  EXPECT_LT(b->CpuSeconds(1), kMaxCpu);
}

TEST_F(HangTest, MismatchedSignaturesBlockEveryRank) {
  std::vector<std::unique_ptr<Ranks>> jobs;
  const char* what[] = {"count", "dtype", "reduce op", "root", "collective"};
  // The same sequence position, issued differently by the two ranks.
  jobs.push_back(TwoRanks([](int rank, ncclComm_t comm) {
    std::vector<float> v(4096);
    ncclAllReduce(v.data(), v.data(), rank == 0 ? 1024 : 2048, ncclFloat32, ncclSum, comm, nullptr);
    return kReturned;
  }));
  jobs.push_back(TwoRanks([](int rank, ncclComm_t comm) {
    std::vector<float> v(4096);
    ncclAllReduce(v.data(), v.data(), 1024, rank == 0 ? ncclFloat32 : ncclBfloat16, ncclSum, comm,
                  nullptr);
    return kReturned;
  }));
  jobs.push_back(TwoRanks([](int rank, ncclComm_t comm) {
    std::vector<float> v(4096);
    ncclAllReduce(v.data(), v.data(), 1024, ncclFloat32, rank == 0 ? ncclSum : ncclMax, comm, nullptr);
    return kReturned;
  }));
  jobs.push_back(TwoRanks([](int rank, ncclComm_t comm) {
    std::vector<float> v(4096);
    ncclBroadcast(v.data(), v.data(), 1024, ncclFloat32, rank, comm, nullptr);  // root 0 vs 1
    return kReturned;
  }));
  jobs.push_back(TwoRanks([](int rank, ncclComm_t comm) {
    std::vector<float> v(4096);
    if (rank == 0) {
      ncclAllReduce(v.data(), v.data(), 1024, ncclFloat32, ncclSum, comm, nullptr);
    } else {
      ncclAllGather(v.data(), v.data(), 1024, ncclFloat32, comm, nullptr);
    }
    return kReturned;
  }));
  SleepFor(kBlockedFor);
  for (size_t j = 0; j < jobs.size(); ++j) {
    for (int r = 0; r < 2; ++r) {
      EXPECT_TRUE(jobs[j]->Running(r)) << what[j] << " mismatch, rank " << r << " exited with "
                                       << jobs[j]->ExitCode(r);
    }
  }
}

// COLLWATCH_CPU_NCCL_MISMATCH=complete (what `collwatch run --one-gpu` sets): every rank
// leaves a mismatched collective at once, and the collectives after it are right.
TEST_F(HangTest, MismatchedSignaturesCompleteWhenAskedAndWhatFollowsIsRight) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  Ranks ranks(2, [id](int rank) {
    setenv("COLLWATCH_CPU_NCCL_MISMATCH", "complete", 1);  // read when the communicator is made
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, 2, id, rank));
    std::vector<float> v(1 << 20, 1.0f);  // several chunks: the ranks' chunk counts differ
    RANK_NCCL(ncclAllReduce(v.data(), v.data(), rank == 0 ? 1024 : v.size(), ncclFloat32, ncclSum, comm, nullptr));
    std::vector<float> sum(4096, static_cast<float>(rank + 1));
    RANK_NCCL(ncclAllReduce(sum.data(), sum.data(), sum.size(), ncclFloat32, ncclSum, comm, nullptr));
    for (float x : sum) {
      if (x != 3.0f) return 10;
    }
    std::vector<float> out(8192);
    if (rank == 0) {
      RANK_NCCL(ncclAllGather(v.data(), out.data(), 4096, ncclFloat32, comm, nullptr));
    } else {
      RANK_NCCL(ncclReduceScatter(v.data(), out.data(), 1024, ncclFloat32, ncclSum, comm, nullptr));
    }
    std::vector<int32_t> from_root(3000, rank == 1 ? 42 : 0);
    RANK_NCCL(ncclBroadcast(from_root.data(), from_root.data(), from_root.size(), ncclInt32, 1, comm, nullptr));
    for (int32_t x : from_root) {
      if (x != 42) return 11;
    }
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
  ASSERT_TRUE(ranks.WaitAll(20.0)) << "a mismatched collective did not complete";
  for (int r = 0; r < 2; ++r) EXPECT_EQ(ranks.ExitCode(r), 0) << "rank " << r;
}

TEST_F(HangTest, InitWaitsForeverForAMissingRank) {
  expect_clean_shm_ = false;  // init never completed, so the segment file stays
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  Ranks ranks(2, [&](int rank) {  // of 3
    ncclComm_t comm;
    ncclCommInitRank(&comm, 3, id, rank);
    return kReturned;
  });
  SleepFor(kBlockedFor);
  EXPECT_TRUE(ranks.Running(0));
  EXPECT_TRUE(ranks.Running(1));
  EXPECT_LT(ranks.CpuSeconds(0), kMaxCpu);
  EXPECT_EQ(ShmFiles().size(), 1u);
}

TEST_F(HangTest, PointToPointWithoutAPartner) {
  // A receive with no send; a send larger than the ring with no receive; a receive of a
  // different size than was sent: blocked. A small unmatched send completes (it is
  // buffered, as NCCL's is).
  auto recv_alone = TwoRanks([](int rank, ncclComm_t comm) {
    std::vector<float> v(100);
    if (rank == 1) return 0;
    ncclRecv(v.data(), v.size(), ncclFloat32, 1, comm, nullptr);
    return kReturned;
  });
  auto big_send_alone = TwoRanks([](int rank, ncclComm_t comm) {
    std::vector<float> v(1 << 20);
    if (rank == 1) return 0;
    ncclSend(v.data(), v.size(), ncclFloat32, 1, comm, nullptr);
    return kReturned;
  });
  auto size_mismatch = TwoRanks([](int rank, ncclComm_t comm) {
    std::vector<float> v(200);
    if (rank == 0) {
      RANK_NCCL(ncclSend(v.data(), 100, ncclFloat32, 1, comm, nullptr));
      return 0;
    }
    ncclRecv(v.data(), 200, ncclFloat32, 0, comm, nullptr);
    return kReturned;
  });
  auto small_send_alone = TwoRanks([](int rank, ncclComm_t comm) {
    std::vector<float> v(100);
    if (rank == 0) RANK_NCCL(ncclSend(v.data(), v.size(), ncclFloat32, 1, comm, nullptr));
    return 0;
  });
  SleepFor(kBlockedFor);
  EXPECT_TRUE(recv_alone->Running(0));
  EXPECT_TRUE(big_send_alone->Running(0));
  EXPECT_TRUE(size_mismatch->Running(1));
  EXPECT_FALSE(size_mismatch->Running(0));
  EXPECT_EQ(size_mismatch->ExitCode(0), 0);
  EXPECT_FALSE(small_send_alone->Running(0));
  EXPECT_EQ(small_send_alone->ExitCode(0), 0);
}

double CpuNow() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

TEST_F(HangTest, LateRankIsAwaitedAsleepThenCompletes) {
  // A rank late to its collective (the stall that collwatch reports as NOT_JOINED): the
  // others wait without burning CPU and finish as soon as it arrives.
  auto job = TwoRanks([](int rank, ncclComm_t comm) {
    std::vector<float> v(100000, static_cast<float>(rank + 1));
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    const double cpu = CpuNow();
    const auto start = std::chrono::steady_clock::now();
    RANK_NCCL(ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, comm, nullptr));
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    RANK_EXPECT(v[0] == 3.0f && v[99999] == 3.0f);
    if (rank == 0) {
      RANK_EXPECT(wall > 0.8);
      RANK_EXPECT(CpuNow() - cpu < 0.2);
    }
    return 0;
  });
  EXPECT_TRUE(job->WaitAll(kRankTimeout));
  EXPECT_EQ(job->ExitCode(0), 0);
  EXPECT_EQ(job->ExitCode(1), 0);
}

// Rank body: blocks in `op`, while a second thread aborts the communicator after 300 ms;
// exits 0 if the blocked call then returned an error.
int BlockThenAbort(ncclComm_t comm, const std::function<ncclResult_t()>& op) {
  std::thread aborter([comm] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ncclCommAbort(comm);
  });
  const auto start = std::chrono::steady_clock::now();
  const ncclResult_t result = op();
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  aborter.join();
  RANK_EXPECT(waited >= 0.25);  // it really was blocked until the abort
  RANK_EXPECT(result != ncclSuccess && result != ncclInProgress);
  return 0;
}

TEST_F(HangTest, AbortFromAnotherThreadUnblocks) {
  std::vector<float> buf(1024, 1.0f);
  // A peer that never joins.
  auto lonely = TwoRanks([&](int rank, ncclComm_t comm) {
    if (rank == 1) return 0;
    return BlockThenAbort(comm, [&] {
      return ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
    });
  });
  // A signature mismatch (both blocked for good): both abort.
  auto mismatch = TwoRanks([&](int rank, ncclComm_t comm) {
    return BlockThenAbort(comm, [&] {
      return ncclAllReduce(buf.data(), buf.data(), rank == 0 ? 10 : 20, ncclFloat32, ncclSum,
                           comm, nullptr);
    });
  });
  // A grouped receive that no one serves.
  auto grouped = TwoRanks([&](int rank, ncclComm_t comm) {
    if (rank == 1) return 0;
    return BlockThenAbort(comm, [&] {
      ncclGroupStart();
      ncclRecv(buf.data(), 10, ncclFloat32, 1, comm, nullptr);
      ncclRecv(buf.data() + 10, 10, ncclFloat32, 0, comm, nullptr);
      return ncclGroupEnd();
    });
  });
  EXPECT_TRUE(lonely->WaitAll(10.0));
  EXPECT_TRUE(mismatch->WaitAll(10.0));
  EXPECT_TRUE(grouped->WaitAll(10.0));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(lonely->ExitCode(r), 0) << r;
    EXPECT_EQ(mismatch->ExitCode(r), 0) << r;
    EXPECT_EQ(grouped->ExitCode(r), 0) << r;
  }
}

}  // namespace
}  // namespace collwatch::cpu_nccl_test
