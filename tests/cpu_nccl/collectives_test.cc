// Every collective of the CPU NCCL backend against reference results, on 2, 4 and 8
// forked ranks: data types x reduce ops, in-place variants, odd counts, messages larger
// than a staging slot (several chunks), non-root NULL buffers. Each rank checks its own
// result bit for bit, so all ranks are also bit-identical. Threading: forked processes.
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstring>
#include <vector>

#include "tests/cpu_nccl/rank_harness.h"
#include "tests/cpu_nccl/reference.h"

namespace collwatch::cpu_nccl_test {
namespace {

using Bytes = std::vector<uint8_t>;

// More elements than one 1 MiB staging slot holds for any type used with it.
constexpr size_t kLargeFloats = 300007;
// An odd count within one chunk (smaller under sanitizers, where reference math is slow).
constexpr size_t kOdd = kSanitized ? 257 : 1037;

// Counts to try for `type`: tiny, odd, and (one type only under sanitizers) `large`.
std::vector<size_t> Counts(ncclDataType_t type, size_t large) {
  if (kSanitized && type != ncclFloat32) return {1, kOdd};
  return {1, kOdd, large};
}

// Everyone's inputs (each rank can compute them all: inputs are deterministic).
std::vector<Bytes> AllInputs(ncclDataType_t type, int n, int salt, size_t count) {
  std::vector<Bytes> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(MakeInput(type, r, salt, count));
  return inputs;
}

// Block `block` (of `count` elements) of every rank's input of `count * n` elements.
std::vector<Bytes> BlocksFor(ncclDataType_t type, int n, int salt, int block, size_t count) {
  std::vector<Bytes> blocks;
  for (int r = 0; r < n; ++r) blocks.push_back(MakeInput(type, r, salt, count, block * count));
  return blocks;
}

#define RANK_EXPECT_SAME(type, got, want, count, what)                                        \
  do {                                                                                        \
    const std::string diff = FirstDifference((type), (got), (want), (count));                 \
    if (!diff.empty()) {                                                                      \
      std::fprintf(stderr, "[rank %d] %s:%d: %s: %s\n", g_rank, __FILE__, __LINE__, (what),   \
                   diff.c_str());                                                             \
      return 1;                                                                               \
    }                                                                                         \
  } while (0)

class CollectivesTest : public ShmDirTest, public ::testing::WithParamInterface<int> {
 protected:
  // Runs body(rank, nranks, comm) on GetParam() ranks of one fresh communicator.
  void RunOnRanks(int (*body)(int rank, int nranks, ncclComm_t comm)) {
    const int n = GetParam();
    ncclUniqueId id;
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    ExpectRanksSucceed(n, kRankTimeout, [&](int rank) {
      ncclComm_t comm = nullptr;
      RANK_NCCL(ncclCommInitRank(&comm, n, id, rank));
      const int code = body(rank, n, comm);
      RANK_NCCL(ncclCommDestroy(comm));
      return code;
    });
  }
};

int AllReduceBody(int rank, int n, ncclComm_t comm) {
  int salt = 0;
  for (const DtypeInfo& d : kAllDtypes) {
    for (ncclRedOp_t op : kBuiltinOps) {
      for (size_t count : {size_t{1}, kOdd}) {
        for (bool in_place : {false, true}) {
          const std::vector<Bytes> inputs = AllInputs(d.type, n, ++salt, count);
          const Bytes want = ReferenceReduce(d.type, op, inputs, 0, count);
          Bytes send = inputs[rank];
          Bytes recv(send.size(), 0xa5);
          void* out = in_place ? send.data() : recv.data();
          RANK_NCCL(ncclAllReduce(send.data(), out, count, d.type, op, comm, nullptr));
          RANK_EXPECT_SAME(d.type, out, want.data(), count, d.name);
        }
      }
    }
  }
  // Several chunks, uneven split among ranks.
  for (ncclDataType_t type : {ncclFloat32, ncclBfloat16, ncclInt64}) {
    if (kSanitized && type != ncclFloat32) continue;
    const std::vector<Bytes> inputs = AllInputs(type, n, ++salt, kLargeFloats);
    const Bytes want = ReferenceReduce(type, ncclSum, inputs, 0, kLargeFloats);
    Bytes recv(want.size(), 0);
    RANK_NCCL(ncclAllReduce(inputs[rank].data(), recv.data(), kLargeFloats, type, ncclSum, comm,
                            nullptr));
    RANK_EXPECT_SAME(type, recv.data(), want.data(), kLargeFloats, "large");
  }
  return 0;
}

int BroadcastBody(int rank, int n, ncclComm_t comm) {
  int salt = 0;
  for (int root : {0, n - 1}) {
    for (ncclDataType_t type : {ncclInt8, ncclFloat16, ncclFloat32, ncclFloat64, ncclFloat8e5m2}) {
      for (size_t count : Counts(type, kLargeFloats)) {
        const Bytes want = MakeInput(type, root, ++salt, count);
        // Out of place: non-roots pass no send buffer.
        Bytes recv(want.size(), 0xa5);
        const void* send = rank == root ? want.data() : nullptr;
        RANK_NCCL(ncclBroadcast(send, recv.data(), count, type, root, comm, nullptr));
        RANK_EXPECT_SAME(type, recv.data(), want.data(), count, "broadcast");
        // In place, both entry points.
        Bytes buf = rank == root ? want : Bytes(want.size(), 0x5a);
        RANK_NCCL(ncclBroadcast(buf.data(), buf.data(), count, type, root, comm, nullptr));
        RANK_EXPECT_SAME(type, buf.data(), want.data(), count, "broadcast in place");
        Bytes bbuf = rank == root ? want : Bytes(want.size(), 0x33);
        RANK_NCCL(ncclBcast(bbuf.data(), count, type, root, comm, nullptr));
        RANK_EXPECT_SAME(type, bbuf.data(), want.data(), count, "bcast");
      }
    }
  }
  return 0;
}

int ReduceBody(int rank, int n, ncclComm_t comm) {
  int salt = 0;
  for (int root : {0, n / 2}) {
    for (ncclDataType_t type : {ncclInt32, ncclFloat32, ncclBfloat16, ncclFloat8e4m3}) {
      for (ncclRedOp_t op : {ncclSum, ncclMax, ncclAvg}) {
        for (size_t count : {size_t{3}, kOdd}) {
          const std::vector<Bytes> inputs = AllInputs(type, n, ++salt, count);
          const Bytes want = ReferenceReduce(type, op, inputs, 0, count);
          Bytes recv(want.size(), 0xa5);
          void* out = rank == root ? recv.data() : nullptr;  // recvbuff only used on root
          RANK_NCCL(ncclReduce(inputs[rank].data(), out, count, type, op, root, comm, nullptr));
          if (rank == root) RANK_EXPECT_SAME(type, recv.data(), want.data(), count, "reduce");
          Bytes buf = inputs[rank];
          RANK_NCCL(ncclReduce(buf.data(), buf.data(), count, type, op, root, comm, nullptr));
          if (rank == root) RANK_EXPECT_SAME(type, buf.data(), want.data(), count, "in place");
        }
      }
    }
  }
  const std::vector<Bytes> inputs = AllInputs(ncclFloat32, n, ++salt, kLargeFloats);
  const Bytes want = ReferenceReduce(ncclFloat32, ncclSum, inputs, 0, kLargeFloats);
  Bytes recv(want.size(), 0);
  RANK_NCCL(ncclReduce(inputs[rank].data(), recv.data(), kLargeFloats, ncclFloat32, ncclSum, 1 % n,
                       comm, nullptr));
  if (rank == 1 % n) RANK_EXPECT_SAME(ncclFloat32, recv.data(), want.data(), kLargeFloats, "large");
  return 0;
}

int AllGatherBody(int rank, int n, ncclComm_t comm) {
  int salt = 0;
  for (ncclDataType_t type : {ncclUint8, ncclFloat16, ncclFloat32, ncclInt64}) {
    for (size_t count : Counts(type, kLargeFloats)) {
      const std::vector<Bytes> inputs = AllInputs(type, n, ++salt, count);
      Bytes want;
      for (const Bytes& in : inputs) want.insert(want.end(), in.begin(), in.end());
      Bytes recv(want.size(), 0xa5);
      // The count is the send count.
      RANK_NCCL(ncclAllGather(inputs[rank].data(), recv.data(), count, type, comm, nullptr));
      RANK_EXPECT_SAME(type, recv.data(), want.data(), count * n, "allgather");
      // In place: sendbuff == recvbuff + rank * count.
      Bytes buf(want.size(), 0x5a);
      uint8_t* mine = buf.data() + rank * count * SizeOf(type);
      std::memcpy(mine, inputs[rank].data(), inputs[rank].size());
      RANK_NCCL(ncclAllGather(mine, buf.data(), count, type, comm, nullptr));
      RANK_EXPECT_SAME(type, buf.data(), want.data(), count * n, "allgather in place");
    }
  }
  return 0;
}

int ReduceScatterBody(int rank, int n, ncclComm_t comm) {
  int salt = 0;
  for (ncclDataType_t type :
       {ncclInt32, ncclFloat32, ncclFloat16, ncclBfloat16, ncclFloat64, ncclFloat8e5m2}) {
    for (ncclRedOp_t op : kBuiltinOps) {
      for (size_t count : {size_t{1}, kOdd}) {
        const Bytes send = MakeInput(type, rank, ++salt, count * n);
        // The count is the receive count; rank r gets block r.
        const Bytes want = ReferenceReduce(type, op, BlocksFor(type, n, salt, rank, count), 0, count);
        Bytes recv(want.size(), 0xa5);
        RANK_NCCL(ncclReduceScatter(send.data(), recv.data(), count, type, op, comm, nullptr));
        RANK_EXPECT_SAME(type, recv.data(), want.data(), count, "reducescatter");
        // In place: recvbuff == sendbuff + rank * count.
        Bytes buf = send;
        uint8_t* mine = buf.data() + rank * count * SizeOf(type);
        RANK_NCCL(ncclReduceScatter(buf.data(), mine, count, type, op, comm, nullptr));
        RANK_EXPECT_SAME(type, mine, want.data(), count, "reducescatter in place");
      }
    }
  }
  const size_t count = kLargeFloats / 2;
  const Bytes send = MakeInput(ncclFloat32, rank, ++salt, count * n);
  const Bytes want =
      ReferenceReduce(ncclFloat32, ncclSum, BlocksFor(ncclFloat32, n, salt, rank, count), 0, count);
  Bytes recv(want.size(), 0);
  RANK_NCCL(ncclReduceScatter(send.data(), recv.data(), count, ncclFloat32, ncclSum, comm, nullptr));
  RANK_EXPECT_SAME(ncclFloat32, recv.data(), want.data(), count, "large");
  return 0;
}

int AlltoAllBody(int rank, int n, ncclComm_t comm) {
  int salt = 0;
  for (ncclDataType_t type : {ncclInt8, ncclFloat32, ncclFloat64}) {
    for (size_t count : Counts(type, 70001)) {
      const Bytes send = MakeInput(type, rank, ++salt, count * n);
      Bytes want;  // block `rank` of every rank's input, in rank order
      for (const Bytes& block : BlocksFor(type, n, salt, rank, count)) {
        want.insert(want.end(), block.begin(), block.end());
      }
      Bytes recv(want.size(), 0xa5);
      RANK_NCCL(ncclAlltoAll(send.data(), recv.data(), count, type, comm, nullptr));
      RANK_EXPECT_SAME(type, recv.data(), want.data(), count * n, "alltoall");
    }
  }
  return 0;
}

int GatherScatterBody(int rank, int n, ncclComm_t comm) {
  int salt = 0;
  for (int root : {0, n - 1}) {
    for (ncclDataType_t type : {ncclUint8, ncclFloat32, ncclBfloat16}) {
      for (size_t count : Counts(type, kLargeFloats)) {
        const size_t bytes = count * SizeOf(type);
        // Everyone's input matters to the root only; the others need their own.
        ++salt;
        std::vector<Bytes> inputs(n);
        Bytes all;
        for (int r = 0; r < n; ++r) {
          if (r == rank || rank == root) inputs[r] = MakeInput(type, r, salt, count);
          if (rank == root) all.insert(all.end(), inputs[r].begin(), inputs[r].end());
        }
        if (rank != root) all.resize(bytes * n);
        // Gather: only root has a receive buffer.
        Bytes recv(all.size(), 0xa5);
        RANK_NCCL(ncclGather(inputs[rank].data(), rank == root ? recv.data() : nullptr, count,
                             type, root, comm, nullptr));
        if (rank == root) RANK_EXPECT_SAME(type, recv.data(), all.data(), count * n, "gather");
        // Gather in place on root: sendbuff == recvbuff + root * count.
        Bytes buf(all.size(), 0x5a);
        std::memcpy(buf.data() + root * bytes, inputs[rank].data(), bytes);
        const void* send = rank == root ? buf.data() + root * bytes : inputs[rank].data();
        RANK_NCCL(ncclGather(send, buf.data(), count, type, root, comm, nullptr));
        if (rank == root) RANK_EXPECT_SAME(type, buf.data(), all.data(), count * n, "gather ip");
        // Scatter: only root has a send buffer; rank r gets block r.
        Bytes piece(bytes, 0xa5);
        RANK_NCCL(ncclScatter(rank == root ? all.data() : nullptr, piece.data(), count, type, root,
                              comm, nullptr));
        RANK_EXPECT_SAME(type, piece.data(), inputs[rank].data(), count, "scatter");
        // Scatter in place on root: recvbuff == sendbuff + root * count.
        Bytes sbuf = rank == root ? all : Bytes(bytes, 0x77);
        void* out = rank == root ? sbuf.data() + root * bytes : sbuf.data();
        RANK_NCCL(ncclScatter(sbuf.data(), out, count, type, root, comm, nullptr));
        RANK_EXPECT_SAME(type, out, inputs[rank].data(), count, "scatter in place");
      }
    }
  }
  return 0;
}

TEST_P(CollectivesTest, AllReduceEveryTypeAndOp) { RunOnRanks(AllReduceBody); }
TEST_P(CollectivesTest, BroadcastAndBcast) { RunOnRanks(BroadcastBody); }
TEST_P(CollectivesTest, Reduce) { RunOnRanks(ReduceBody); }
TEST_P(CollectivesTest, AllGather) { RunOnRanks(AllGatherBody); }
TEST_P(CollectivesTest, ReduceScatterEveryOp) { RunOnRanks(ReduceScatterBody); }
TEST_P(CollectivesTest, AlltoAll) { RunOnRanks(AlltoAllBody); }
TEST_P(CollectivesTest, GatherAndScatter) { RunOnRanks(GatherScatterBody); }

INSTANTIATE_TEST_SUITE_P(Ranks, CollectivesTest, ::testing::Values(2, 4, 8),
                         [](const ::testing::TestParamInfo<int>& param_info) {
                           return std::to_string(param_info.param) + "ranks";
                         });

}  // namespace
}  // namespace collwatch::cpu_nccl_test
