// The CPU NCCL backend where the trainer needs it: 8 ranks all-reducing 4 M floats (16 MB
// each) get the exact sums, and the time per all-reduce is printed. The time is a figure,
// never a pass/fail limit: a test does not time the machine it runs on.
// Threading: forked processes.
#include <gtest/gtest.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "tests/cpu_nccl/rank_harness.h"

namespace collwatch::cpu_nccl_test {
namespace {

class PerfTest : public ShmDirTest {};

TEST_F(PerfTest, EightRanksAllReduceFourMegaFloats) {
  constexpr int kRanks = 8;
  constexpr size_t kCount = 4u << 20;
  constexpr int kIters = kSanitized ? 1 : 3;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ExpectRanksSucceed(kRanks, kRankTimeout, [&](int rank) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, kRanks, id, rank));
    std::vector<float> in(kCount), out(kCount);
    for (size_t i = 0; i < kCount; ++i) in[i] = static_cast<float>((i + rank) % 16);
    // Warm-up: first touch of the staging pages.
    RANK_NCCL(ncclAllReduce(in.data(), out.data(), kCount, ncclFloat32, ncclSum, comm, nullptr));
    const auto start = std::chrono::steady_clock::now();
    for (int it = 0; it < kIters; ++it) {
      RANK_NCCL(ncclAllReduce(in.data(), out.data(), kCount, ncclFloat32, ncclSum, comm, nullptr));
    }
    const double each =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kIters;
    for (size_t i = 0; i < kCount; i += 4099) {
      float want = 0;
      for (int r = 0; r < kRanks; ++r) want += static_cast<float>((i + r) % 16);
      RANK_EXPECT(out[i] == want);
    }
    if (rank == 0) {
      std::printf("8-rank all-reduce of 4 M floats: %.1f ms\n", each * 1e3);
    }
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

}  // namespace
}  // namespace collwatch::cpu_nccl_test
