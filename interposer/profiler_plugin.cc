// The plugin's tracks: one per call whose completion it follows, from a fixed pool; NCCL's
// handles point into them (one handle per event level, so that stop_event knows which).
// Versions 1 to 4 are adapted at their entry points into one internal form of a launch
// event (profiler_launch_event.h); what follows from it is shared by every version.
#include "interposer/profiler_plugin.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "interposer/clock.h"
#include "interposer/profiler_launch_event.h"
#include "interposer/recorder.h"
#include "ring/nccl_profiler_abi.h"

namespace collwatch {
namespace {

namespace abi = nccl_profiler;
using ring::ApiFn;

// A communicator NCCL initialised the plugin for: the identity a call seen only by the
// plugin is recorded with (NCCL's hash of the unique id: equal on every rank). Versions 1
// to 3 init without it: each launch event names the hash and the rank, nothing the size.
struct PluginComm {
  uint64_t comm_id = 0;   // 0: from each event (v1..v3)
  int32_t rank = -1;      // -1: from each event (v1..v3)
  int32_t nranks = ring::kUnset;
  std::atomic<uint64_t> collective_seq{0};
  std::atomic<uint64_t> replay_seq{0};  // its collectives replayed from CUDA graphs
  int32_t peers = 0;  // entries of the tables below
  std::atomic<uint64_t>* send_seq = nullptr;  // per peer
  std::atomic<uint64_t>* recv_seq = nullptr;
};
// Per-peer numbering of a communicator whose size NCCL does not say (v1..v3): peers past
// this many are recorded with sequence number 0 (unknown).
constexpr int32_t kPeersOfUnknownSize = 1024;

struct Track;
struct CapturedCall;
enum class Level : uint8_t { kGroupApi, kApi, kCaptured, kOp, kChannel };
struct Handle {
  Level level;
  Track* track;
  CapturedCall* captured = nullptr;  // kCaptured
};

// A collective captured into a CUDA graph. At every replay of the graph NCCL names the
// handle returned for its API event as the parent of its Coll event, from a CUDA host
// callback (when the plan has proxy work, which asking for KernelCh events gives every
// plan), and never says when the graph is destroyed: kept for the life of the process.
struct CapturedCall {
  Handle api{Level::kCaptured, nullptr, this};
  PluginComm* comm = nullptr;
  ring::Record identity{};  // the capture's kEnter: what each replay repeats
};
// Captures a process may make; past them, later captures' replays are not recorded.
constexpr size_t kCapturedCalls = 16384;
CapturedCall* g_captured = nullptr;
std::atomic<size_t> g_captured_used{0};
std::atomic<int> g_captured_state{0};  // 0: not allocated, 1: allocating, 2: ready, 3: failed

struct Track {
  std::atomic<uint32_t> holds{0};  // 0: free; the wrapper and NCCL's events hold one each
  Handle api{Level::kApi, this};
  Handle op{Level::kOp, this};
  Handle channel{Level::kChannel, this};
  bool plugin_only = false;
  bool returns_at_launch_stop = false;  // plugin only, v1..v4: its launch event's stop returns it
  PluginComm* comm = nullptr;
  PendingCall call;           // plugin only: the call it records
  CompletionRequest request;  // what its kComplete answers
  // Plugin only, send/receive: kept from the API event until the peer is known.
  ApiFn fn = ApiFn::kNone;
  uint64_t count = 0;
  int dtype = -1;
  void* stream = nullptr;
  std::atomic<int> channels_expected{-1};  // set when NCCL launches it
  std::atomic<int> channels_done{0};
  std::atomic<bool> wrapper_tracks{false};  // the wrapper fell back to a CUDA event
  std::atomic<bool> completed{false};
};

// Plugin only: the collectives of this thread's open GroupApi event (the user's call, or
// group), whose returns wait for its end: by then NCCL has launched what it will launch.
constexpr int kOpenCalls = 64;
thread_local Handle t_group_api{Level::kGroupApi, nullptr};
thread_local Track* t_open_calls[kOpenCalls];
thread_local int t_open_call_count = 0;

constexpr size_t kTracks = 8192;
Track* g_tracks = nullptr;
std::atomic<size_t> g_cursor{0};
std::atomic<bool> g_pool_ready{false};
// Whether this process calls NCCL through our wrappers (LD_PRELOAD): then the wrappers
// write every kEnter, and the plugin only completes what they began.
std::atomic<int> g_wrapped{-1};

bool Wrapped() noexcept {
  int wrapped = g_wrapped.load(std::memory_order_acquire);
  if (wrapped < 0) {
    // Our own ncclAllReduce, looked up in this library, against the one the process sees.
    Dl_info self{};
    void* library = nullptr;
    if (dladdr(reinterpret_cast<const void*>(&Wrapped), &self) != 0 && self.dli_fname != nullptr) {
      library = dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    }
    const void* ours = library != nullptr ? dlsym(library, "ncclAllReduce") : nullptr;
    wrapped = ours != nullptr && ours == dlsym(RTLD_DEFAULT, "ncclAllReduce") ? 1 : 0;
    if (library != nullptr) dlclose(library);
    g_wrapped.store(wrapped, std::memory_order_release);
  }
  return wrapped == 1;
}

Track* Allocate(uint32_t holds) noexcept {
  if (!g_pool_ready.load(std::memory_order_acquire)) return nullptr;
  for (size_t tries = 0; tries < kTracks; ++tries) {
    Track& track = g_tracks[g_cursor.fetch_add(1, std::memory_order_relaxed) % kTracks];
    uint32_t free = 0;
    if (!track.holds.compare_exchange_strong(free, holds, std::memory_order_acq_rel)) continue;
    track.plugin_only = false;
    track.returns_at_launch_stop = false;
    track.comm = nullptr;
    track.call = PendingCall{};
    track.request = CompletionRequest{};
    track.fn = ApiFn::kNone;
    track.channels_expected.store(-1, std::memory_order_relaxed);
    track.channels_done.store(0, std::memory_order_relaxed);
    track.wrapper_tracks.store(false, std::memory_order_relaxed);
    track.completed.store(false, std::memory_order_release);
    return &track;
  }
  return nullptr;  // exhausted: the calls go without the plugin
}

void Release(Track* track) noexcept { track->holds.fetch_sub(1, std::memory_order_acq_rel); }

void Complete(Track* track) noexcept {
  if (track->completed.exchange(true, std::memory_order_acq_rel)) return;
  if (!track->wrapper_tracks.load(std::memory_order_acquire)) AppendPluginCompletion(track->request, MonotonicNs());
  Release(track);  // NCCL's events are over
}

// NCCL launched the track's call on `channels` channels: complete when each has stopped.
void ExpectChannels(Track* track, int channels) noexcept {
  track->channels_expected.store(channels, std::memory_order_release);
  if (channels == 0) Complete(track);  // nothing runs on a channel: done once launched
}

// A send's or receive's number: per communicator, peer and direction, from 1 (0: unknown).
uint64_t NextP2pSeq(PluginComm* comm, ApiFn fn, int peer) noexcept {
  std::atomic<uint64_t>* table = fn == ApiFn::kSend ? comm->send_seq : comm->recv_seq;
  if (peer < 0 || peer >= comm->peers || table == nullptr) return 0;
  return table[peer].fetch_add(1, std::memory_order_relaxed) + 1;
}

// A fresh entry of the grow-only pool of captured calls (nullptr: exhausted). The pool is
// allocated at the process's first capture, off the per-call path of uncaptured calls.
CapturedCall* AllocateCaptured() noexcept {
  int state = g_captured_state.load(std::memory_order_acquire);
  if (state == 0 && g_captured_state.compare_exchange_strong(state, 1, std::memory_order_acq_rel)) {
    g_captured = new (std::nothrow) CapturedCall[kCapturedCalls];
    state = g_captured != nullptr ? 2 : 3;
    g_captured_state.store(state, std::memory_order_release);
  }
  if (state != 2) return nullptr;  // failed, or another thread is allocating it right now
  const size_t index = g_captured_used.fetch_add(1, std::memory_order_relaxed);
  return index < kCapturedCalls ? &g_captured[index] : nullptr;
}

// The API event of a collective made while its stream is captured into a CUDA graph: its
// handle, kept for the graph's replays. With the preload the wrapper recorded the capture
// (only an ungrouped call, the wrapper's call in progress, can be tied to it); alone the
// plugin records it, flagged captured, its return at once (nothing runs until a replay).
void* Capture(PluginComm* comm, const abi::EventDescr& descr) noexcept {
  if (comm == nullptr || descr.type != abi::kCollApi) return nullptr;  // sends and receives: not followed
  const ApiFn fn = CollectiveFn(descr.coll_api.func);
  if (fn == ApiFn::kNone) return nullptr;
  ring::Record identity{};
  if (Wrapped()) {
    const PendingCall* call = CallInProgress();
    if (call == nullptr || !call->recorded) return nullptr;
    const auto wrapped_fn = static_cast<ApiFn>(call->record.fn);
    if (wrapped_fn != fn && !(wrapped_fn == ApiFn::kBcast && fn == ApiFn::kBroadcast)) return nullptr;
    identity = call->record;
  } else {
    PendingCall capture;
    const uint64_t seq = comm->collective_seq.fetch_add(1, std::memory_order_relaxed) + 1;
    BeginPluginCall(&capture, fn, comm->comm_id, comm->rank, comm->nranks, seq, descr.coll_api.count,
                    DtypeOf(descr.coll_api.datatype), descr.coll_api.root, descr.coll_api.stream, ring::kFlagCaptured);
    if (!capture.recorded) return nullptr;
    FinishPluginCall(&capture, /*launched=*/false);
    identity = capture.record;
  }
  CapturedCall* captured = AllocateCaptured();
  if (captured == nullptr) return nullptr;
  captured->comm = comm;
  captured->identity = identity;
  return &captured->api;
}

// A Coll event whose parent is a captured call: the graph holding it is replayed. Recorded
// as the captured call again, flagged a replay, numbered among the communicator's replays,
// returned at once (NCCL's host callback is the replay's only moment on a host thread) and
// complete once its channels have stopped.
void* StartReplay(CapturedCall* captured, const abi::EventDescr& descr) noexcept {
  if (descr.type != abi::kColl) return nullptr;
  Track* track = Allocate(1);  // its channels' end
  if (track == nullptr) return nullptr;
  track->plugin_only = true;
  track->comm = captured->comm;
  const uint64_t seq = captured->comm->replay_seq.fetch_add(1, std::memory_order_relaxed) + 1;
  BeginPluginReplay(&track->call, captured->identity, seq);
  FinishPluginCall(&track->call);
  track->request = CompletionOf(track->call);
  ExpectChannels(track, descr.coll.channels);
  return &track->op;
}

// The API event of a call: ties it to the wrapper's call, or records it (plugin only).
void* StartApi(PluginComm* comm, const abi::EventDescr& descr) noexcept {
  const bool coll = descr.type == abi::kCollApi;
  if (coll ? descr.coll_api.graph_captured : descr.p2p_api.graph_captured) return Capture(comm, descr);
  if (Wrapped()) {
    PendingCall* call = CallInProgress();
    if (call == nullptr || call->profiler_track != nullptr) return nullptr;
    const auto fn = static_cast<ApiFn>(call->record.fn);
    // All-to-all, gather and scatter reach NCCL's profiler as several sends and receives.
    const bool matches = coll ? (fn == ApiFn::kAllReduce || fn == ApiFn::kAllGather || fn == ApiFn::kReduceScatter ||
                                 fn == ApiFn::kBroadcast || fn == ApiFn::kBcast || fn == ApiFn::kReduce)
                              : ring::IsP2p(fn);
    if (!matches) return nullptr;
    Track* track = Allocate(2);
    if (track == nullptr) return nullptr;
    track->request = CompletionOf(*call);
    call->profiler_track = track;
    return &track->api;
  }
  if (comm == nullptr) return nullptr;
  const ApiFn fn = coll ? CollectiveFn(descr.coll_api.func) : ApiFn::kNone;
  if (coll && fn == ApiFn::kNone) return nullptr;
  // A collective's return waits for the end of its group (StopEvent): held until then too.
  Track* track = Allocate(coll ? 2 : 1);
  if (track == nullptr) return nullptr;
  track->plugin_only = true;
  track->comm = comm;
  if (coll) {
    const uint64_t seq = comm->collective_seq.fetch_add(1, std::memory_order_relaxed) + 1;
    BeginPluginCall(&track->call, fn, comm->comm_id, comm->rank, comm->nranks, seq, descr.coll_api.count,
                    DtypeOf(descr.coll_api.datatype), descr.coll_api.root, descr.coll_api.stream);
    track->request = CompletionOf(track->call);
  } else {
    // The peer comes with the P2p event: the call is recorded then.
    track->fn = std::strcmp(descr.p2p_api.func, "Send") == 0 ? ApiFn::kSend : ApiFn::kRecv;
    track->count = descr.p2p_api.count;
    track->dtype = DtypeOf(descr.p2p_api.datatype);
    track->stream = descr.p2p_api.stream;
  }
  return &track->api;
}

void* StartOp(const abi::EventDescr& descr) noexcept {
  auto* parent = static_cast<Handle*>(descr.parent);
  if (parent != nullptr && parent->level == Level::kCaptured) return StartReplay(parent->captured, descr);
  if (parent == nullptr || parent->level != Level::kApi) return nullptr;
  Track* track = parent->track;
  const bool coll = descr.type == abi::kColl;
  if (track->plugin_only && !coll && track->fn != ApiFn::kNone) {
    PluginComm* comm = track->comm;
    const int peer = descr.p2p.peer;
    BeginPluginCall(&track->call, track->fn, comm->comm_id, comm->rank, comm->nranks,
                    NextP2pSeq(comm, track->fn, peer), track->count, track->dtype, peer, track->stream);
    FinishPluginCall(&track->call);
    track->request = CompletionOf(track->call);
  }
  ExpectChannels(track, coll ? descr.coll.channels : descr.p2p.channels);
  return &track->op;
}

// Versions 1 to 4, with the preload: a launch event on the thread inside the wrapper of
// an ungrouped call, of that call's function, is the call's launch (NCCL launches an
// ungrouped call's implicit group on the calling thread; launches on other threads, such
// as CUDA-graph replays, have no call in progress). Only v4 says how many channels will
// end it: v1..v3 leave the completion to the wrapper's CUDA event.
void* TieLaunchToWrapper(const LaunchEvent& launch) noexcept {
  if (launch.channels < 0) return nullptr;
  PendingCall* call = CallInProgress();
  if (call == nullptr || (call->record.flags & ring::kFlagCaptured) != 0) return nullptr;
  const auto fn = static_cast<ApiFn>(call->record.fn);
  if (fn != launch.fn && !(fn == ApiFn::kBcast && launch.fn == ApiFn::kBroadcast)) return nullptr;
  if (call->profiler_track != nullptr) {
    // A second launch of the same call: its first part's channels would end it early.
    // The wrapper's CUDA event tracks it (a completion the first part already wrote
    // stays: the analyzer keeps the first, as for any call the plugin gave back).
    static_cast<Track*>(call->profiler_track)->wrapper_tracks.store(true, std::memory_order_release);
    return nullptr;
  }
  Track* track = Allocate(2);
  if (track == nullptr) return nullptr;
  track->request = CompletionOf(*call);
  call->profiler_track = track;
  ExpectChannels(track, launch.channels);
  return &track->op;
}

// Versions 1 to 4: a task NCCL launches (its Coll or P2p event, started and stopped on the
// launching thread). Alone, the plugin records it: kEnter now, kReturn at the event's
// stop, kComplete after its channels (v4) or none, the return saying so (v1..v3).
void* StartLaunch(PluginComm* comm, const LaunchEvent& launch) noexcept {
  if (launch.fn == ApiFn::kNone) return nullptr;
  if (Wrapped()) return TieLaunchToWrapper(launch);
  if (comm == nullptr) return nullptr;
  const bool completes = launch.channels >= 0;
  Track* track = Allocate(completes ? 2 : 1);  // the event's stop; its channels' end
  if (track == nullptr) return nullptr;
  track->plugin_only = true;
  track->returns_at_launch_stop = true;
  track->comm = comm;
  const uint64_t comm_id = comm->comm_id != 0 ? comm->comm_id : (launch.comm_hash == 0 ? 1 : launch.comm_hash);
  const int32_t rank = comm->rank >= 0 ? comm->rank : launch.rank;
  const uint64_t seq = ring::IsP2p(launch.fn) ? NextP2pSeq(comm, launch.fn, launch.root_or_peer)
                                              : comm->collective_seq.fetch_add(1, std::memory_order_relaxed) + 1;
  // No version before 5 names the stream.
  BeginPluginCall(&track->call, launch.fn, comm_id, rank, comm->nranks, seq, launch.count, launch.dtype,
                  launch.root_or_peer, nullptr);
  track->request = CompletionOf(track->call);
  if (completes) ExpectChannels(track, launch.channels);
  return &track->op;
}

// A KernelCh event of the task behind `parent`: counted only where the task's channel
// count is known (a count of -1 would complete it at its first channel).
void* StartChannel(void* parent) noexcept {
  auto* op = static_cast<Handle*>(parent);
  if (op == nullptr || op->level != Level::kOp) return nullptr;
  if (op->track->channels_expected.load(std::memory_order_acquire) < 0) return nullptr;
  return &op->track->channel;
}

// NCCL unloads its profiler plugin after the last communicator's finalize, but the
// recorder's watcher thread runs in this library for the rest of the process: it stays.
void StayLoaded() noexcept {
  static std::atomic<bool> pinned{false};
  if (pinned.exchange(true)) return;
  Dl_info self{};
  if (dladdr(reinterpret_cast<const void*>(&StayLoaded), &self) != 0 && self.dli_fname != nullptr) {
    dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  }
}

// Every version's init: `comm_id` 0 and `rank` -1 where the version does not say.
int InitComm(void** context, int version, uint64_t comm_id, int nranks, int rank, int* mask) noexcept {
  *context = nullptr;
  StayLoaded();
  // The events each version can give that the plugin uses: the calls (v5), their launch,
  // and their channels' end where the launch says how many (v4, v5).
  uint64_t wanted = abi::kColl | abi::kP2p | abi::kKernelCh;
  if (version >= 5) wanted |= abi::kCollApi | abi::kP2pApi;
  if (version <= 3) {
    // With the preload, nothing here is the plugin's to record or complete: ask for nothing.
    if (Wrapped()) return 0;
    wanted = abi::kColl | abi::kP2p;
  }
  if (!g_pool_ready.load(std::memory_order_acquire)) {
    static std::atomic<bool> claimed{false};
    if (!claimed.exchange(true)) {
      g_tracks = new (std::nothrow) Track[kTracks];
      g_pool_ready.store(g_tracks != nullptr, std::memory_order_release);
    }
  }
  auto* comm = new (std::nothrow) PluginComm;
  if (comm == nullptr) return 0;
  comm->comm_id = version >= 4 && comm_id == 0 ? 1 : comm_id;
  comm->rank = rank;
  comm->nranks = nranks > 0 ? nranks : ring::kUnset;
  const int32_t peers = nranks > 0 ? nranks : kPeersOfUnknownSize;
  comm->send_seq = new (std::nothrow) std::atomic<uint64_t>[static_cast<size_t>(peers)]();
  comm->recv_seq = new (std::nothrow) std::atomic<uint64_t>[static_cast<size_t>(peers)]();
  comm->peers = comm->send_seq != nullptr && comm->recv_seq != nullptr ? peers : 0;
  *context = comm;
  __atomic_or_fetch(mask, static_cast<int>(wanted), __ATOMIC_RELAXED);
  return 0;
}

int InitV5(void** context, uint64_t comm_id, int* mask, const char*, int, int nranks, int rank, abi::DebugLogger) {
  return InitComm(context, 5, comm_id, nranks, rank, mask);
}

int InitV4(void** context, int* mask, const char*, uint64_t comm_hash, int, int nranks, int rank, abi::DebugLogger) {
  return InitComm(context, 4, comm_hash, nranks, rank, mask);
}

template <int kVersion>
int InitWithoutComm(void** context, int* mask) {
  return InitComm(context, kVersion, 0, ring::kUnset, -1, mask);
}

int StartEvent(void* context, void** handle, abi::EventDescr* descr) {
  *handle = nullptr;
  if (descr == nullptr) return 0;
  switch (descr->type) {
    case abi::kGroupApi:
      if (!Wrapped()) *handle = &t_group_api;  // its end returns the calls made in it
      break;
    case abi::kCollApi:
    case abi::kP2pApi:
      *handle = StartApi(static_cast<PluginComm*>(context), *descr);
      break;
    case abi::kColl:
    case abi::kP2p:
      *handle = StartOp(*descr);
      break;
    case abi::kKernelCh:
      *handle = StartChannel(descr->parent);
      break;
    default:
      break;
  }
  return 0;
}

// startEvent of versions 1 to 4: Coll and P2p events are launches; KernelCh events count
// where the launch said how many (v4: v3's carry no count to wait for).
template <typename Descr, LaunchEvent (*kLaunchOf)(const Descr&) noexcept>
int StartLaunchEvent(void* context, void** handle, Descr* descr) {
  *handle = nullptr;
  if (descr == nullptr) return 0;
  if (descr->type == abi::kColl || descr->type == abi::kP2p) {
    *handle = StartLaunch(static_cast<PluginComm*>(context), kLaunchOf(*descr));
  } else if (descr->type == abi::kKernelCh) {
    *handle = StartChannel(descr->parent);
  }
  return 0;
}

int StopEvent(void* handle) {
  auto* event = static_cast<Handle*>(handle);
  if (event == nullptr) return 0;
  Track* track = event->track;
  if (event->level == Level::kGroupApi) {
    // The user's call (or group) ends: each collective made in it returns now, and says
    // whether NCCL launched anything whose end the plugin will see.
    for (int i = 0; i < t_open_call_count; ++i) {
      Track* open = t_open_calls[i];
      FinishPluginCall(&open->call, open->channels_expected.load(std::memory_order_acquire) >= 0);
      Release(open);
    }
    t_open_call_count = 0;
  } else if (event->level == Level::kApi && track->plugin_only && track->fn == ApiFn::kNone) {
    if (t_open_call_count < kOpenCalls) {
      t_open_calls[t_open_call_count++] = track;  // returns when its group ends
    } else {
      FinishPluginCall(&track->call);
      Release(track);
    }
  } else if (event->level == Level::kOp && track->returns_at_launch_stop) {
    // v1..v4 alone: NCCL has launched it; its return says whether a completion will come.
    FinishPluginCall(&track->call, track->channels_expected.load(std::memory_order_acquire) >= 0);
    Release(track);
  } else if (event->level == Level::kChannel) {
    const int done = track->channels_done.fetch_add(1, std::memory_order_acq_rel) + 1;
    if (done >= track->channels_expected.load(std::memory_order_acquire)) Complete(track);
  }
  return 0;
}

template <typename Args>
int RecordEventState(void*, int, Args*) {
  return 0;
}

int Finalize(void* context) {
  // NCCL finalizes a communicator once its work is over: no event of it comes after.
  auto* comm = static_cast<PluginComm*>(context);
  if (comm == nullptr) return 0;
  delete[] comm->send_seq;
  delete[] comm->recv_seq;
  delete comm;
  return 0;
}

}  // namespace

bool ProfilerTrackFromWrapper(void* handle, bool enqueued) noexcept {
  auto* track = static_cast<Track*>(handle);
  const bool launched = enqueued && track->channels_expected.load(std::memory_order_acquire) >= 0 &&
                        !track->wrapper_tracks.load(std::memory_order_acquire);
  // Not launched within the call (failed, in progress on a non-blocking communicator,
  // or a kind NCCL runs without launch events), or launched in parts (v1..v4): the
  // wrapper tracks it. A completion the plugin sees in that moment may also be written;
  // the analyzer keeps the first.
  if (!launched) track->wrapper_tracks.store(true, std::memory_order_release);
  Release(track);
  return launched;
}

}  // namespace collwatch

// NCCL finds these with dlsym in the library NCCL_PROFILER_PLUGIN names, the newest
// version it knows first (ring/nccl_profiler_abi.h).
extern "C" __attribute__((visibility("default"))) const collwatch::nccl_profiler::NcclProfilerV5 ncclProfiler_v5 = {
    "collwatch",
    collwatch::InitV5,
    collwatch::StartEvent,
    collwatch::StopEvent,
    collwatch::RecordEventState<collwatch::nccl_profiler::EventStateArgs>,
    collwatch::Finalize,
};

extern "C" __attribute__((visibility("default"))) const collwatch::nccl_profiler::NcclProfilerV4 ncclProfiler_v4 = {
    "collwatch",
    collwatch::InitV4,
    collwatch::StartLaunchEvent<collwatch::nccl_profiler::EventDescrV4, collwatch::LaunchOfV4>,
    collwatch::StopEvent,
    collwatch::RecordEventState<collwatch::nccl_profiler::EventStateArgs>,
    collwatch::Finalize,
};

extern "C" __attribute__((visibility("default"))) const collwatch::nccl_profiler::NcclProfilerV3 ncclProfiler_v3 = {
    "collwatch",
    collwatch::InitWithoutComm<3>,
    collwatch::StartLaunchEvent<collwatch::nccl_profiler::EventDescrV3,
                                collwatch::LaunchOfV3>,
    collwatch::StopEvent,
    collwatch::RecordEventState<collwatch::nccl_profiler::EventStateArgsV1>,
    collwatch::Finalize,
};

extern "C" __attribute__((visibility("default"))) const collwatch::nccl_profiler::NcclProfilerV2 ncclProfiler_v2 = {
    "collwatch",
    collwatch::InitWithoutComm<2>,
    collwatch::StartLaunchEvent<collwatch::nccl_profiler::EventDescrV2,
                                collwatch::LaunchOfV2>,
    collwatch::StopEvent,
    collwatch::RecordEventState<collwatch::nccl_profiler::EventStateArgsV1>,
    collwatch::Finalize,
};

extern "C" __attribute__((visibility("default"))) const collwatch::nccl_profiler::NcclProfilerV1 ncclProfiler_v1 = {
    "collwatch",
    collwatch::InitWithoutComm<1>,
    collwatch::StartLaunchEvent<collwatch::nccl_profiler::EventDescrV1, collwatch::LaunchOfV1>,
    collwatch::StopEvent,
    collwatch::RecordEventState<collwatch::nccl_profiler::EventStateArgsV1>,
    collwatch::Finalize,
};
