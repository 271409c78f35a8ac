// The communicator behind ncclComm_t: identity, mapped segment, per-communicator progress
// counters, user reduction ops, lifetime; and the creation (init) protocol.
// Threading: "operation state" belongs to the one thread running the communicator's
// operations at a time (NCCL's rule); "lifetime" atomics may be used by any thread
// (abort, revoke, error queries). Handles are freed when the last reference goes.
#ifndef COLLWATCH_CPU_NCCL_COMM_H_
#define COLLWATCH_CPU_NCCL_COMM_H_

#include <atomic>
#include <cstdint>

#include "cpu_nccl/nccl_include.h"
#include "cpu_nccl/segment.h"

namespace collwatch::cpu_nccl {

inline constexpr uint64_t kCommMagic = 0x6d6d6f632d757063ull;  // "cpu-comm"

// Lifetime states (ncclComm::state).
inline constexpr uint32_t kCommLive = 0;
inline constexpr uint32_t kCommRevoked = 1;  // ncclCommRevoke: in-flight ops fail
inline constexpr uint32_t kCommAborted = 2;  // ncclCommAbort/Destroy ran

// Init stages (ncclComm::init_stage).
enum InitStage : uint8_t {
  kInitOpen = 0,
  kInitWaitMagic,
  kInitClaim,
  kInitWaitAll,
  kInitWaitUnlink,
  kInitDone,
  kInitHung,
};

// A PreMulSum op made by ncclRedOpCreatePreMulSum.
struct UserRedOp {
  bool live;
  bool scalar_is_ptr;  // ncclScalarDevice: read through `scalar` when the op runs
  int dtype;
  uint64_t scalar;  // the value's bytes (ncclScalarHostImmediate) or the pointer
};

// A blocked_on value: nothing to sleep on yet (no slot claimed); poll after a short sleep.
inline constexpr int32_t kPoll = -4;

// Status of one progress call on a task.
enum class Status : uint8_t { kDone, kBlocked, kFailed };

}  // namespace collwatch::cpu_nccl

struct ncclComm {
  std::atomic<uint64_t> magic;  // kCommMagic while the handle is valid
  int rank;
  int nranks;
  uint64_t key;    // names the segment; equal on every rank
  int spin;        // polls before sleeping (COLLWATCH_CPU_NCCL_SPIN)
  bool mismatch_completes;  // COLLWATCH_CPU_NCCL_MISMATCH=complete
  bool blocking;   // config->blocking (kept for the record: every call completes)
  char path[256];  // segment file
  collwatch::cpu_nccl::Segment seg;
  collwatch::cpu_nccl::InitStage init_stage;

  // Operation state.
  uint64_t coll_seq;             // collectives started
  uint64_t step;                 // this rank's published step (mirror of RankControl::step)
  uint64_t chunks;               // collective chunks started: chunk c uses slot c % 2
  uint64_t chunk_first_step[2];  // step of the first phase of the latest chunks, by parity
  uint64_t child_serial;         // splits and shrinks of this communicator
  const void** srcs;             // nranks pointers: scratch for reductions
  collwatch::cpu_nccl::UserRedOp* redops;
  int redop_capacity;

  // Lifetime.
  std::atomic<uint32_t> state;     // kCommLive / kCommRevoked / kCommAborted
  std::atomic<bool> slot_claimed;  // the segment is mapped and this rank's slot claimed
  std::atomic<bool> ready;         // init completed (ncclCommGetAsyncError from any thread)
  std::atomic<int32_t> running;    // engines currently running tasks of this communicator
  std::atomic<int32_t> refs;       // the handle plus queued tasks and running calls
  std::atomic<bool> handle_gone;   // the handle's reference was dropped (once)
  // CUDA mode: tasks enqueued on streams and not yet completed (or failed); host-buffer
  // calls wait for zero, so that one thread at a time runs the communicator's operations.
  std::atomic<int32_t> device_tasks;
  std::atomic<int32_t> async_error;  // ncclResult_t of a failed stream operation, or 0

  // The profiler plugin's (profiler.h): its context, and NCCL's per-function seqNumber
  // counters of Coll events (Broadcast, Reduce, AllGather, ReduceScatter, AllReduce).
  void* profiler_context;
  bool profiler_context_set;
  uint64_t profiler_seq[5];
};

namespace collwatch::cpu_nccl {

// A communicator object for (rank, nranks, key), not yet attached; refs = 1 (the handle).
// nullptr when memory runs out or the path does not fit.
ncclComm* NewComm(int rank, int nranks, uint64_t key) noexcept;

// True for a live handle made by NewComm and not destroyed.
inline bool CommValid(const ncclComm* comm) noexcept {
  return comm != nullptr && comm->magic.load(std::memory_order_relaxed) == kCommMagic;
}

void RetainComm(ncclComm* comm) noexcept;
void ReleaseComm(ncclComm* comm) noexcept;  // frees (and unmaps) at the last reference

// Invalidates the handle and drops its reference; later calls do nothing (abort and a
// failing init may race to do it).
void ReleaseHandle(ncclComm* comm) noexcept;

// Marks the communicator `new_state` (revoked or aborted), wakes its operations blocked in
// this process and waits until none runs any more.
void InterruptComm(ncclComm* comm, uint32_t new_state) noexcept;

// One step of the creation protocol of shm_layout.h. On kBlocked, *blocked_on holds the
// rank whose progress would help (or a kWait*/kPoll value).
Status ProgressInit(ncclComm* comm, int32_t* blocked_on, bool* moved,
                    ncclResult_t* error) noexcept;

// Keys of children: the same on every member (parent key, split counter, color or the
// excluded ranks), distinct from any other communicator with overwhelming probability.
uint64_t SplitChildKey(uint64_t parent_key, uint64_t serial, int color) noexcept;
uint64_t ShrinkChildKey(uint64_t parent_key, uint64_t serial, const int* excluded,
                        int nexcluded) noexcept;

}  // namespace collwatch::cpu_nccl

#endif  // COLLWATCH_CPU_NCCL_COMM_H_
