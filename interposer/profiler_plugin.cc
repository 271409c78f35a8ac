// The plugin's tracks: one per call whose completion it follows, from a fixed pool; NCCL's
// handles point into them (one handle per event level, so that stop_event knows which).
#include "interposer/profiler_plugin.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "interposer/clock.h"
#include "interposer/recorder.h"
#include "ring/nccl_profiler_abi.h"

namespace collwatch {
namespace {

namespace abi = nccl_profiler;
using ring::ApiFn;

// A communicator NCCL initialised the plugin for: the identity a call seen only by the
// plugin is recorded with (NCCL's hash of the unique id: equal on every rank).
struct PluginComm {
  uint64_t comm_id = 0;
  int32_t rank = -1;
  int32_t nranks = -1;
  std::atomic<uint64_t> collective_seq{0};
  std::atomic<uint64_t>* send_seq = nullptr;  // per peer
  std::atomic<uint64_t>* recv_seq = nullptr;
};

struct Track;
enum class Level : uint8_t { kGroupApi, kApi, kOp, kChannel };
struct Handle {
  Level level;
  Track* track;
};

struct Track {
  std::atomic<uint32_t> holds{0};  // 0: free; the wrapper and NCCL's events hold one each
  Handle api{Level::kApi, this};
  Handle op{Level::kOp, this};
  Handle channel{Level::kChannel, this};
  bool plugin_only = false;
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

// "AllReduce" -> the ring's all-reduce (kNone for a name that is no collective).
ApiFn CollectiveFn(const char* func) noexcept {
  static constexpr ApiFn kFns[abi::kCollFuncs] = {ApiFn::kBroadcast, ApiFn::kReduce, ApiFn::kAllGather,
                                                  ApiFn::kReduceScatter, ApiFn::kAllReduce};
  for (int i = 0; i < abi::kCollFuncs; ++i) {
    if (func != nullptr && std::strcmp(func, abi::kCollFuncNames[i]) == 0) return kFns[i];
  }
  return ApiFn::kNone;
}

// "ncclFloat32" -> ncclFloat32 (kNoDtype for a name NCCL 2.28 does not have).
int DtypeOf(const char* name) noexcept {
  for (int i = 0; i < abi::kDatatypes; ++i) {
    if (name != nullptr && std::strcmp(name, abi::kDatatypeNames[i]) == 0) return i;
  }
  return ring::kNoDtype;
}

void Complete(Track* track) noexcept {
  if (track->completed.exchange(true, std::memory_order_acq_rel)) return;
  if (!track->wrapper_tracks.load(std::memory_order_acquire)) AppendPluginCompletion(track->request, MonotonicNs());
  Release(track);  // NCCL's events are over
}

// The API event of a call: ties it to the wrapper's call, or records it (plugin only).
void* StartApi(PluginComm* comm, const abi::EventDescr& descr) noexcept {
  const bool coll = descr.type == abi::kCollApi;
  if (coll ? descr.coll_api.graph_captured : descr.p2p_api.graph_captured) return nullptr;  // replays: later
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
  if (parent == nullptr || parent->level != Level::kApi) return nullptr;
  Track* track = parent->track;
  const bool coll = descr.type == abi::kColl;
  if (track->plugin_only && !coll && track->fn != ApiFn::kNone) {
    PluginComm* comm = track->comm;
    const int peer = descr.p2p.peer;
    std::atomic<uint64_t>* table = track->fn == ApiFn::kSend ? comm->send_seq : comm->recv_seq;
    const uint64_t seq =
        peer >= 0 && peer < comm->nranks && table != nullptr ? table[peer].fetch_add(1, std::memory_order_relaxed) + 1 : 0;
    BeginPluginCall(&track->call, track->fn, comm->comm_id, comm->rank, comm->nranks, seq, track->count, track->dtype,
                    peer, track->stream);
    FinishPluginCall(&track->call);
    track->request = CompletionOf(track->call);
  }
  const int channels = coll ? descr.coll.channels : descr.p2p.channels;
  track->channels_expected.store(channels, std::memory_order_release);
  if (channels == 0) Complete(track);  // nothing runs on a channel: done once launched
  return &track->op;
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

int Init(void** context, uint64_t comm_id, int* mask, const char*, int, int nranks, int rank,
         abi::DebugLogger) {
  *context = nullptr;
  StayLoaded();
  if (!g_pool_ready.load(std::memory_order_acquire)) {
    static std::atomic<bool> claimed{false};
    if (!claimed.exchange(true)) {
      g_tracks = new (std::nothrow) Track[kTracks];
      g_pool_ready.store(g_tracks != nullptr, std::memory_order_release);
    }
  }
  auto* comm = new (std::nothrow) PluginComm;
  if (comm == nullptr) return 0;
  comm->comm_id = comm_id == 0 ? 1 : comm_id;
  comm->rank = rank;
  comm->nranks = nranks;
  if (nranks > 0) {
    comm->send_seq = new (std::nothrow) std::atomic<uint64_t>[static_cast<size_t>(nranks)]();
    comm->recv_seq = new (std::nothrow) std::atomic<uint64_t>[static_cast<size_t>(nranks)]();
  }
  *context = comm;
  // The calls, their launch and their channels' end: what completion needs.
  __atomic_or_fetch(mask, static_cast<int>(abi::kCollApi | abi::kP2pApi | abi::kColl | abi::kP2p | abi::kKernelCh),
                    __ATOMIC_RELAXED);
  return 0;
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
    case abi::kKernelCh: {
      auto* parent = static_cast<Handle*>(descr->parent);
      if (parent != nullptr && parent->level == Level::kOp) *handle = &parent->track->channel;
      break;
    }
    default:
      break;
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
  } else if (event->level == Level::kChannel) {
    const int done = track->channels_done.fetch_add(1, std::memory_order_acq_rel) + 1;
    if (done >= track->channels_expected.load(std::memory_order_acquire)) Complete(track);
  }
  return 0;
}

int RecordEventState(void*, int, abi::EventStateArgs*) { return 0; }

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
  const bool launched = enqueued && track->channels_expected.load(std::memory_order_acquire) >= 0;
  // Not launched within the call (failed, in progress on a non-blocking communicator,
  // or a kind NCCL runs without launch events): the wrapper tracks it. A completion the
  // plugin sees in that moment may also be written; the analyzer keeps the first.
  if (!launched) track->wrapper_tracks.store(true, std::memory_order_release);
  Release(track);
  return launched;
}

}  // namespace collwatch

// NCCL finds this with dlsym in the library NCCL_PROFILER_PLUGIN names.
extern "C" __attribute__((visibility("default"))) const collwatch::nccl_profiler::NcclProfilerV5 ncclProfiler_v5 = {
    "collwatch",
    collwatch::Init,
    collwatch::StartEvent,
    collwatch::StopEvent,
    collwatch::RecordEventState,
    collwatch::Finalize,
};
