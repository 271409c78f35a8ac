// The recording core behind the NCCL hooks: turns each wrapped call into ring records
// (kEnter before forwarding, kReturn after, kComplete from the watcher thread), keeps
// communicator identity, sequence numbers and group state.
// Threading: every function may be called from any thread at once; none blocks, throws
// or allocates on the per-call path (communicator creation may allocate once).
#ifndef COLLWATCH_INTERPOSER_RECORDER_H_
#define COLLWATCH_INTERPOSER_RECORDER_H_

#include <cstdint>

#include "interposer/cuda_completion.h"
#include "ring/ring_format.h"

namespace collwatch {

// A call in flight: the hook keeps it on its stack between Begin* and Finish*.
struct PendingCall {
  ring::Record record;       // the kEnter record as written (set by Begin*)
  uint32_t lane = 0;         // its ring lane
  uint64_t enter_index = 0;  // its index in that lane
  uint64_t tick_at_enter = 0;  // the watcher's tick when it entered
  bool recorded = false;     // false: nothing to finish (recording off)
  void* stream = nullptr;    // where device work was enqueued (collectives, p2p)
  const void* comm = nullptr;  // the communicator a teardown call ends
  // NCCL's profiler plugin took over its completion (profiler_plugin.h): the plugin's
  // track of it, which Finish hands back.
  void* profiler_track = nullptr;
};

// Collectives and p2p. `root_or_peer` is ring::kUnset where the op has none.
void BeginCollective(PendingCall* call, ring::ApiFn fn, const void* comm, uint64_t count,
                     int dtype, int redop, int root, void* stream) noexcept;
void BeginP2p(PendingCall* call, ring::ApiFn fn, const void* comm, uint64_t count, int dtype,
              int peer, void* stream) noexcept;

// ncclGroupStart / ncclGroupEnd / ncclGroupSimulateEnd.
void BeginGroup(PendingCall* call, ring::ApiFn fn) noexcept;

// Communicator creation from unique id bytes (InitRank, InitRankConfig, Scalable).
void BeginCommInit(PendingCall* call, ring::ApiFn fn, const void* unique_ids, uint64_t id_bytes,
                   int rank, int nranks) noexcept;
// ncclCommInitAll: the communicators are created inside one process.
void BeginCommInitAll(PendingCall* call, int ndev) noexcept;
// Split (color) and shrink (excluded-rank count) of `parent`.
void BeginCommChild(PendingCall* call, ring::ApiFn fn, const void* parent,
                    int color_or_excluded) noexcept;
// Finalize, destroy, abort, revoke.
void BeginCommTeardown(PendingCall* call, ring::ApiFn fn, const void* comm) noexcept;
// Queries (GetVersion, GetUniqueId, GetErrorString) start nothing: they are recorded
// only once a ring exists, except GetUniqueId, which begins a job's NCCL use.
void BeginQuery(PendingCall* call, ring::ApiFn fn) noexcept;

// Writes the kReturn record; for device work starts completion tracking.
void Finish(PendingCall* call, int result) noexcept;
// Finish variants that also learn the result of the call.
void FinishCommCreated(PendingCall* call, int result, const void* new_comm) noexcept;
void FinishCommInitAll(PendingCall* call, int result, const void* const* comms) noexcept;
void FinishCommTeardown(PendingCall* call, int result) noexcept;
void FinishQuery(PendingCall* call, int result, uint64_t value) noexcept;

// ncclCommGetAsyncError reported `error`: recorded when it differs from the last one
// reported for that communicator and is a real error.
void RecordAsyncError(const void* comm, int error) noexcept;

// ---- For NCCL's profiler plugin (profiler_plugin.cc) --------------------------------
// The ungrouped collective or send/receive whose wrapper this thread is inside (its
// kEnter written, the real call running), or nullptr.
PendingCall* CallInProgress() noexcept;
// A call seen only by the plugin (NCCL loaded libcollwatch.so as its profiler plugin,
// no wrapper ran): its kEnter, with the identity the plugin knows. Records nothing when
// recording is off.
void BeginPluginCall(PendingCall* call, ring::ApiFn fn, uint64_t comm_id, int32_t rank, int32_t nranks,
                     uint64_t seq, uint64_t count, int dtype, int root_or_peer, void* stream,
                     uint8_t flags = 0) noexcept;
// A CUDA graph's replay of the call `captured` (its kEnter at capture): the same call,
// flagged kFlagReplay, numbered `replay_seq` among its communicator's replays.
void BeginPluginReplay(PendingCall* call, const ring::Record& captured, uint64_t replay_seq) noexcept;
// Its kReturn; completion comes from the plugin, unless `launched` is false (NCCL launched
// nothing the plugin will see end: the return says no completion is tracked).
void FinishPluginCall(PendingCall* call, bool launched = true) noexcept;
// What a kComplete record of `call` needs.
CompletionRequest CompletionOf(const PendingCall& call) noexcept;
// A completion the plugin observed at `observed_ns` (MonotonicNs).
void AppendPluginCompletion(const CompletionRequest& request, uint64_t observed_ns) noexcept;

// Stops recording in this process (fork child, internal failure).
void DisableRecording() noexcept;

// Rank and size of a communicator, asked of the real NCCL (set by the hooks file,
// which owns symbol lookup). Return 0 on success.
using CommQuery = int (*)(const void* comm, int* value);
void SetCommQueries(CommQuery user_rank, CommQuery count) noexcept;

}  // namespace collwatch

#endif  // COLLWATCH_INTERPOSER_RECORDER_H_
