// The recording core's per-call path: the records of each call (kEnter, kReturn, in place
// where possible; kComplete for the watcher), communicator identity and sequence numbers,
// groups and their streams. The ring's creation and the watcher thread: recorder_lifecycle.cc.
// Threading: see recorder.h. Per-thread group state lives in initial-exec TLS.
#include "interposer/recorder.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "interposer/agent_spawn.h"
#include "interposer/clock.h"
#include "interposer/comm_registry.h"
#include "interposer/config.h"
#include "interposer/cuda_completion.h"
#include "interposer/profiler_plugin.h"
#include "interposer/recorder_internal.h"
#include "interposer/call_paths.h"
#include "interposer/regions.h"
#include "interposer/ring_writer.h"
#include "ring/hash.h"

#define COLLWATCH_TLS __attribute__((tls_model("initial-exec"))) thread_local
// The per-call path is a handful of small helpers: keep it one straight function.
#define COLLWATCH_HOT inline __attribute__((always_inline))

namespace collwatch {

// Constant-initialised (see recorder_internal.h): hooks may run before any dynamic initialiser.
constinit std::atomic<int> g_recorder_state{kUninitialised};
constinit RingWriter* g_recorder_ring = nullptr;
constinit Config g_recorder_config;
alignas(64) constinit std::atomic<uint64_t> g_recorder_tick{0};
constinit pthread_key_t g_lane_key;

namespace {

using ring::ApiFn;
using ring::Record;
using ring::RecordKind;

// ncclResult_t values used here (nccl.h).
constexpr int kNcclSuccess = 0;
constexpr int kNcclInProgress = 7;

std::atomic<uint64_t> g_group_serial{0};
std::atomic<uint64_t> g_init_all_serial{0};
CommQuery g_comm_user_rank = nullptr;
CommQuery g_comm_count = nullptr;

// Per-thread group state: the open outermost group and the streams its ops used.
constexpr int kGroupStreams = 8;
struct ThreadState {
  const void* last_comm_handle;  // one-entry cache in front of FindComm
  CommState* last_comm;
  uint32_t tid;
  uint32_t lane;       // ring lane of this thread (RingWriter::kSharedLane until claimed)
  bool lane_claimed;
  int32_t group_depth;
  uint64_t group_id;
  uint32_t group_stream_count;
  bool group_streams_overflow;
  void* group_streams[kGroupStreams];
};
COLLWATCH_TLS ThreadState t_thread{};
// The ungrouped collective or send/receive whose real call this thread is inside: what
// NCCL's profiler plugin, called from within it, ties its events to (CallInProgress).
COLLWATCH_TLS PendingCall* t_call_in_progress = nullptr;

COLLWATCH_HOT uint32_t ThreadId() noexcept {
  if (t_thread.tid == 0) t_thread.tid = static_cast<uint32_t>(syscall(SYS_gettid));
  return t_thread.tid;
}

__attribute__((noinline)) void ClaimLane(ThreadState& thread) noexcept {
  thread.lane = g_recorder_ring->ClaimLane(ThreadId());
  thread.lane_claimed = true;
  if (thread.lane != RingWriter::kSharedLane) {
    pthread_setspecific(g_lane_key, reinterpret_cast<void*>(uintptr_t{thread.lane} + 1));
  }
}

// The calling thread's lane, claimed on its first record.
COLLWATCH_HOT uint32_t ThreadLane() noexcept {
  ThreadState& thread = t_thread;
  if (!thread.lane_claimed) [[unlikely]] ClaimLane(thread);
  return thread.lane;
}

// Calls whose return changes nothing but result and flags can return in place.
constexpr bool ReturnsInPlace(ApiFn fn) {
  return ring::IsCollective(fn) || ring::IsP2p(fn) || fn == ApiFn::kGroupStart ||
         fn == ApiFn::kGroupEnd || fn == ApiFn::kGroupSimulateEnd;
}

// True when records may be written; the first caller creates the ring.
COLLWATCH_HOT bool Ready(bool may_create) noexcept {
  if (g_recorder_state.load(std::memory_order_acquire) == kRecording) [[likely]] return true;
  return ReadySlow(may_create);
}

// Sets every field of a kEnter record (no zero-fill first: this is the hot path).
COLLWATCH_HOT void InitRecord(Record* record, ApiFn fn) noexcept {
  record->commit = 0;
  record->kind = static_cast<uint16_t>(RecordKind::kEnter);
  record->fn = static_cast<uint16_t>(fn);
  record->dtype = ring::kNoDtype;
  record->flags = 0;
  record->ref_lane = 0;
  record->redop = ring::kUnset;
  record->root_or_peer = ring::kUnset;
  record->comm_id = 0;
  record->rank = ring::kUnset;
  record->nranks = ring::kUnset;
  record->seq = 0;
  record->count = 0;
  record->stream = 0;
  record->group_id = t_thread.group_id;
  record->t_ns = 0;
  record->ref_index = 0;
  record->region_id = CurrentRegionId();
  record->tid = ThreadId();
  record->result = 0;
  record->call_path_id = CurrentCallPathId();
  record->aux0 = 0;
  record->aux1 = 0;
  record->aux2 = 0;
}

COLLWATCH_HOT void WriteEnter(PendingCall* call) noexcept {
  call->lane = ThreadLane();
  if (call->lane != RingWriter::kSharedLane &&
      ReturnsInPlace(static_cast<ApiFn>(call->record.fn))) {
    call->record.flags |= ring::kFlagReturnsInPlace;
  }
  call->record.t_ns = MonotonicNs();
  call->tick_at_enter = g_recorder_tick.load(std::memory_order_relaxed);
  call->enter_index = g_recorder_ring->Append(call->lane, call->record);
  call->recorded = true;
}

void AskShape(CommState* comm) noexcept {
  int rank = -1;
  int count = -1;
  if (g_comm_user_rank != nullptr && g_comm_count != nullptr &&
      g_comm_user_rank(comm->handle, &rank) == 0 && g_comm_count(comm->handle, &count) == 0) {
    SetShape(comm, rank, count);
  }
}

// A communicator first seen in a call (created before the preload could see it): its id
// cannot be matched across ranks, so it is made unique to this process and flagged.
CommState* AdoptUnknownComm(const void* handle) noexcept {
  static const uint64_t process_key = HashCombine(Mix64(static_cast<uint64_t>(getpid())),
                                                  MonotonicNs());
  CommState* comm = RegisterComm(handle, HashCombine(process_key, reinterpret_cast<uintptr_t>(handle)),
                                 -1, -1, /*known_at_init=*/false);
  if (comm != nullptr) AskShape(comm);
  return comm;
}

COLLWATCH_HOT CommState* CommFor(const void* handle, Record* record) noexcept {
  ThreadState& thread = t_thread;
  CommState* comm = thread.last_comm;
  if (thread.last_comm_handle != handle || comm == nullptr ||
      !comm->alive.load(std::memory_order_relaxed)) {
    comm = FindComm(handle);
    if (comm == nullptr && handle != nullptr) comm = AdoptUnknownComm(handle);
    thread.last_comm_handle = handle;
    thread.last_comm = comm;
  }
  if (comm == nullptr) {
    record->flags |= ring::kFlagUnknownComm;
    return nullptr;
  }
  if (comm->rank.load(std::memory_order_relaxed) < 0) AskShape(comm);  // split child, late
  if (!comm->known_at_init) record->flags |= ring::kFlagUnknownComm;
  record->comm_id = comm->id;
  record->rank = comm->rank.load(std::memory_order_relaxed);
  record->nranks = comm->nranks.load(std::memory_order_relaxed);
  return comm;
}

COLLWATCH_HOT void BeginDeviceWork(PendingCall* call, void* stream) noexcept {
  call->stream = stream;
  call->record.stream = reinterpret_cast<uint64_t>(stream);
  if (IsCapturing(stream)) call->record.flags |= ring::kFlagCaptured;
  if (t_thread.group_depth > 0) {
    ThreadState& thread = t_thread;
    bool known = false;
    for (uint32_t i = 0; i < thread.group_stream_count && !known; ++i) {
      known = thread.group_streams[i] == stream;
    }
    if (!known && thread.group_stream_count < kGroupStreams) {
      thread.group_streams[thread.group_stream_count++] = stream;
    } else if (!known) {
      thread.group_streams_overflow = true;
    }
  }
}

// Records the call's return: into its kEnter's slot where it was written to return in
// place, else as a kReturn record made from the kEnter.
COLLWATCH_HOT void AppendReturn(PendingCall* call, int result, uint8_t extra_flags) noexcept {
  Record& record = call->record;
  record.flags |= extra_flags;
  if (record.flags & ring::kFlagReturnsInPlace) {
    uint64_t return_ns = record.t_ns;
    if (g_recorder_tick.load(std::memory_order_relaxed) == call->tick_at_enter) {
      record.flags |= ring::kFlagReturnedWithinTick;
    } else {
      return_ns = MonotonicNs();
    }
    g_recorder_ring->ReturnInPlace(call->lane, call->enter_index, return_ns, result, record.flags);
    return;
  }
  record.kind = static_cast<uint16_t>(RecordKind::kReturn);
  record.result = result;
  record.ref_lane = static_cast<uint16_t>(call->lane);
  record.ref_index = call->enter_index;
  record.t_ns = MonotonicNs();
  g_recorder_ring->Append(call->lane, record);
}

}  // namespace

CompletionRequest CompletionOf(const PendingCall& call) noexcept {
  CompletionRequest request;
  request.lane = static_cast<uint16_t>(call.lane);
  request.ref_index = call.enter_index;
  request.group_id = call.record.group_id;
  request.comm_id = call.record.comm_id;
  request.seq = call.record.seq;
  request.fn = call.record.fn;
  return request;
}

namespace {

// How the end of device work will be known, for an op (or a whole group) that was just
// enqueued: by a CUDA event, or already (no device: the return is the completion).
COLLWATCH_HOT uint8_t TrackCompletion(const PendingCall& call, void* const* streams, uint32_t stream_count,
                        bool overflow) noexcept {
  if (!g_recorder_config.completion) return ring::kFlagNoCompletion;
  if (!CudaPresent()) return ring::kFlagCompletesAtReturn;
  if (call.record.flags & ring::kFlagCaptured) return 0;  // runs at graph replay: unknown
  uint8_t flags = overflow ? ring::kFlagNoCompletion : 0;
  for (uint32_t i = 0; i < stream_count; ++i) {
    if (TrackAfter(streams[i], CompletionOf(call)) != Tracking::kTracked) {
      flags |= ring::kFlagNoCompletion;
      g_recorder_ring->CountDropped();
    }
  }
  return flags;
}

}  // namespace

void AppendCompletion(const CompletionRequest& request, uint64_t observed_ns,
                      int32_t cuda_status) noexcept {
  Record record{};
  record.kind = static_cast<uint16_t>(RecordKind::kComplete);
  record.fn = request.fn;
  record.dtype = ring::kNoDtype;
  record.redop = ring::kUnset;
  record.root_or_peer = ring::kUnset;
  record.rank = ring::kUnset;
  record.nranks = ring::kUnset;
  record.comm_id = request.comm_id;
  record.seq = request.seq;
  record.stream = request.stream;
  record.group_id = request.group_id;
  record.ref_lane = request.lane;
  record.ref_index = request.ref_index;
  record.t_ns = observed_ns;
  record.result = cuda_status;
  g_recorder_ring->Append(ThreadLane(), record);
}

PendingCall* CallInProgress() noexcept { return t_call_in_progress; }

void BeginPluginCall(PendingCall* call, ApiFn fn, uint64_t comm_id, int32_t rank, int32_t nranks, uint64_t seq,
                     uint64_t count, int dtype, int root_or_peer, void* stream, uint8_t flags) noexcept {
  if (!Ready(/*may_create=*/true)) return;
  InitRecord(&call->record, fn);
  Record& record = call->record;
  record.flags = flags;
  record.comm_id = comm_id;
  record.rank = rank;
  record.nranks = nranks;
  record.seq = seq;
  record.count = count;
  record.dtype = static_cast<uint8_t>(dtype);
  record.root_or_peer = root_or_peer;
  record.stream = reinterpret_cast<uint64_t>(stream);
  call->stream = stream;
  WriteEnter(call);
}

void BeginPluginReplay(PendingCall* call, const Record& captured, uint64_t replay_seq) noexcept {
  if (!Ready(/*may_create=*/false)) return;
  // The capture's identity, region and call path: the replay runs that code's collective.
  Record& record = call->record;
  record = captured;
  record.commit = 0;
  record.kind = static_cast<uint16_t>(RecordKind::kEnter);
  record.flags = static_cast<uint8_t>(ring::kFlagReplay | (captured.flags & ring::kFlagUnknownComm));
  record.seq = replay_seq;
  record.aux0 = captured.seq;
  record.group_id = 0;
  record.ref_index = 0;
  record.result = 0;
  record.tid = ThreadId();
  call->stream = reinterpret_cast<void*>(captured.stream);
  WriteEnter(call);
}

void FinishPluginCall(PendingCall* call, bool launched) noexcept {
  if (!call->recorded || g_recorder_state.load(std::memory_order_relaxed) != kRecording) return;
  AppendReturn(call, kNcclSuccess, launched ? 0 : ring::kFlagNoCompletion);
}

void AppendPluginCompletion(const CompletionRequest& request, uint64_t observed_ns) noexcept {
  if (g_recorder_state.load(std::memory_order_acquire) != kRecording) return;
  AppendCompletion(request, observed_ns, 0);
}

void SetCommQueries(CommQuery user_rank, CommQuery count) noexcept {
  g_comm_user_rank = user_rank;
  g_comm_count = count;
}

void BeginCollective(PendingCall* call, ApiFn fn, const void* comm, uint64_t count, int dtype,
                     int redop, int root, void* stream) noexcept {
  if (!Ready(/*may_create=*/true)) return;
  InitRecord(&call->record, fn);
  Record& record = call->record;
  if (CommState* state = CommFor(comm, &record)) {
    // NCCL forbids concurrent calls on one communicator, so no atomic increment needed.
    record.seq = state->collective_seq.load(std::memory_order_relaxed) + 1;
    state->collective_seq.store(record.seq, std::memory_order_relaxed);
  }
  record.count = count;
  record.dtype = static_cast<uint8_t>(dtype);
  record.redop = redop;
  record.root_or_peer = root;
  BeginDeviceWork(call, stream);
  WriteEnter(call);
  if (record.group_id == 0) t_call_in_progress = call;
}

void BeginP2p(PendingCall* call, ApiFn fn, const void* comm, uint64_t count, int dtype, int peer,
              void* stream) noexcept {
  if (!Ready(/*may_create=*/true)) return;
  InitRecord(&call->record, fn);
  Record& record = call->record;
  if (CommState* state = CommFor(comm, &record)) {
    record.seq = fn == ApiFn::kSend ? state->NextSendSeq(peer) : state->NextRecvSeq(peer);
  }
  record.count = count;
  record.dtype = static_cast<uint8_t>(dtype);
  record.root_or_peer = peer;
  BeginDeviceWork(call, stream);
  WriteEnter(call);
  if (record.group_id == 0) t_call_in_progress = call;
}

void BeginGroup(PendingCall* call, ApiFn fn) noexcept {
  if (!Ready(/*may_create=*/true)) return;
  ThreadState& thread = t_thread;
  if (fn == ApiFn::kGroupStart && thread.group_depth++ == 0) {
    thread.group_id = g_group_serial.fetch_add(1, std::memory_order_relaxed) + 1;
    thread.group_stream_count = 0;
    thread.group_streams_overflow = false;
  }
  InitRecord(&call->record, fn);
  call->record.aux0 = static_cast<uint64_t>(thread.group_depth);
  WriteEnter(call);
}

// The first communicator init of the process may start the node's agent.
void SpawnAgentOnce() noexcept {
  static std::atomic<bool> tried{false};
  if (!tried.exchange(true, std::memory_order_acq_rel)) MaybeSpawnAgent(g_recorder_config);
}

void BeginCommInit(PendingCall* call, ApiFn fn, const void* unique_ids, uint64_t id_bytes,
                   int rank, int nranks) noexcept {
  if (!Ready(/*may_create=*/true)) return;
  SpawnAgentOnce();
  InitRecord(&call->record, fn);
  const uint64_t id = Hash64(unique_ids, id_bytes);
  call->record.comm_id = id;
  call->record.aux0 = id;
  call->record.rank = rank;
  call->record.nranks = nranks;
  WriteEnter(call);
}

void BeginCommInitAll(PendingCall* call, int ndev) noexcept {
  if (!Ready(/*may_create=*/true)) return;
  SpawnAgentOnce();
  InitRecord(&call->record, ApiFn::kCommInitAll);
  call->record.nranks = ndev;
  // Every rank of an InitAll's communicator lives in this process: a process-unique id
  // suffices.
  call->record.comm_id = HashCombine(
      HashCombine(Mix64(static_cast<uint64_t>(getpid())), MonotonicNs()),
      g_init_all_serial.fetch_add(1, std::memory_order_relaxed));
  WriteEnter(call);
}

void BeginCommChild(PendingCall* call, ApiFn fn, const void* parent,
                    int color_or_excluded) noexcept {
  if (!Ready(/*may_create=*/true)) return;
  InitRecord(&call->record, fn);
  Record& record = call->record;
  CommState* state = CommFor(parent, &record);
  const uint64_t parent_id = record.comm_id;
  // Every member of the parent splits in the same order, so (parent id, serial, color)
  // names the child identically on all of its ranks, as NCCL itself derives it.
  const uint64_t serial =
      state != nullptr ? state->child_serial.fetch_add(1, std::memory_order_relaxed) + 1 : 0;
  record.aux0 = parent_id;
  record.aux1 = static_cast<uint64_t>(static_cast<int64_t>(color_or_excluded));
  record.aux2 = serial;
  record.comm_id = HashCombine(HashCombine(HashCombine(parent_id, static_cast<uint64_t>(fn)),
                                           serial),
                               record.aux1);
  record.rank = ring::kUnset;
  record.nranks = ring::kUnset;
  WriteEnter(call);
}

void BeginCommTeardown(PendingCall* call, ApiFn fn, const void* comm) noexcept {
  if (!Ready(/*may_create=*/true)) return;
  InitRecord(&call->record, fn);
  CommFor(comm, &call->record);
  call->comm = comm;
  WriteEnter(call);
}

void BeginQuery(PendingCall* call, ApiFn fn) noexcept {
  if (!Ready(/*may_create=*/fn == ApiFn::kGetUniqueId)) return;
  InitRecord(&call->record, fn);
  WriteEnter(call);
}

void Finish(PendingCall* call, int result) noexcept {
  t_call_in_progress = nullptr;
  if (!call->recorded || g_recorder_state.load(std::memory_order_relaxed) != kRecording) return;
  const auto fn = static_cast<ApiFn>(call->record.fn);
  ThreadState& thread = t_thread;
  uint8_t flags = 0;
  // ncclInProgress: a non-blocking communicator enqueues later; an event now would
  // complete before the work exists, so such work is not tracked.
  const bool enqueued = result == kNcclSuccess;
  if (ring::IsCollective(fn) || ring::IsP2p(fn)) {
    // The profiler plugin completes what NCCL launched: no CUDA event needed.
    const bool plugin_completes = call->profiler_track != nullptr &&
                                  ProfilerTrackFromWrapper(call->profiler_track, enqueued);
    if (call->record.group_id == 0 && !plugin_completes) {
      flags = enqueued ? TrackCompletion(*call, &call->stream, 1, false) : ring::kFlagNoCompletion;
    }
  } else if (fn == ApiFn::kGroupEnd || fn == ApiFn::kGroupSimulateEnd) {
    if (thread.group_depth > 0 && --thread.group_depth == 0) {
      if (fn == ApiFn::kGroupEnd && enqueued) {
        flags = TrackCompletion(*call, thread.group_streams, thread.group_stream_count,
                                thread.group_streams_overflow);
      } else {
        flags = ring::kFlagNoCompletion;  // simulated or failed: nothing will run
      }
      thread.group_id = 0;
    }
  }
  AppendReturn(call, result, flags);
}

void FinishCommCreated(PendingCall* call, int result, const void* new_comm) noexcept {
  if (!call->recorded) return;
  const auto fn = static_cast<ApiFn>(call->record.fn);
  // ncclInProgress still hands out a valid handle (non-blocking init).
  if ((result == kNcclSuccess || result == kNcclInProgress) && new_comm != nullptr) {
    CommState* comm = RegisterComm(new_comm, call->record.comm_id, call->record.rank,
                                   call->record.nranks, /*known_at_init=*/true);
    if (comm != nullptr && ring::SplitsFromParent(fn)) {
      AskShape(comm);
      call->record.rank = comm->rank.load(std::memory_order_relaxed);
      call->record.nranks = comm->nranks.load(std::memory_order_relaxed);
    }
  }
  if (new_comm == nullptr) call->record.comm_id = 0;  // e.g. split with NCCL_SPLIT_NOCOLOR
  ProbeCuda();  // the job has set up its device by now
  Finish(call, result);
}

void FinishCommInitAll(PendingCall* call, int result, const void* const* comms) noexcept {
  if (!call->recorded) return;
  const int ndev = call->record.nranks;
  const uint64_t base_id = call->record.comm_id;
  for (int i = 0; i < ndev && result == kNcclSuccess && comms != nullptr; ++i) {
    // The handles are ranks 0..ndev-1 of one communicator: one id, as on every rank of
    // a communicator (the analyzer aligns them with each other).
    PendingCall per_comm = *call;
    per_comm.record.comm_id = base_id;
    per_comm.record.rank = i;
    per_comm.record.aux0 = static_cast<uint64_t>(i);
    RegisterComm(comms[i], base_id, i, ndev, /*known_at_init=*/true);
    AppendReturn(&per_comm, result, 0);
  }
  if (result != kNcclSuccess) AppendReturn(call, result, 0);
  ProbeCuda();
}

void FinishCommTeardown(PendingCall* call, int result) noexcept {
  if (!call->recorded) return;
  const auto fn = static_cast<ApiFn>(call->record.fn);
  if (result == kNcclSuccess && (fn == ApiFn::kCommDestroy || fn == ApiFn::kCommAbort)) {
    if (CommState* comm = FindComm(call->comm)) RetireComm(comm);
  }
  AppendReturn(call, result, 0);
}

void FinishQuery(PendingCall* call, int result, uint64_t value) noexcept {
  if (!call->recorded) return;
  call->record.aux0 = value;
  AppendReturn(call, result, 0);
}

void RecordAsyncError(const void* comm, int error) noexcept {
  if (error == kNcclSuccess || error == kNcclInProgress || !Ready(/*may_create=*/false)) return;
  CommState* state = FindComm(comm);
  if (state != nullptr &&
      state->last_async_error.exchange(error, std::memory_order_relaxed) == error) {
    return;  // already reported
  }
  Record record;
  InitRecord(&record, ApiFn::kCommGetAsyncError);
  record.kind = static_cast<uint16_t>(RecordKind::kAsyncError);
  CommFor(comm, &record);
  record.result = error;
  record.t_ns = MonotonicNs();
  g_recorder_ring->Append(ThreadLane(), record);
}

}  // namespace collwatch
