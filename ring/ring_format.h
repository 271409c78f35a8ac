// The shared-memory ring: the on-disk ABI between libcollwatch.so (the writer), the
// node agent and the post-mortem reader. Dependency-free; its comments are the spec.
// Threading: many writer threads in one process, any number of reader processes.
#ifndef COLLWATCH_RING_RING_FORMAT_H_
#define COLLWATCH_RING_RING_FORMAT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace collwatch::ring {

// File layout (one file per process, in COLLWATCH_RING_DIR, default
// /dev/shm/collwatch-<uid>, mode 0600 inside a 0700 directory):
//
//   offset 0                 +-------------------------------------------+
//                            | Header (kHeaderBytes)                      |
//                            |   identity: magic, version, sizes, pid,   |
//                            |   host, job, RANK/LOCAL_RANK/WORLD_SIZE   |
//                            |   live: heartbeat, dropped, writer state, |
//                            |         exit code                         |
//   strings_offset           +-------------------------------------------+
//                            | StringSlot[string_capacity]               |
//                            |   interned names: NVTX regions, and the   |
//                            |   files and functions of call paths;      |
//                            |   id = i + 1                              |
//   call_paths_offset        +-------------------------------------------+
//                            | CallPathSlot[call_path_capacity]          |
//                            |   interned Python call paths; id = i + 1  |
//   lanes_offset             +-------------------------------------------+
//                            | lane 0: LaneHeader, Record[lane_capacity] |  shared lane
//   + lane_bytes             | lane 1: LaneHeader, Record[lane_capacity] |  owned lanes
//                            | ...                                       |
//   file_bytes               +-------------------------------------------+
//
// All-zero means empty everywhere: a new file is created zero-filled. The writer fills
// the identity fields and stores `magic` last (release); a reader that sees another
// magic treats the file as not ready (or not a ring).
//
// Lanes. A writing thread owns a lane for its lifetime (claimed with a CAS on
// `owner_tid`, released at thread exit), so the records of one lane are one thread's, in
// order, and writers never share a cache line. Threads beyond the owned lanes share
// lane 0. A record is named by (lane, index); record n of a lane lives in slot
// n % lane_capacity (a power of two).
//
// Writing record n (never blocks):
//   1. reserve n: shared lane n = write_index.fetch_add(1); owned lane n = write_index,
//      then write_index.store(n + 1)                  -- "reserved"
//   2. owned lane: slot.commit.store(0, relaxed); shared lane: CAS the commit word from a
//      committed value below n + 1 to kCommitWriting | (n + 1); then fence(release)
//                                                      -- slot now "being written"
//   3. store the payload words (relaxed atomic stores)
//   4. slot.commit.store(n + 1, release)               -- slot now "holds record n"
// On the shared lane two writers may reach one slot a lap apart (one preempted in step 3
// while the others wrap the lane): the claim keeps the later one out until the first has
// committed, so no payload is ever written by two. A writer that finds the slot being
// written, or holding record n or a later one, writes nothing: record n is lost, counted
// in `dropped`. (A reader built before kCommitWriting counts a slot claimed at that moment
// as damaged; it lasts only while the write is in flight.)
// A full lane overwrites its oldest slot: records with index < write_index - capacity
// are lost, and a reader counts them from write_index.
//
// Returning in place. A kEnter written to an owned lane with kFlagReturnsInPlace set
// gets its return written into the same slot by the same thread (nothing else can
// reach that slot meanwhile): return_ns, result and the return flags, then
// commit.store((n + 1) | kCommitReturned, release). Calls that change the record at
// return (communicator creation, queries) and calls on the shared lane write a separate
// kReturn record instead. Readers present both forms the same way (a kEnter followed by
// its kReturn).
//
// Return times. A clock read costs 10-20 ns on the hosts we run on, the largest part of
// a recorded call, so a return written in place reads the clock only when the call
// blocked: when the writer's watcher thread ticked while the call was inside NCCL. A call
// that returned before the next tick carries kFlagReturnedWithinTick and return_ns equal
// to its enter time: it returned less than one tick later. The watcher ticks every
// kActiveTickNs while the process makes NCCL calls, every kIdleTickNs after a second
// without any, every 200 us while GPU work is in flight; a busy machine can delay a tick.
// Separate kReturn records always carry a clock reading.
//
// Reading record n (a seqlock; the reader never writes):
//   c1 = slot.commit.load(acquire); copy payload (relaxed loads); fence(acquire);
//   c2 = slot.commit.load(relaxed)
//   c1 & ~kCommitReturned == n + 1 and c2 == c1  -> valid (returned if the bit is set)
//   c2 == c1 | kCommitReturned                   -> returned during the copy: read again
//   c1 == 0 or c1 < n + 1, or kCommitWriting | (n + 1)
//                              -> not yet committed (writer still in step 2-3, or a
//                                 writer died there: after a grace period, "torn")
//   otherwise                  -> overwritten by a later lap: "lost"
//
// Slot states of a string slot (owner of each transition in brackets):
//   kStringEmpty --[writer CAS]--> kStringWriting --[writer store]--> kStringReady
//   kStringWriting --[another writer's CAS after a bounded wait]--> kStringAbandoned
//     (its writer was preempted too long; lookups skip the slot, readers ignore it)
// A string slot is never rewritten once ready; id 0 means "no region".
// Call path slots go through the same states, claimed the same way, and are never
// rewritten once ready; id 0 means "no call path".

inline constexpr uint64_t kMagic = 0x31474e4952574301ull;  // "\x01CWRING1" little-endian
inline constexpr uint32_t kVersion = 5;  // 4: Header::exit_code; 5: call paths
inline constexpr uint32_t kHeaderBytes = 4096;
inline constexpr uint32_t kRecordBytes = 128;
inline constexpr uint32_t kStringSlotBytes = 128;
inline constexpr uint32_t kMaxStringBytes = kStringSlotBytes - 16;  // payload per name
inline constexpr uint32_t kHostBytes = 64;
inline constexpr uint32_t kJobBytes = 64;
inline constexpr uint32_t kLaneHeaderBytes = 64;
inline constexpr uint64_t kDefaultLaneCapacity = 1u << 15;  // records per lane (4 MiB)
inline constexpr uint32_t kDefaultLanes = 4;                // lane 0 shared + 3 owned
inline constexpr uint64_t kCommitReturned = 1ull << 63;     // commit bit: returned in place
inline constexpr uint64_t kCommitWriting = 1ull << 62;      // commit bit: a shared-lane write claimed it
inline constexpr uint64_t kDefaultStringCapacity = 8192;      // 1 MiB of names
inline constexpr uint32_t kCallPathSlotBytes = 1024;
inline constexpr uint32_t kMaxCallPathFrames = (kCallPathSlotBytes - 16) / 16;  // 63
inline constexpr uint64_t kDefaultCallPathCapacity = 2048;    // 2 MiB of call paths
inline constexpr int32_t kUnset = -1;                         // int fields: "not known"
inline constexpr uint8_t kNoDtype = 0xff;
inline constexpr uint64_t kActiveTickNs = 1'000'000;  // watcher period while calls are made
inline constexpr uint64_t kIdleTickNs = 20'000'000;   // after a second without any

// What a record says. Every wrapped call writes kEnter before forwarding and kReturn
// after; kComplete comes later from the watcher thread (GPU) for async completion.
enum class RecordKind : uint16_t {
  kEmpty = 0,
  kEnter = 1,     // a call entered: full signature, t_ns = enter time
  kReturn = 2,    // the call returned: same signature, (ref_lane, ref_index) = its kEnter
  kComplete = 3,  // device work finished: ref_index = kEnter (or kEnter of the
                  // GroupEnd for grouped ops: every op of group_id on `stream`)
  kAsyncError = 4,  // ncclCommGetAsyncError reported a new error (result)
};
// Whether `kind` is one a writer of this format writes (anything else is garbage).
inline constexpr bool IsKnownRecordKind(uint16_t kind) {
  return kind <= static_cast<uint16_t>(RecordKind::kAsyncError);
}

// Which NCCL entry point. Values are part of the ABI: append only.
enum class ApiFn : uint16_t {
  kNone = 0,
  // Collectives (per-communicator sequence numbers).
  kAllReduce = 1,
  kBroadcast = 2,
  kBcast = 3,
  kReduce = 4,
  kAllGather = 5,
  kReduceScatter = 6,
  kAlltoAll = 7,
  kGather = 8,
  kScatter = 9,
  // Point-to-point (per-(communicator, peer) sequence numbers).
  kSend = 20,
  kRecv = 21,
  // Groups.
  kGroupStart = 30,
  kGroupEnd = 31,
  kGroupSimulateEnd = 32,
  // Communicator lifecycle.
  kCommInitRank = 40,
  kCommInitRankConfig = 41,
  kCommInitAll = 42,
  kCommInitRankScalable = 43,
  kCommSplit = 44,
  kCommShrink = 45,
  kCommFinalize = 46,
  kCommDestroy = 47,
  kCommAbort = 48,
  kCommRevoke = 49,
  kCommGetAsyncError = 50,
  // Queries that start nothing, recorded so every call is accounted for.
  kGetVersion = 60,
  kGetUniqueId = 61,
  kGetErrorString = 62,
};

inline constexpr bool IsCollective(ApiFn fn) {
  return static_cast<uint16_t>(fn) >= 1 && static_cast<uint16_t>(fn) <= 9;
}
inline constexpr bool IsP2p(ApiFn fn) { return fn == ApiFn::kSend || fn == ApiFn::kRecv; }
inline constexpr bool IsCommLifecycle(ApiFn fn) {
  return static_cast<uint16_t>(fn) >= 40 && static_cast<uint16_t>(fn) <= 50;
}
// A communicator made from another: the record's aux0 names its parent.
inline constexpr bool SplitsFromParent(ApiFn fn) { return fn == ApiFn::kCommSplit || fn == ApiFn::kCommShrink; }

// Record flags.
inline constexpr uint8_t kFlagCaptured = 1 << 0;           // stream was capturing a CUDA graph
inline constexpr uint8_t kFlagCompletesAtReturn = 1 << 1;  // no device work: return == completion
inline constexpr uint8_t kFlagUnknownComm = 1 << 2;        // communicator not seen at init
inline constexpr uint8_t kFlagNoCompletion = 1 << 3;       // completion not tracked (pool full)
inline constexpr uint8_t kFlagReturnsInPlace = 1 << 4;     // kEnter: its return comes in place
inline constexpr uint8_t kFlagReturnedWithinTick = 1 << 5;  // returned < 1 tick after enter
// A CUDA graph's replay of a call captured earlier (seen by the profiler plugin): seq
// numbers the communicator's replays in the order they ran, apart from its host calls;
// aux0 is the captured call's seq.
inline constexpr uint8_t kFlagReplay = 1 << 6;
// Flags a return adds; a reader shows them on the kReturn only.
inline constexpr uint8_t kReturnFlags =
    kFlagCompletesAtReturn | kFlagNoCompletion | kFlagReturnedWithinTick;

// One record: 16 words. Field meaning by kind and fn:
//   comm_id      communicator id, equal on all its ranks (0: none / unknown)
//   rank,nranks  this process's rank in the communicator and its size
//   seq          collectives: 1-based sequence number per communicator;
//                p2p: 1-based per (communicator, peer, direction)
//   count        element count as passed (sendcount / recvcount as NCCL defines it)
//   dtype        ncclDataType_t, kNoDtype where none; redop ncclRedOp_t or kUnset
//   root_or_peer root for rooted collectives, peer for p2p, else kUnset
//   group_id     per-thread outermost-group serial (0: not in a group)
//   aux0..aux2   comm init: aux0 = hash of the ncclUniqueId(s);
//                split/shrink: aux0 = parent comm id, aux1 = color (split) or
//                excluded-rank count (shrink), aux2 = child serial under the parent;
//                InitAll: one kReturn per rank of its one communicator, in rank
//                order, aux0 = rank = index in the device list;
//                GetUniqueId (kReturn): aux0 = hash of the id produced;
//                GetVersion (kReturn): aux0 = the version
struct Record {
  uint64_t commit;  // n + 1 once record n is complete; only accessed through CommitWord()
  uint16_t kind;                 // RecordKind
  uint16_t fn;                   // ApiFn
  uint8_t dtype;
  uint8_t flags;
  uint16_t ref_lane;   // kReturn, kComplete: lane of the kEnter it refers to
  int32_t redop;
  int32_t root_or_peer;
  uint64_t comm_id;
  int32_t rank;
  int32_t nranks;
  uint64_t seq;
  uint64_t count;
  uint64_t stream;     // cudaStream_t value as an integer
  uint64_t group_id;
  uint64_t t_ns;       // CLOCK_MONOTONIC: enter / return / completion time by kind
  union {
    uint64_t ref_index;  // kReturn, kComplete: index of the kEnter it refers to
    uint64_t return_ns;  // kEnter returned in place: the return time (see "Return times")
  };
  uint32_t region_id;  // innermost NVTX range of the calling thread (0: none)
  uint32_t tid;        // kernel thread id of the caller
  int32_t result;      // ncclResult_t (kReturn, kAsyncError, kEnter returned in place)
  uint32_t call_path_id;  // kEnter: the calling thread's Python call path (0: none)
  uint64_t aux0;
  uint64_t aux1;
  uint64_t aux2;
};

// Ring file header. Identity fields are written once before `magic`; the live fields
// sit on their own cache lines because writers hit them constantly.
struct Header {
  uint64_t magic;
  uint32_t version;
  uint32_t header_bytes;
  uint32_t record_bytes;
  uint32_t string_slot_bytes;
  uint32_t lane_count;       // lanes, lane 0 shared
  uint32_t lane_header_bytes;
  uint64_t lane_capacity;    // records per lane, a power of two
  uint64_t lanes_offset;
  uint64_t lane_bytes;       // lane_header_bytes + lane_capacity * record_bytes
  uint64_t string_capacity;
  uint64_t strings_offset;
  uint64_t file_bytes;
  int32_t pid;
  int32_t rank;        // RANK at creation, or kUnset
  int32_t local_rank;  // LOCAL_RANK at creation, or kUnset
  int32_t world_size;  // WORLD_SIZE at creation, or kUnset
  uint64_t start_realtime_ns;   // CLOCK_REALTIME and CLOCK_MONOTONIC read together at
  uint64_t start_monotonic_ns;  // creation: convert record times to wall time
  char host[kHostBytes];        // NUL-terminated, truncated
  char job[kJobBytes];          // COLLWATCH_JOB_ID / TORCHELASTIC_RUN_ID / SLURM_JOB_ID
  alignas(64) std::atomic<uint64_t> heartbeat_ns;  // watcher thread, every 100 ms
  std::atomic<uint64_t> dropped;       // records or names the writer could not write
  std::atomic<uint32_t> writer_state;  // WriterState
  // The status the process passed to exit(), as its parent sees it (0-255); kUnset when
  // not recorded. Valid when writer_state is kExited: the writer stores it (relaxed, from
  // an on_exit handler) before it stores kExited (release, from the library's destructor,
  // which runs after every exit handler), so a reader that loads kExited (acquire) sees
  // it. kUnset at creation; stays kUnset for a process that ended without exit() (a
  // signal, a crash, _exit()): its writer_state stays kRunning too.
  std::atomic<int32_t> exit_code;
  // Identity fields added in version 5, on a line of their own.
  alignas(64) uint32_t call_path_slot_bytes;
  uint32_t reserved2;
  uint64_t call_path_capacity;
  uint64_t call_paths_offset;
};

enum class WriterState : uint32_t {
  kRunning = 0,
  kExited = 1,    // process exited normally (exit handlers ran; see Header::exit_code)
  kDisabled = 2,  // recording stopped after an internal failure
};

inline constexpr uint32_t kStringEmpty = 0;
inline constexpr uint32_t kStringWriting = 1;
inline constexpr uint32_t kStringReady = 2;
inline constexpr uint32_t kStringAbandoned = 3;

// The head of a lane, on its own cache line.
struct LaneHeader {
  std::atomic<uint64_t> write_index;  // next record index to reserve in this lane
  std::atomic<uint32_t> owner_tid;    // owning thread (0: free; lane 0 is never owned)
  uint32_t reserved0;
  uint64_t reserved[6];
};

struct StringSlot {
  std::atomic<uint32_t> state;  // kStringEmpty / kStringWriting / kStringReady
  uint32_t length;              // bytes in `text` (no NUL)
  uint64_t hash;                // hash of the full, untruncated name
  char text[kMaxStringBytes];
};

// One frame of a call path: names are string slot ids (0: unknown).
struct CallPathFrame {
  uint32_t file_id;      // the code's file (co_filename)
  uint32_t function_id;  // its qualified function name (co_qualname)
  int32_t line;          // the line being run (0: unknown)
  uint32_t reserved;
};

// A Python call path, innermost frame first. `hash` identifies it in its process (the
// interpreter's code objects and instruction offsets), for interning.
struct CallPathSlot {
  std::atomic<uint32_t> state;  // kStringEmpty / kStringWriting / kStringReady / kStringAbandoned
  uint16_t frame_count;         // frames stored
  uint16_t flags;               // kCallPathTruncated
  uint64_t hash;
  CallPathFrame frames[kMaxCallPathFrames];
};
inline constexpr uint16_t kCallPathTruncated = 1 << 0;  // outer frames past kMaxCallPathFrames left out

static_assert(sizeof(Record) == kRecordBytes, "record is 16 words");
static_assert(sizeof(CallPathSlot) == kCallPathSlotBytes, "call path slot size");
static_assert(offsetof(Record, kind) == 8 && offsetof(Record, aux2) == 120, "record layout");
static_assert(sizeof(StringSlot) == kStringSlotBytes, "string slot size");
static_assert(sizeof(Header) <= kHeaderBytes, "header fits its page");
static_assert(offsetof(Header, heartbeat_ns) % 64 == 0, "live fields on their own line");
static_assert(sizeof(LaneHeader) == kLaneHeaderBytes, "lane header is one cache line");
static_assert(std::atomic_ref<uint64_t>::required_alignment <= alignof(uint64_t),
              "commit words are atomically accessible in place");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared atomics must be lock-free");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared atomics must be lock-free");
static_assert(std::atomic<int32_t>::is_always_lock_free, "shared atomics must be lock-free");
static_assert(sizeof(std::atomic<int32_t>) == 4, "atomic has no hidden state");
static_assert(sizeof(std::atomic<uint64_t>) == 8, "atomic has no hidden state");

// Payload copy for both sides of the seqlock: word-wise relaxed atomic accesses, so a
// reader racing a writer sees a torn copy (and rejects it by `commit`), never UB.
// The commit word of a shared slot, accessed atomically.
inline std::atomic_ref<uint64_t> CommitWord(Record* slot) { return std::atomic_ref<uint64_t>(slot->commit); }
inline std::atomic_ref<uint64_t> CommitWord(const Record* slot) {
  return std::atomic_ref<uint64_t>(const_cast<Record*>(slot)->commit);
}

inline constexpr size_t kPayloadWords = (kRecordBytes - sizeof(uint64_t)) / sizeof(uint64_t);

inline void StorePayload(Record* slot, const Record& from) {
  auto* dst = reinterpret_cast<uint64_t*>(slot) + 1;
  const auto* src = reinterpret_cast<const uint64_t*>(&from) + 1;
  // Hot path of every NCCL call: unrolled, 15 plain stores on x86-64.
#pragma GCC unroll 15
  for (size_t i = 0; i < kPayloadWords; ++i) __atomic_store_n(dst + i, src[i], __ATOMIC_RELAXED);
}

inline void LoadPayload(const Record* slot, Record* to) {
  const auto* src = reinterpret_cast<const uint64_t*>(slot) + 1;
  auto* dst = reinterpret_cast<uint64_t*>(to) + 1;
  for (size_t i = 0; i < kPayloadWords; ++i) dst[i] = __atomic_load_n(src + i, __ATOMIC_RELAXED);
}

inline constexpr uint64_t LaneBytes(uint64_t lane_capacity) {
  return kLaneHeaderBytes + lane_capacity * kRecordBytes;
}

// Bytes of a ring file with the given geometry (header, strings, call paths, lanes).
inline constexpr uint64_t RingFileBytes(uint32_t lanes, uint64_t lane_capacity, uint64_t string_capacity,
                                        uint64_t call_path_capacity) {
  return kHeaderBytes + string_capacity * kStringSlotBytes + call_path_capacity * kCallPathSlotBytes +
         lanes * LaneBytes(lane_capacity);
}

}  // namespace collwatch::ring

#endif  // COLLWATCH_RING_RING_FORMAT_H_
