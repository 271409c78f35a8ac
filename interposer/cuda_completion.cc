// CUDA-event completion tracking through the driver API found with dlopen(RTLD_NOLOAD).
// Threading: see cuda_completion.h. The pending list is owned by the watcher thread.
#include "interposer/cuda_completion.h"

#include <cuda.h>
#include <dlfcn.h>

#include <atomic>
#include <initializer_list>

#include "interposer/bounded_queue.h"
#include "interposer/clock.h"

namespace collwatch {

std::atomic<int> g_cuda_state{0};

namespace {

struct Driver {
  decltype(&::cuCtxGetCurrent) ctx_get_current;
  decltype(&::cuCtxSetCurrent) ctx_set_current;
  decltype(&::cuEventCreate) event_create;
  decltype(&::cuEventRecord) event_record;
  decltype(&::cuEventQuery) event_query;
  decltype(&::cuStreamIsCapturing) stream_is_capturing;
  decltype(&::cuStreamGetCtx) stream_get_ctx;
  decltype(&::cuThreadExchangeStreamCaptureMode) exchange_capture_mode;
};

constexpr uint32_t kMaxPools = 16;            // CUDA contexts per process
constexpr uint32_t kEventsPerPool = 4096;     // events in flight per context
constexpr size_t kRequestQueue = 8192;        // requests between hot path and watcher
constexpr uint32_t kMaxPending = 16384;       // watcher-owned list
constexpr uint32_t kKnownStreams = 8;         // streams whose pool a thread remembers

enum PoolState : uint32_t { kPoolEmpty = 0, kPoolBuilding = 1, kPoolReady = 2, kPoolFailed = 3 };

struct EventPool {
  std::atomic<uint32_t> state{kPoolEmpty};
  CUcontext context = nullptr;
  CUevent events[kEventsPerPool] = {};
  BoundedQueue<uint32_t, kEventsPerPool> free_events;
};

Driver g_driver{};
EventPool g_pools[kMaxPools];
BoundedQueue<CompletionRequest, kRequestQueue> g_requests;

// Watcher-owned.
CompletionRequest g_pending[kMaxPending];
uint32_t g_pending_count = 0;
bool g_watcher_relaxed = false;

// A poll's search of one stream (its handle and context's pool): its entries are
// g_order[first, first + count).
struct StreamSearch {
  uint64_t stream;
  uint32_t pool;
  uint32_t first;
  uint32_t count;
};
constexpr uint32_t kMaxSearchedStreams = 64;
constexpr uint8_t kUnsearched = 0xff;
StreamSearch g_streams[kMaxSearchedStreams];
uint8_t g_stream_of[kMaxPending];
uint32_t g_order[kMaxPending];
bool g_done[kMaxPending];

template <typename F>
bool Resolve(void* library, const char* name, F* out) noexcept {
  *out = reinterpret_cast<F>(dlsym(library, name));
  return *out != nullptr;
}

// The pool of `context`, built on first use.
EventPool* PoolForContext(CUcontext context, uint32_t* pool_index) noexcept {
  for (uint32_t i = 0; i < kMaxPools; ++i) {
    EventPool& pool = g_pools[i];
    uint32_t state = pool.state.load(std::memory_order_acquire);
    if (state == kPoolReady && pool.context == context) {
      *pool_index = i;
      return &pool;
    }
    // Claim an empty slot; a slot another thread is building is skipped (its context
    // may be ours: then this op goes untracked, once).
    if (state != kPoolEmpty ||
        !pool.state.compare_exchange_strong(state, kPoolBuilding, std::memory_order_acq_rel)) {
      continue;
    }
    pool.context = context;
    // Events belong to the context current at their creation: make the pool's current
    // for the while, and give the thread back its own.
    CUcontext previous = nullptr;
    g_driver.ctx_get_current(&previous);
    const bool switched = previous != context && g_driver.ctx_set_current(context) == CUDA_SUCCESS;
    uint32_t built = 0;
    if (previous == context || switched) {
      for (; built < kEventsPerPool; ++built) {
        if (g_driver.event_create(&pool.events[built], CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) break;
        pool.free_events.Push(built);
      }
    }
    if (switched) g_driver.ctx_set_current(previous);
    pool.state.store(built > 0 ? kPoolReady : kPoolFailed, std::memory_order_release);
    if (built == 0) return nullptr;
    *pool_index = i;
    return &pool;
  }
  return nullptr;
}

// NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD: whichever context is current.
bool IsSpecialStream(CUstream stream) noexcept { return reinterpret_cast<uintptr_t>(stream) <= 2; }

struct KnownStream {
  CUstream stream = nullptr;
  uint32_t pool = 0;
};
__attribute__((tls_model("initial-exec"))) thread_local KnownStream t_known_streams[kKnownStreams];
__attribute__((tls_model("initial-exec"))) thread_local uint32_t t_next_known_stream = 0;

// The pool of `stream`'s own context. An event must be recorded in its stream's context,
// which is not always the calling thread's current one: after an ncclGroupEnd over the
// communicators of several GPUs, one process, the current context is at most one of theirs.
// Each thread remembers its last streams' pools (looking a stream up costs a driver call);
// `fresh` looks again, for a remembered handle the driver refused.
EventPool* PoolForStream(CUstream stream, bool fresh, uint32_t* pool_index) noexcept {
  const bool special = IsSpecialStream(stream);
  KnownStream* slot = nullptr;
  if (!special) {
    for (KnownStream& known : t_known_streams) {
      if (known.stream != stream) continue;
      if (!fresh) {
        *pool_index = known.pool;
        return &g_pools[known.pool];
      }
      slot = &known;
    }
  }
  CUcontext context = nullptr;
  if (g_driver.stream_get_ctx(stream, &context) != CUDA_SUCCESS || context == nullptr) return nullptr;
  EventPool* pool = PoolForContext(context, pool_index);
  if (pool == nullptr || special) return pool;
  if (slot == nullptr) slot = &t_known_streams[t_next_known_stream++ % kKnownStreams];
  *slot = {stream, *pool_index};
  return pool;
}

}  // namespace

// One probe: fills g_driver and returns kCudaPresent, or returns kCudaAbsent.
int ProbeOnce() noexcept {
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD | RTLD_LOCAL);
  if (library == nullptr) return kCudaAbsent;
  Driver driver{};
  const bool complete =
      Resolve(library, "cuCtxGetCurrent", &driver.ctx_get_current) &&
      Resolve(library, "cuCtxSetCurrent", &driver.ctx_set_current) &&
      Resolve(library, "cuEventCreate", &driver.event_create) &&
      Resolve(library, "cuEventRecord", &driver.event_record) &&
      Resolve(library, "cuEventQuery", &driver.event_query) &&
      Resolve(library, "cuStreamIsCapturing", &driver.stream_is_capturing) &&
      Resolve(library, "cuStreamGetCtx", &driver.stream_get_ctx) &&
      Resolve(library, "cuThreadExchangeStreamCaptureMode", &driver.exchange_capture_mode);
  CUcontext context = nullptr;
  // A driver without a current context (e.g. a CPU backend in a process that merely
  // loaded CUDA) cannot have device work to track. The library stays loaded (it was).
  if (!complete || driver.ctx_get_current(&context) != CUDA_SUCCESS || context == nullptr) {
    dlclose(library);
    return kCudaAbsent;
  }
  g_driver = driver;
  return kCudaPresent;
}

void ProbeCuda() noexcept {
  int state = g_cuda_state.load(std::memory_order_acquire);
  if (state == kCudaPresent || state == kCudaProbing) return;
  // One prober at a time; a thread that loses the race simply does not probe now.
  if (!g_cuda_state.compare_exchange_strong(state, kCudaProbing, std::memory_order_acq_rel)) return;
  g_cuda_state.store(ProbeOnce(), std::memory_order_release);
}

bool IsCapturingSlow(void* stream) noexcept {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (g_driver.stream_is_capturing(static_cast<CUstream>(stream), &status) != CUDA_SUCCESS) {
    return false;
  }
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

Tracking TrackAfter(void* stream, CompletionRequest request) noexcept {
  if (!CudaPresent()) return Tracking::kUntracked;
  const auto cu_stream = static_cast<CUstream>(stream);
  request.stream = reinterpret_cast<uint64_t>(stream);
  // A second try looks the stream up afresh: a remembered handle may have been destroyed
  // and reused by a stream of another context (the driver then refuses our event).
  for (const bool fresh : {false, true}) {
    uint32_t pool_index = 0;
    EventPool* pool = PoolForStream(cu_stream, fresh, &pool_index);
    uint32_t event = 0;
    if (pool == nullptr || !pool->free_events.Pop(&event)) return Tracking::kUntracked;
    const CUresult recorded = g_driver.event_record(pool->events[event], cu_stream);
    if (recorded == CUDA_SUCCESS) {
      request.pool = pool_index;
      request.event = event;
      if (g_requests.Push(request)) return Tracking::kTracked;
    }
    // An event recorded but not queued is simply recorded again by its next use.
    pool->free_events.Push(event);
    if (recorded != CUDA_ERROR_INVALID_HANDLE || IsSpecialStream(cu_stream)) break;
  }
  return Tracking::kUntracked;
}

uint64_t PollCompletions(CompletionSink on_complete) noexcept {
  if (!CudaPresent()) return 0;
  if (!g_watcher_relaxed) {
    // Our queries must never count as "unsafe" calls that invalidate a graph capture
    // running on another thread in global capture mode.
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    g_driver.exchange_capture_mode(&mode);
    g_watcher_relaxed = true;
  }
  CompletionRequest request{};
  while (g_pending_count < kMaxPending && g_requests.Pop(&request)) {
    g_pending[g_pending_count++] = request;
  }
  // Work on one stream completes in order: where an event is done, so is every earlier
  // one of its stream. Each stream's pending events are searched for the last done one
  // (the newest first: one query when the stream caught up; else a binary search), so a
  // poll makes a few queries per stream however many calls are in flight: each query takes
  // the driver's locks, which the job's own launches wait for. (A stream handle destroyed
  // and reused in its context while its work is in flight would pass for one stream here;
  // CUDA gives no way to tell them apart.)
  uint32_t stream_count = 0;
  for (uint32_t i = 0; i < g_pending_count; ++i) {
    const CompletionRequest& pending = g_pending[i];
    uint32_t s = 0;
    while (s < stream_count &&
           (g_streams[s].stream != pending.stream || g_streams[s].pool != pending.pool)) {
      ++s;
    }
    if (s == stream_count && stream_count < kMaxSearchedStreams) {
      g_streams[stream_count++] = {pending.stream, pending.pool, 0, 0};
    }
    g_stream_of[i] = s < stream_count ? static_cast<uint8_t>(s) : kUnsearched;
    if (s < stream_count) ++g_streams[s].count;
  }
  // Each searched stream's entries, in arrival order, side by side in g_order.
  uint32_t next = 0;
  for (uint32_t s = 0; s < stream_count; ++s) {
    g_streams[s].first = next;
    next += g_streams[s].count;
    g_streams[s].count = 0;
  }
  for (uint32_t i = 0; i < g_pending_count; ++i) {
    if (g_stream_of[i] == kUnsearched) continue;
    StreamSearch& stream = g_streams[g_stream_of[i]];
    g_order[stream.first + stream.count++] = i;
  }
  CUcontext current = nullptr;
  const auto query = [&](const CompletionRequest& pending) noexcept {
    EventPool& pool = g_pools[pending.pool];
    if (current != pool.context) {
      g_driver.ctx_set_current(pool.context);
      current = pool.context;
    }
    return g_driver.event_query(pool.events[pending.event]);
  };
  const auto complete = [&](uint32_t i, CUresult status) noexcept {
    on_complete(g_pending[i], MonotonicNs(), static_cast<int32_t>(status));
    g_pools[g_pending[i].pool].free_events.Push(g_pending[i].event);
    g_done[i] = true;
  };
  for (uint32_t i = 0; i < g_pending_count; ++i) g_done[i] = false;
  for (uint32_t s = 0; s < stream_count; ++s) {
    const uint32_t* entries = &g_order[g_streams[s].first];
    const int64_t count = g_streams[s].count;
    // done: entries [0, lo] (lo = -1: none known); not done: [hi, count).
    int64_t lo = -1;
    int64_t hi = count;
    CUresult done_status = CUDA_SUCCESS;
    for (int64_t probe = count - 1; lo + 1 < hi; probe = lo + (hi - lo) / 2) {
      const CUresult status = query(g_pending[entries[probe]]);
      if (status == CUDA_ERROR_NOT_READY) {
        hi = probe;
      } else {  // success, or an error the device reported: either way final
        lo = probe;
        done_status = status;
      }
    }
    for (int64_t k = 0; k <= lo; ++k) complete(entries[k], done_status);
  }
  // Streams past kMaxSearchedStreams: each event asked on its own.
  for (uint32_t i = 0; i < g_pending_count; ++i) {
    if (g_stream_of[i] != kUnsearched) continue;
    const CUresult status = query(g_pending[i]);
    if (status != CUDA_ERROR_NOT_READY) complete(i, status);
  }
  uint32_t kept = 0;
  for (uint32_t i = 0; i < g_pending_count; ++i) {
    if (!g_done[i]) g_pending[kept++] = g_pending[i];
  }
  g_pending_count = kept;
  return kept;
}

}  // namespace collwatch
