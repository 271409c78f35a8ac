// Point-to-point and group semantics of the CPU NCCL backend: grouped ring exchanges of
// every size (they deadlock unless grouped operations progress together), all-pairs
// exchanges, eager small sends, mixed groups, nested groups, ncclCommInitAll and grouped
// ncclCommInitRank driven by one thread, ncclGroupSimulateEnd. Threading: forked processes.
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "tests/cpu_nccl/rank_harness.h"
#include "tests/cpu_nccl/reference.h"

namespace collwatch::cpu_nccl_test {
namespace {

using Bytes = std::vector<uint8_t>;

std::vector<float> Pattern(int rank, int salt, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>(rank * 1000 + salt) + static_cast<float>(i % 977);
  return v;
}

class GroupTest : public ShmDirTest {};
class RingTest : public ShmDirTest, public ::testing::WithParamInterface<int> {};

TEST_P(RingTest, GroupedRingExchangeEverySize) {
  const int n = GetParam();
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ExpectRanksSucceed(n, kRankTimeout, [&](int rank) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const int next = (rank + 1) % n;
    const int prev = (rank + n - 1) % n;
    int salt = 0;
    // 0 bytes, tiny, odd, and far beyond a channel ring (several wraps).
    for (size_t count : {size_t{0}, size_t{1}, size_t{4099}, size_t{700001}}) {
      ++salt;
      const std::vector<float> out = Pattern(rank, salt, count);
      std::vector<float> in(count, -1.0f);
      RANK_NCCL(ncclGroupStart());
      RANK_NCCL(ncclSend(out.data(), count, ncclFloat32, next, comm, nullptr));
      RANK_NCCL(ncclRecv(in.data(), count, ncclFloat32, prev, comm, nullptr));
      RANK_NCCL(ncclGroupEnd());
      RANK_EXPECT(in == Pattern(prev, salt, count));
      // Both directions at once, receives posted first.
      std::vector<float> from_prev(count, -1.0f), from_next(count, -1.0f);
      RANK_NCCL(ncclGroupStart());
      RANK_NCCL(ncclRecv(from_prev.data(), count, ncclFloat32, prev, comm, nullptr));
      RANK_NCCL(ncclRecv(from_next.data(), count, ncclFloat32, next, comm, nullptr));
      RANK_NCCL(ncclSend(out.data(), count, ncclFloat32, next, comm, nullptr));
      RANK_NCCL(ncclSend(out.data(), count, ncclFloat32, prev, comm, nullptr));
      RANK_NCCL(ncclGroupEnd());
      if (n > 2) {
        RANK_EXPECT(from_prev == Pattern(prev, salt, count));
        RANK_EXPECT(from_next == Pattern(next, salt, count));
      } else {  // prev == next: the two messages from it arrive in the order sent
        RANK_EXPECT(from_prev == Pattern(prev, salt, count));
        RANK_EXPECT(from_next == Pattern(prev, salt, count));
      }
    }
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST_P(RingTest, GroupedAllPairsIncludingSelf) {
  const int n = GetParam();
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ExpectRanksSucceed(n, kRankTimeout, [&](int rank) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const size_t count = 30011;  // n * 120 KB in flight at once
    std::vector<std::vector<float>> in(n, std::vector<float>(count, -1.0f));
    std::vector<std::vector<float>> out;
    for (int p = 0; p < n; ++p) out.push_back(Pattern(rank, 100 + p, count));
    RANK_NCCL(ncclGroupStart());
    for (int p = 0; p < n; ++p) {
      RANK_NCCL(ncclSend(out[p].data(), count, ncclFloat32, p, comm, nullptr));
      RANK_NCCL(ncclRecv(in[p].data(), count, ncclFloat32, p, comm, nullptr));
    }
    RANK_NCCL(ncclGroupEnd());
    for (int p = 0; p < n; ++p) RANK_EXPECT(in[p] == Pattern(p, 100 + rank, count));
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, RingTest, ::testing::Values(2, 4, 8),
                         [](const ::testing::TestParamInfo<int>& param_info) {
                           return std::to_string(param_info.param) + "ranks";
                         });

TEST_F(GroupTest, SmallSendsCompleteBeforeTheReceiverArrivesAndKeepOrder) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ExpectRanksSucceed(2, kRankTimeout, [&](int rank) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, 2, id, rank));
    const size_t sizes[] = {5, 0, 1000, 77};
    if (rank == 0) {
      // Ungrouped and unmatched yet: each fits the ring, so each returns (eager).
      for (size_t k = 0; k < 4; ++k) {
        const std::vector<float> v = Pattern(0, static_cast<int>(k), sizes[k]);
        RANK_NCCL(ncclSend(v.data(), sizes[k], ncclFloat32, 1, comm, nullptr));
      }
      int32_t done = 1;
      RANK_NCCL(ncclSend(&done, 1, ncclInt32, 1, comm, nullptr));
    } else {
      for (size_t k = 0; k < 4; ++k) {
        std::vector<float> v(sizes[k], -1.0f);
        RANK_NCCL(ncclRecv(v.data(), sizes[k], ncclFloat32, 0, comm, nullptr));
        RANK_EXPECT(v == Pattern(0, static_cast<int>(k), sizes[k]));
      }
      int32_t done = 0;
      RANK_NCCL(ncclRecv(&done, 1, ncclInt32, 0, comm, nullptr));
      RANK_EXPECT(done == 1);
    }
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST_F(GroupTest, MixedGroupOfCollectivesAndPointToPoint) {
  const int n = 4;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ExpectRanksSucceed(n, kRankTimeout, [&](int rank) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const size_t count = 5003;
    std::vector<Bytes> ar_in;
    for (int r = 0; r < n; ++r) ar_in.push_back(MakeInput(ncclFloat32, r, 1, count));
    const Bytes ar_want = ReferenceReduce(ncclFloat32, ncclSum, ar_in, 0, count);
    Bytes ar_out(ar_want.size());
    std::vector<float> ag_out(count * n), p2p_in(count), bc(count, 0.0f);
    const std::vector<float> mine = Pattern(rank, 2, count);
    if (rank == 2) bc = Pattern(2, 3, count);
    RANK_NCCL(ncclGroupStart());
    RANK_NCCL(ncclAllReduce(ar_in[rank].data(), ar_out.data(), count, ncclFloat32, ncclSum, comm, nullptr));
    RANK_NCCL(ncclSend(mine.data(), count, ncclFloat32, (rank + 1) % n, comm, nullptr));
    RANK_NCCL(ncclAllGather(mine.data(), ag_out.data(), count, ncclFloat32, comm, nullptr));
    RANK_NCCL(ncclRecv(p2p_in.data(), count, ncclFloat32, (rank + n - 1) % n, comm, nullptr));
    RANK_NCCL(ncclBroadcast(bc.data(), bc.data(), count, ncclFloat32, 2, comm, nullptr));
    RANK_NCCL(ncclGroupEnd());
    RANK_EXPECT(ar_out == ar_want);
    RANK_EXPECT(p2p_in == Pattern((rank + n - 1) % n, 2, count));
    for (int r = 0; r < n; ++r) {
      RANK_EXPECT(std::equal(ag_out.begin() + r * count, ag_out.begin() + (r + 1) * count,
                             Pattern(r, 2, count).begin()));
    }
    RANK_EXPECT(bc == Pattern(2, 3, count));
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST_F(GroupTest, NestedGroupsRunAtTheOutermostEnd) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ExpectRanksSucceed(2, kRankTimeout, [&](int rank) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, 2, id, rank));
    float in = static_cast<float>(rank + 1), out = -1.0f;
    RANK_NCCL(ncclGroupStart());
    RANK_NCCL(ncclGroupStart());
    RANK_NCCL(ncclAllReduce(&in, &out, 1, ncclFloat32, ncclSum, comm, nullptr));
    RANK_NCCL(ncclGroupEnd());
    RANK_EXPECT(out == -1.0f);  // deferred: nothing ran at the inner end
    RANK_NCCL(ncclGroupEnd());
    RANK_EXPECT(out == 3.0f);
    RANK_EXPECT(ncclGroupEnd() == ncclInvalidUsage);  // no group open
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST_F(GroupTest, SimulatedGroupRunsNothing) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ExpectRanksSucceed(2, kRankTimeout, [&](int rank) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, 2, id, rank));
    // Only rank 0 simulates a collective (rank 1 never joins it): it must neither block
    // nor use up a sequence number, or the real all-reduce below would not match.
    float a = 1.0f, b = -1.0f;
    if (rank == 0) {
      ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
      RANK_NCCL(ncclGroupStart());
      RANK_NCCL(ncclAllGather(&a, &b, 1, ncclFloat32, comm, nullptr));
      RANK_NCCL(ncclGroupSimulateEnd(&sim));
      RANK_EXPECT(sim.estimatedTime > 0.0f);
      RANK_EXPECT(b == -1.0f);
      ncclSimInfo_t bad = NCCL_SIM_INFO_INITIALIZER;
      bad.magic = 0;
      RANK_NCCL(ncclGroupStart());
      RANK_EXPECT(ncclGroupSimulateEnd(&bad) == ncclInvalidArgument);
      RANK_NCCL(ncclGroupEnd());
    }
    float x = static_cast<float>(rank + 1), y = 0.0f;
    RANK_NCCL(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, nullptr));
    RANK_EXPECT(y == 3.0f);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST_F(GroupTest, CommInitAllWithGroupedCollectivesInOneThread) {
  ExpectRanksSucceed(1, kRankTimeout, [&](int) {
    const int ndev = 4;
    ncclComm_t comms[ndev];
    RANK_NCCL(ncclCommInitAll(comms, ndev, nullptr));
    for (int i = 0; i < ndev; ++i) {
      int count = 0, rank = -1;
      RANK_NCCL(ncclCommCount(comms[i], &count));
      RANK_NCCL(ncclCommUserRank(comms[i], &rank));
      RANK_EXPECT(count == ndev && rank == i);
    }
    // Each collective waits for the others: only concurrent progress completes the group.
    const size_t count = 400003;  // several chunks
    std::vector<Bytes> in;
    for (int r = 0; r < ndev; ++r) in.push_back(MakeInput(ncclFloat32, r, 9, count));
    const Bytes want = ReferenceReduce(ncclFloat32, ncclSum, in, 0, count);
    std::vector<Bytes> out(ndev, Bytes(want.size()));
    std::vector<std::vector<float>> gathered(ndev, std::vector<float>(ndev * 3));
    const float pieces[ndev][3] = {{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9, 10, 11}};
    RANK_NCCL(ncclGroupStart());
    for (int i = 0; i < ndev; ++i) {
      RANK_NCCL(ncclAllReduce(in[i].data(), out[i].data(), count, ncclFloat32, ncclSum, comms[i], nullptr));
      RANK_NCCL(ncclAllGather(pieces[i], gathered[i].data(), 3, ncclFloat32, comms[i], nullptr));
    }
    RANK_NCCL(ncclGroupEnd());
    std::vector<float> all(ndev * 3);
    std::iota(all.begin(), all.end(), 0.0f);
    for (int i = 0; i < ndev; ++i) {
      RANK_EXPECT(out[i] == want);
      RANK_EXPECT(gathered[i] == all);
    }
    // A ring of sends between the communicators of this one thread.
    std::vector<std::vector<float>> recv(ndev, std::vector<float>(1000));
    std::vector<std::vector<float>> send;
    for (int i = 0; i < ndev; ++i) send.push_back(Pattern(i, 4, 1000));
    RANK_NCCL(ncclGroupStart());
    for (int i = 0; i < ndev; ++i) {
      RANK_NCCL(ncclSend(send[i].data(), 1000, ncclFloat32, (i + 1) % ndev, comms[i], nullptr));
      RANK_NCCL(ncclRecv(recv[i].data(), 1000, ncclFloat32, (i + ndev - 1) % ndev, comms[i], nullptr));
    }
    RANK_NCCL(ncclGroupEnd());
    for (int i = 0; i < ndev; ++i) RANK_EXPECT(recv[i] == send[(i + ndev - 1) % ndev]);
    for (int i = 0; i < ndev; ++i) RANK_NCCL(ncclCommDestroy(comms[i]));
    return 0;
  });
}

TEST_F(GroupTest, ThreadPerRankInOneProcess) {
  ExpectRanksSucceed(1, kRankTimeout, [&](int) {
    const int ndev = 4;
    ncclComm_t comms[ndev];
    RANK_NCCL(ncclCommInitAll(comms, ndev, nullptr));
    // One thread per rank, as with one GPU per thread: they wake each other via futexes.
    std::vector<int> failures(ndev, 0);
    std::vector<std::thread> threads;
    for (int i = 0; i < ndev; ++i) {
      threads.emplace_back([&, i] {
        for (int it = 0; it < 200; ++it) {
          std::vector<int32_t> v(it % 2 ? 3 : 70000, i + it);
          if (ncclAllReduce(v.data(), v.data(), v.size(), ncclInt32, ncclSum, comms[i], nullptr) !=
                  ncclSuccess ||
              v.back() != 6 + 4 * it) {
            ++failures[i];
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (int i = 0; i < ndev; ++i) RANK_EXPECT(failures[i] == 0);
    for (int i = 0; i < ndev; ++i) RANK_NCCL(ncclCommDestroy(comms[i]));
    return 0;
  });
}

TEST_F(GroupTest, GroupedInitRankOfSeveralRanksInOneThread) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  // Two processes, each creating two ranks of one 4-rank communicator in one group.
  ExpectRanksSucceed(2, kRankTimeout, [&](int proc) {
    ncclComm_t comms[2];
    RANK_NCCL(ncclGroupStart());
    for (int k = 0; k < 2; ++k) RANK_NCCL(ncclCommInitRank(&comms[k], 4, id, 2 * proc + k));
    ncclResult_t state = ncclSuccess;
    RANK_NCCL(ncclCommGetAsyncError(comms[0], &state));
    RANK_EXPECT(state == ncclInProgress);  // deferred to the group's end
    RANK_NCCL(ncclGroupEnd());
    RANK_NCCL(ncclCommGetAsyncError(comms[0], &state));
    RANK_EXPECT(state == ncclSuccess);
    int32_t in[2] = {2 * proc + 1, 2 * proc + 2}, out[2] = {0, 0};
    RANK_NCCL(ncclGroupStart());
    for (int k = 0; k < 2; ++k) RANK_NCCL(ncclAllReduce(&in[k], &out[k], 1, ncclInt32, ncclSum, comms[k], nullptr));
    RANK_NCCL(ncclGroupEnd());
    RANK_EXPECT(out[0] == 10 && out[1] == 10);
    for (int k = 0; k < 2; ++k) RANK_NCCL(ncclCommDestroy(comms[k]));
    return 0;
  });
}

TEST_F(GroupTest, ArgumentErrorInsideAGroupFailsTheGroup) {
  ExpectRanksSucceed(1, kRankTimeout, [&](int) {
    ncclUniqueId id;
    RANK_NCCL(ncclGetUniqueId(&id));
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, 1, id, 0));
    float x = 1.0f, y = 0.0f;
    RANK_NCCL(ncclGroupStart());
    RANK_NCCL(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, nullptr));
    RANK_EXPECT(ncclSend(&x, 1, ncclFloat32, 1, comm, nullptr) == ncclInvalidArgument);
    RANK_EXPECT(ncclGroupEnd() == ncclInvalidArgument);
    RANK_EXPECT(y == 0.0f);  // the group was dropped
    RANK_NCCL(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, nullptr));
    RANK_EXPECT(y == 1.0f);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

}  // namespace
}  // namespace collwatch::cpu_nccl_test
