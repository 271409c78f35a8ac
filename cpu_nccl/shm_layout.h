// The shared-memory ABI of the CPU NCCL backend. This header is its specification.
// Threading: each field has one writer (named below) and is read by every rank; ordering
// comes from seq_cst stores of the counters and acquire loads by readers. Dependency-free.
//
// One segment per communicator: a file `collwatch-nccl-<uid>-<key>` in
// COLLWATCH_CPU_NCCL_SHM_DIR (default /dev/shm), mapped MAP_SHARED by every rank. <key> is
// 16 hex digits: Hash64 of the ncclUniqueId (random bytes), or for a split/shrink child a
// hash of the parent key, the parent's split counter and the color (or the excluded ranks),
// so every member of one communicator computes the same name and no other job can.
//
//   +-----------------------------+ 0
//   | SegmentHeader               |  magic, version, geometry, attach count
//   +-----------------------------+ ranks_offset
//   | RankControl[nranks]         |  per rank: step counter, futex doorbell, wait target,
//   |                             |  descriptors of its two latest collectives
//   +-----------------------------+ channels_offset
//   | ChannelControl[n*n]         |  per (sender, receiver): head (sender), tail (receiver)
//   +-----------------------------+ staging_offset
//   | slot[nranks][2]             |  per rank: two staging slots of slot_bytes
//   +-----------------------------+ rings_offset
//   | ring[n*n]                   |  per (sender, receiver): channel_bytes of byte stream
//   +-----------------------------+ total_bytes
//
// Creation. Every rank opens the file with O_CREAT and ftruncates it to total_bytes (a
// no-op once done; the bytes read as zero: all-zero means empty). The rank that wins the
// CAS of `creator` 0->1 writes version/nranks/key/geometry, then `magic` (release); the
// others wait for `magic` and check the fields. A rank claims its RankControl (CAS
// `claimed` 0->1), increments `attached`, and waits until attached == nranks. Rank 0 then
// unlinks the file and sets `unlinked`; the other ranks wait for that before init
// returns, so once init has completed anywhere no file is left behind, even after a kill.
//
// Collectives. Each rank publishes its progress as `step`, a count of phases that only
// grows. A collective is a sequence of chunks; a chunk has one or two phases. In a phase a
// rank (1) writes into its own slot (chunk c uses slot c % 2), (2) increments its step,
// (3) waits until the ranks it reads from reached that step, (4) reads their slots. The
// first phase of a collective waits for every rank and compares every rank's OpDesc at
// desc[seq % 2]: any difference in kind/count/dtype/redop/root and the rank blocks forever
// (only a local ncclCommAbort ends the wait). Before writing chunk c a rank waits until
// every rank's step reached the first phase of chunk c-1: by then all readers of chunk
// c-2, which used the same slot, are done. Steps match across ranks because descriptors
// match, so each rank can name the step it waits for.
//
// Point-to-point. Channel (s, r) is a byte ring: sender s writes at head % channel_bytes
// and advances head, receiver r reads at tail % channel_bytes and advances tail. A message
// is a 16-byte MessageHeader followed by its payload padded to 16 bytes. The receiver
// checks the header's byte count against its own and blocks forever on a mismatch. Sends
// complete once their bytes are in the ring (eager up to channel_bytes), as NCCL's sends
// complete once the data sits in the peer's FIFO.
//
// Sleeping. A rank that gives up spinning stores in `wait_on` the rank whose progress it
// needs (kWaitAny: anyone; kWaitAbortOnly: no peer can help), re-checks its condition,
// then FUTEX_WAITs (shared, not PRIVATE) on its `doorbell`. After changing a counter a rank
// reads the others' `wait_on` and, for those waiting on it or on anyone, bumps `doorbell`
// and FUTEX_WAKEs it: no wake syscall unless someone sleeps. seq_cst on both sides rules
// out lost wake-ups.
#ifndef COLLWATCH_CPU_NCCL_SHM_LAYOUT_H_
#define COLLWATCH_CPU_NCCL_SHM_LAYOUT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace collwatch::cpu_nccl {

inline constexpr uint64_t kSegmentMagic = 0x31304c43434e5743ull;  // "CWNCCL01"
inline constexpr uint32_t kSegmentVersion = 1;
inline constexpr uint32_t kSlotsPerRank = 2;
inline constexpr uint64_t kMessageTag = 0x67736d2d6c636363ull;  // in every MessageHeader

// Values of RankControl::wait_on other than a rank number.
inline constexpr int32_t kNotWaiting = -3;
inline constexpr int32_t kWaitAbortOnly = -2;
inline constexpr int32_t kWaitAny = -1;

struct SegmentHeader {
  std::atomic<uint64_t> magic;     // creator: kSegmentMagic, stored last (release)
  std::atomic<uint32_t> creator;   // CAS 0->1 elects the rank that writes the fields below
  uint32_t version;                // creator: kSegmentVersion
  uint32_t nranks;                 // creator
  uint32_t reserved;
  uint64_t key;                    // creator: the communicator key in the file name
  uint64_t slot_bytes;             // creator: Geometry::slot_bytes
  uint64_t channel_bytes;          // creator: Geometry::channel_bytes
  uint64_t total_bytes;            // creator: Geometry::total_bytes
  uint8_t pad0[8];
  std::atomic<uint32_t> attached;  // each rank: +1 once it claimed its RankControl
  std::atomic<uint32_t> unlinked;  // rank 0: 1 once the file is unlinked
  uint8_t pad1[56];
};

// What a rank issued as collective number `seq` of the communicator.
struct OpDesc {
  uint64_t seq;    // 1-based collective sequence number
  uint64_t count;  // the count argument as passed (send count for AllGather, ...)
  uint32_t kind;   // OpKind, with kDescMovesByIpc where the data moves GPU to GPU
  uint32_t dtype;  // ncclDataType_t
  int32_t redop;   // ncclRedOp_t for builtins, kDescPreMulSum for user ops, -1 if none
  int32_t root;    // root rank, -1 if the op has none
};

inline constexpr int32_t kDescPreMulSum = 1000;
// In OpDesc::kind: the rank moves this collective's data through CUDA IPC (cuda_ipc.cc).
// A rank that does and one that does not follow different protocols over the slots, so
// they must not pass the comparison as the same collective.
inline constexpr uint32_t kDescMovesByIpc = 1u << 16;

struct RankControl {
  std::atomic<uint64_t> step;       // owner: phases published so far
  uint8_t pad0[56];
  std::atomic<uint32_t> doorbell;   // futex word: anyone bumps it to wake the owner
  std::atomic<int32_t> wait_on;     // owner: rank it sleeps for, or a kWait*/kNotWaiting
  std::atomic<uint32_t> claimed;    // CAS 0->1 by the process that becomes this rank
  uint32_t pid;                     // owner, for humans and debuggers
  uint8_t pad1[48];
  OpDesc desc[2];                   // owner: descriptor of collective `seq` at [seq % 2]
};

struct ChannelControl {
  std::atomic<uint64_t> head;  // sender: bytes written into the ring so far
  uint8_t pad0[56];
  std::atomic<uint64_t> tail;  // receiver: bytes consumed so far
  uint8_t pad1[56];
};

// Precedes every point-to-point message in a ring (16-byte aligned).
struct MessageHeader {
  uint64_t bytes;  // payload bytes (the ring advances by bytes rounded up to 16)
  uint64_t tag;    // kMessageTag
};

static_assert(sizeof(SegmentHeader) == 128);
static_assert(offsetof(SegmentHeader, attached) == 64);
static_assert(sizeof(OpDesc) == 32);
static_assert(sizeof(RankControl) == 192);
static_assert(offsetof(RankControl, doorbell) == 64);
static_assert(offsetof(RankControl, desc) == 128);
static_assert(sizeof(ChannelControl) == 128);
static_assert(offsetof(ChannelControl, tail) == 64);
static_assert(sizeof(MessageHeader) == 16);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<int32_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));  // futex words

struct Geometry {
  uint32_t nranks;
  uint64_t slot_bytes;     // one staging slot
  uint64_t channel_bytes;  // one point-to-point ring
  uint64_t ranks_offset;
  uint64_t channels_offset;
  uint64_t staging_offset;
  uint64_t rings_offset;
  uint64_t total_bytes;
};

constexpr uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

constexpr uint64_t Clamp(uint64_t v, uint64_t lo, uint64_t hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

// Staging for all ranks stays near 32 MiB and rings near 16 MiB for small communicators;
// both only cost memory where touched (tmpfs pages are allocated on first write).
inline constexpr uint64_t kStagingBudget = 32ull << 20;
inline constexpr uint64_t kRingBudget = 16ull << 20;
inline constexpr uint64_t kMaxSlotBytes = 1ull << 20;
inline constexpr uint64_t kMinSlotBytes = 64ull << 10;
inline constexpr uint64_t kMaxChannelBytes = 256ull << 10;
inline constexpr uint64_t kMinChannelBytes = 16ull << 10;

// The layout of a segment for `nranks` ranks; a pure function, so every rank agrees.
constexpr Geometry ComputeGeometry(uint32_t nranks) {
  Geometry g{};
  const uint64_t n = nranks;
  g.nranks = nranks;
  g.slot_bytes = Clamp(kStagingBudget / (kSlotsPerRank * n), kMinSlotBytes, kMaxSlotBytes) /
                 4096 * 4096;
  g.channel_bytes = Clamp(kRingBudget / (n * n), kMinChannelBytes, kMaxChannelBytes) / 4096 * 4096;
  g.ranks_offset = 4096;
  g.channels_offset = AlignUp(g.ranks_offset + n * sizeof(RankControl), 4096);
  g.staging_offset = AlignUp(g.channels_offset + n * n * sizeof(ChannelControl), 4096);
  g.rings_offset = g.staging_offset + n * kSlotsPerRank * g.slot_bytes;
  g.total_bytes = AlignUp(g.rings_offset + n * n * g.channel_bytes, 4096);
  return g;
}

}  // namespace collwatch::cpu_nccl

#endif  // COLLWATCH_CPU_NCCL_SHM_LAYOUT_H_
