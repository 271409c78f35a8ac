// Communicator management and the rest of the API surface of the CPU NCCL backend:
// CommSplit (colors, keys, NOCOLOR, nested), CommShrink, PreMulSum ops, configs, queries,
// NCCL's argument errors, exported symbols, no threads left, independent jobs.
// Threading: forked processes (one test opens the library with dlopen in-process).
#include <dirent.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/cpu_nccl/rank_harness.h"
#include "tests/cpu_nccl/reference.h"

namespace collwatch::cpu_nccl_test {
namespace {

using Bytes = std::vector<uint8_t>;

class CommTest : public ShmDirTest {};

int CountThreads() {
  int n = 0;
  if (DIR* dir = opendir("/proc/self/task")) {
    while (const dirent* e = readdir(dir)) n += e->d_name[0] != '.';
    closedir(dir);
  }
  return n;
}

TEST_F(CommTest, SplitByColorKeyAndNoColor) {
  const int n = 8;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ExpectRanksSucceed(n, kRankTimeout, [&](int rank) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    // Rank 7 opts out; colors 0 = {0,2,4,6}, 1 = {1,3,5}; key n - rank reverses the order.
    const int color = rank == 7 ? NCCL_SPLIT_NOCOLOR : rank % 2;
    ncclComm_t child = reinterpret_cast<ncclComm_t>(0x1);
    RANK_NCCL(ncclCommSplit(comm, color, n - rank, &child, nullptr));
    if (rank == 7) {
      RANK_EXPECT(child == nullptr);
    } else {
      const std::vector<int> members = color == 0 ? std::vector<int>{6, 4, 2, 0}
                                                  : std::vector<int>{5, 3, 1};
      int count = 0, child_rank = -1;
      RANK_NCCL(ncclCommCount(child, &count));
      RANK_NCCL(ncclCommUserRank(child, &child_rank));
      RANK_EXPECT(count == static_cast<int>(members.size()));
      RANK_EXPECT(members[child_rank] == rank);
      // Gathering the old ranks shows the order; a reduction the membership.
      std::vector<int32_t> order(count, -1);
      const int32_t me = rank;
      RANK_NCCL(ncclAllGather(&me, order.data(), 1, ncclInt32, child, nullptr));
      for (int i = 0; i < count; ++i) RANK_EXPECT(order[i] == members[i]);
      // Split the child again (every member the same color): same members, same order.
      ncclComm_t grandchild = nullptr;
      RANK_NCCL(ncclCommSplit(child, 3, 0, &grandchild, nullptr));
      int32_t sum = 0;
      RANK_NCCL(ncclAllReduce(&me, &sum, 1, ncclInt32, ncclSum, grandchild, nullptr));
      RANK_EXPECT(sum == (color == 0 ? 12 : 9));
      RANK_NCCL(ncclCommDestroy(grandchild));
      RANK_NCCL(ncclCommDestroy(child));
    }
    // The parent still works, and a second split (in a group) makes a new communicator.
    int32_t one = 1, total = 0;
    RANK_NCCL(ncclAllReduce(&one, &total, 1, ncclInt32, ncclSum, comm, nullptr));
    RANK_EXPECT(total == n);
    ncclComm_t halves = nullptr;
    RANK_NCCL(ncclGroupStart());
    RANK_NCCL(ncclCommSplit(comm, rank / 4, rank, &halves, nullptr));
    RANK_NCCL(ncclGroupEnd());
    int32_t half_sum = 0;
    RANK_NCCL(ncclAllReduce(&one, &half_sum, 1, ncclInt32, ncclSum, halves, nullptr));
    RANK_EXPECT(half_sum == 4);
    RANK_NCCL(ncclCommDestroy(halves));
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST_F(CommTest, ShrinkWithoutTheExcludedRank) {
  const int n = 4;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ExpectRanksSucceed(n, kRankTimeout, [&](int rank) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    int excluded[] = {1, 1};  // duplicates are harmless
    ncclComm_t small = nullptr;
    if (rank == 1) {
      // The excluded rank does not take part; asking anyway is an argument error.
      RANK_EXPECT(ncclCommShrink(comm, excluded, 2, &small, nullptr, NCCL_SHRINK_DEFAULT) ==
                  ncclInvalidArgument);
      RANK_NCCL(ncclCommDestroy(comm));
      return 0;
    }
    RANK_NCCL(ncclCommShrink(comm, excluded, 2, &small, nullptr, NCCL_SHRINK_DEFAULT));
    int count = 0, new_rank = -1;
    RANK_NCCL(ncclCommCount(small, &count));
    RANK_NCCL(ncclCommUserRank(small, &new_rank));
    RANK_EXPECT(count == 3);
    RANK_EXPECT(new_rank == (rank == 0 ? 0 : rank - 1));
    const int32_t me = rank;
    std::vector<int32_t> order(3, -1);
    RANK_NCCL(ncclAllGather(&me, order.data(), 1, ncclInt32, small, nullptr));
    RANK_EXPECT((order == std::vector<int32_t>{0, 2, 3}));
    RANK_NCCL(ncclCommDestroy(small));
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST_F(CommTest, PreMulSumHostAndDeviceScalars) {
  const int n = 4;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ExpectRanksSucceed(n, kRankTimeout, [&](int rank) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    const ncclRedOp_t kPreMul = static_cast<ncclRedOp_t>(ncclNumOps);  // reference marker
    const size_t count = 3001;
    int salt = 0;
    for (ncclDataType_t type : {ncclFloat32, ncclBfloat16, ncclFloat16, ncclInt32, ncclFloat64}) {
      // Host-immediate scalar: rank + 1, copied when the op is created.
      std::vector<uint64_t> scalars;
      for (int r = 0; r < n; ++r) scalars.push_back(EncodeScalar(type, r + 1));
      uint64_t mine = scalars[rank];
      ncclRedOp_t op;
      RANK_NCCL(ncclRedOpCreatePreMulSum(&op, &mine, type, ncclScalarHostImmediate, comm));
      mine = EncodeScalar(type, 100);  // too late: already copied
      std::vector<Bytes> in;
      for (int r = 0; r < n; ++r) in.push_back(MakeInput(type, r, ++salt, count));
      Bytes want = ReferenceReduce(type, kPreMul, in, 0, count, scalars);
      Bytes out(want.size());
      RANK_NCCL(ncclAllReduce(in[rank].data(), out.data(), count, type, op, comm, nullptr));
      RANK_EXPECT(out == want);
      // Reduce-scatter with the same op: rank r gets block r.
      in.clear();
      for (int r = 0; r < n; ++r) in.push_back(MakeInput(type, r, ++salt, count * n));
      want = ReferenceReduce(type, kPreMul, in, rank * count, count, scalars);
      RANK_NCCL(ncclReduceScatter(in[rank].data(), out.data(), count, type, op, comm, nullptr));
      RANK_EXPECT(out == want);
      RANK_NCCL(ncclRedOpDestroy(op, comm));
      // A destroyed op is unknown to the communicator.
      RANK_EXPECT(ncclAllReduce(in[rank].data(), out.data(), count, type, op, comm, nullptr) ==
                  ncclInvalidArgument);
    }
    // Device-resident scalar: read through the pointer when the operation runs.
    float scalar = 100.0f;
    ncclRedOp_t op;
    RANK_NCCL(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarDevice, comm));
    std::vector<uint64_t> scalars;
    for (int r = 0; r < n; ++r) scalars.push_back(EncodeScalar(ncclFloat32, 0.5 + r));
    scalar = 0.5f + static_cast<float>(rank);
    std::vector<Bytes> in;
    for (int r = 0; r < n; ++r) in.push_back(MakeInput(ncclFloat32, r, ++salt, count));
    const Bytes want = ReferenceReduce(ncclFloat32, kPreMul, in, 0, count, scalars);
    Bytes out(want.size());
    RANK_NCCL(ncclAllReduce(in[rank].data(), out.data(), count, ncclFloat32, op, comm, nullptr));
    RANK_EXPECT(out == want);
    // An op made for float32 does not apply to float64.
    double d = 1.0, e = 0.0;
    RANK_EXPECT(ncclAllReduce(&d, &e, 1, ncclFloat64, op, comm, nullptr) == ncclInvalidArgument);
    RANK_NCCL(ncclRedOpDestroy(op, comm));
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST_F(CommTest, ConfigsScalableIdsAndQueries) {
  const int n = 2;
  ncclUniqueId ids[2];
  ASSERT_EQ(ncclGetUniqueId(&ids[0]), ncclSuccess);
  ASSERT_EQ(ncclGetUniqueId(&ids[1]), ncclSuccess);
  ASSERT_NE(std::memcmp(&ids[0], &ids[1], sizeof ids[0]), 0);  // random ids
  ExpectRanksSucceed(n, kRankTimeout, [&](int rank) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // non-blocking: may complete at once and report success
    ncclComm_t a;
    RANK_NCCL(ncclCommInitRankConfig(&a, n, ids[0], rank, &config));
    ncclResult_t async = ncclInProgress;
    RANK_NCCL(ncclCommGetAsyncError(a, &async));
    RANK_EXPECT(async == ncclSuccess);
    ncclComm_t b;
    RANK_NCCL(ncclCommInitRankScalable(&b, n, rank, 2, ids, nullptr));
    int count = 0, user_rank = -1, device = -1, version = 0;
    RANK_NCCL(ncclCommCount(b, &count));
    RANK_NCCL(ncclCommUserRank(b, &user_rank));
    RANK_NCCL(ncclCommCuDevice(b, &device));
    RANK_NCCL(ncclGetVersion(&version));
    RANK_EXPECT(count == n && user_rank == rank && device == 0 && version == 22809);
    // The two communicators are distinct: interleaved operations do not mix.
    int32_t x = rank + 1, sa = 0, sb = 0;
    RANK_NCCL(ncclAllReduce(&x, &sa, 1, ncclInt32, ncclSum, a, nullptr));
    RANK_NCCL(ncclAllReduce(&x, &sb, 1, ncclInt32, ncclMax, b, nullptr));
    RANK_EXPECT(sa == 3 && sb == 2);
    // Registration handles, windows and host memory are dummies that round-trip.
    void* mem = nullptr;
    RANK_NCCL(ncclMemAlloc(&mem, 1 << 20));
    RANK_EXPECT(mem != nullptr);
    std::memset(mem, 0, 1 << 20);
    void* handle = nullptr;
    RANK_NCCL(ncclCommRegister(a, mem, 1 << 20, &handle));
    RANK_EXPECT(handle != nullptr);
    RANK_NCCL(ncclCommDeregister(a, handle));
    ncclWindow_t win = nullptr;
    RANK_NCCL(ncclCommWindowRegister(a, mem, 1 << 20, &win, NCCL_WIN_COLL_SYMMETRIC));
    RANK_NCCL(ncclCommWindowDeregister(a, win));
    RANK_NCCL(ncclMemFree(mem));
    RANK_NCCL(ncclCommFinalize(a));
    RANK_NCCL(ncclCommDestroy(a));
    RANK_NCCL(ncclCommDestroy(b));
    // No helper threads, ever (TSan runs a background thread of its own).
    if (!kSanitized) RANK_EXPECT(CountThreads() == 1);
    return 0;
  });
}

TEST_F(CommTest, EmptyCollectivesAreDiscardedLikeNccl) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ExpectRanksSucceed(2, kRankTimeout, [&](int rank) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, 2, id, rank));
    // Only rank 0 issues these: with count 0 they return at once and use no sequence
    // number, so the all-reduce below still pairs up.
    if (rank == 0) {
      RANK_NCCL(ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, comm, nullptr));
      RANK_NCCL(ncclAllGather(nullptr, nullptr, 0, ncclInt8, comm, nullptr));
      RANK_NCCL(ncclBroadcast(nullptr, nullptr, 0, ncclInt8, 1, comm, nullptr));
    }
    int32_t x = 5, y = 0;
    RANK_NCCL(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, nullptr));
    RANK_EXPECT(y == 10);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST_F(CommTest, ArgumentErrorsMatchNccl) {
  ExpectRanksSucceed(1, kRankTimeout, [&](int) {
    ncclUniqueId id;
    RANK_NCCL(ncclGetUniqueId(&id));
    ncclComm_t bad = nullptr;
    RANK_EXPECT(ncclCommInitRank(&bad, 2, id, 2) == ncclInvalidArgument);
    RANK_EXPECT(ncclCommInitRank(nullptr, 1, id, 0) == ncclInvalidArgument);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.magic = 0;
    RANK_EXPECT(ncclCommInitRankConfig(&bad, 1, id, 0, &config) == ncclInvalidArgument);
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, 1, id, 0));
    float x = 2.0f, y = 0.0f;
    RANK_EXPECT(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, nullptr, nullptr) == ncclInvalidArgument);
    RANK_EXPECT(ncclAllReduce(&x, &y, 1, ncclNumTypes, ncclSum, comm, nullptr) == ncclInvalidArgument);
    RANK_EXPECT(ncclAllReduce(&x, &y, 1, ncclFloat32, static_cast<ncclRedOp_t>(ncclNumOps + 3), comm,
                              nullptr) == ncclInvalidArgument);
    RANK_EXPECT(ncclAllReduce(&x, &y, 1, ncclFloat32, static_cast<ncclRedOp_t>(-1), comm, nullptr) ==
                ncclInvalidArgument);
    RANK_EXPECT(ncclBroadcast(&x, &y, 1, ncclFloat32, 1, comm, nullptr) == ncclInvalidArgument);
    RANK_EXPECT(ncclReduce(&x, &y, 1, ncclFloat32, ncclSum, -1, comm, nullptr) == ncclInvalidArgument);
    RANK_EXPECT(ncclSend(&x, 1, ncclFloat32, 1, comm, nullptr) == ncclInvalidArgument);
    RANK_EXPECT(ncclRecv(&y, 1, ncclFloat32, -1, comm, nullptr) == ncclInvalidArgument);
    RANK_EXPECT(ncclCommCount(nullptr, nullptr) == ncclInvalidArgument);
    RANK_EXPECT(ncclRedOpDestroy(ncclSum, comm) == ncclInvalidArgument);
    ncclComm_t child;
    RANK_EXPECT(ncclCommSplit(comm, -2, 0, &child, nullptr) == ncclInvalidArgument);
    RANK_EXPECT(ncclCommRevoke(comm, 1) == ncclInvalidArgument);
    RANK_EXPECT(ncclGroupEnd() == ncclInvalidUsage);
    RANK_EXPECT(std::strlen(ncclGetLastError(comm)) > 0);
    RANK_EXPECT(std::string(ncclGetErrorString(ncclInvalidArgument)) ==
                "invalid argument (run with NCCL_DEBUG=WARN for details)");
    RANK_EXPECT(std::string(ncclGetErrorString(ncclRemoteError)) ==
                "remote process exited or there was a network error");
    RANK_EXPECT(ncclCommDestroy(nullptr) == ncclSuccess);
    RANK_EXPECT(ncclCommAbort(nullptr) == ncclSuccess);
    // One rank: a collective is a local copy (Avg of one value is the value).
    RANK_NCCL(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclAvg, comm, nullptr));
    RANK_EXPECT(y == 2.0f);
    // After revoke, new operations are refused; destroy still works.
    RANK_NCCL(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
    RANK_EXPECT(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, nullptr) == ncclInvalidUsage);
    RANK_EXPECT(ncclCommFinalize(comm) == ncclInvalidUsage);
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

TEST_F(CommTest, SegmentFileIsGoneOnceInitReturns) {
  const int n = 4;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  const std::string dir = shm_dir_;
  Ranks ranks(n, [&](int rank) {
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
    // Every rank attached, rank 0 unlinked the file, and init waited for that: a job
    // killed from now on leaves nothing behind.
    DIR* d = opendir(dir.c_str());
    RANK_EXPECT(d != nullptr);
    int entries = 0;
    while (const dirent* e = readdir(d)) entries += e->d_name[0] != '.';
    closedir(d);
    RANK_EXPECT(entries == 0);
    int32_t x = 1, y = 0;
    RANK_NCCL(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, nullptr));
    RANK_EXPECT(y == n);
    pause();  // killed below, without ncclCommDestroy
    return 0;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (int r = 0; r < n; ++r) EXPECT_TRUE(ranks.Running(r)) << "rank " << r << " exit " << ranks.ExitCode(r);
  ranks.KillAll();
  EXPECT_TRUE(ShmFiles().empty());
}

TEST_F(CommTest, TwoJobsInOneFolderStayApart) {
  ncclUniqueId ids[2];
  ASSERT_EQ(ncclGetUniqueId(&ids[0]), ncclSuccess);
  ASSERT_EQ(ncclGetUniqueId(&ids[1]), ncclSuccess);
  // Four processes: job = proc / 2, rank = proc % 2, all running at the same time.
  ExpectRanksSucceed(4, kRankTimeout, [&](int proc) {
    const int job = proc / 2, rank = proc % 2;
    ncclComm_t comm;
    RANK_NCCL(ncclCommInitRank(&comm, 2, ids[job], rank));
    for (int i = 0; i < 50; ++i) {
      int32_t x = (job + 1) * 100 + rank, y = 0;
      RANK_NCCL(ncclAllReduce(&x, &y, 1, ncclInt32, ncclSum, comm, nullptr));
      RANK_EXPECT(y == (job + 1) * 200 + 1);
    }
    RANK_NCCL(ncclCommDestroy(comm));
    return 0;
  });
}

// The library exports the NCCL API (each nccl* and its pnccl* alias, same address) and
// the hooks that emulate CUDA graphs for tests, nothing of its internals.
TEST(CpuNcclExports, EveryApiNameAndItsProfilingAlias) {
  void* lib = dlopen(COLLWATCH_CPU_NCCL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  const char* names[] = {
      "GetVersion", "GetUniqueId", "CommInitRank", "CommInitRankConfig", "CommInitRankScalable",
      "CommInitAll", "CommFinalize", "CommDestroy", "CommAbort", "CommRevoke", "CommSplit",
      "CommShrink", "GetErrorString", "GetLastError", "ResetDebugInit", "CommGetAsyncError",
      "CommCount", "CommCuDevice", "CommUserRank", "CommRegister", "CommDeregister",
      "CommWindowRegister", "CommWindowDeregister", "MemAlloc", "MemFree",
      "RedOpCreatePreMulSum", "RedOpDestroy", "Reduce", "Bcast", "Broadcast", "AllReduce",
      "ReduceScatter", "AllGather", "AlltoAll", "Gather", "Scatter", "Send", "Recv",
      "GroupStart", "GroupEnd", "GroupSimulateEnd"};
  for (const char* name : names) {
    void* plain = dlsym(lib, (std::string("nccl") + name).c_str());
    void* profiling = dlsym(lib, (std::string("pnccl") + name).c_str());
    EXPECT_NE(plain, nullptr) << name;
    EXPECT_EQ(plain, profiling) << name;
  }
  for (const char* hook : {"CaptureBegin", "CaptureEnd", "GraphReplay", "GraphDestroy"}) {
    EXPECT_NE(dlsym(lib, (std::string("collwatchCpuNccl") + hook).c_str()), nullptr) << hook;
  }
  EXPECT_EQ(dlsym(lib, "_ZN9collwatch8cpu_nccl11GetReduceFnEiNS0_6BaseOpE"), nullptr);
  EXPECT_EQ(dlsym(lib, "_ZN9collwatch8cpu_nccl7NewCommEiim"), nullptr);
  dlclose(lib);
}

}  // namespace
}  // namespace collwatch::cpu_nccl_test
