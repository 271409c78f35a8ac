// GPU completion of NCCL work: a CUDA event recorded after each op (after the outermost
// ncclGroupEnd for grouped ops) on its stream, later polled by the watcher thread.
// The CUDA driver is never linked or loaded by us: we use the copy the job already
// loaded (dlopen RTLD_NOLOAD), so CPU-only processes never touch CUDA.
// Threading: Probe/IsCapturing/TrackAfter from any thread (lock-free, allocation-free
// after a context's event pool exists); Poll only from the watcher thread.
#ifndef COLLWATCH_INTERPOSER_CUDA_COMPLETION_H_
#define COLLWATCH_INTERPOSER_CUDA_COMPLETION_H_

#include <atomic>
#include <cstdint>

namespace collwatch {

// What a kComplete record needs, carried from the hot path to the watcher.
struct CompletionRequest {
  uint64_t ref_index = 0;  // (lane, index) of the kEnter the completion refers to
  uint16_t lane = 0;
  uint64_t group_id = 0;
  uint64_t stream = 0;
  uint64_t comm_id = 0;
  uint64_t seq = 0;
  uint16_t fn = 0;     // ring::ApiFn of the kEnter
  uint32_t pool = 0;   // filled by TrackAfter: which context's event pool
  uint32_t event = 0;  // filled by TrackAfter: event index in that pool
};

enum class Tracking { kTracked, kUntracked };

// Looks for an already loaded CUDA driver with a current context. Cheap after the first
// success; call it after communicator creation (by then the job has initialised CUDA).
void ProbeCuda() noexcept;

// Whether device work can be tracked: read on every call. Present is sticky; absent is
// probed again at the next communicator creation.
enum CudaState : int { kCudaUnknown = 0, kCudaPresent = 1, kCudaAbsent = 2, kCudaProbing = 3 };
extern std::atomic<int> g_cuda_state;
inline bool CudaPresent() noexcept {
  return g_cuda_state.load(std::memory_order_acquire) == kCudaPresent;
}

// True when `stream` is capturing a CUDA graph (then nothing may be recorded on it).
bool IsCapturingSlow(void* stream) noexcept;
inline bool IsCapturing(void* stream) noexcept { return CudaPresent() && IsCapturingSlow(stream); }

// Records an event (of the stream's own context, whichever is current) on `stream` now and
// queues `request` for the watcher. kUntracked when CUDA is absent, the event pool or the
// queue is exhausted, or the driver refuses.
Tracking TrackAfter(void* stream, CompletionRequest request) noexcept;

// Watcher thread: moves completed events to `on_complete` (called with the request, the
// time the completion was observed and the CUDA status: 0, or the error the device
// reported) and returns their events to the pool. Returns the requests still pending.
using CompletionSink = void (*)(const CompletionRequest& request, uint64_t observed_ns,
                                int32_t cuda_status);
uint64_t PollCompletions(CompletionSink on_complete) noexcept;

}  // namespace collwatch

#endif  // COLLWATCH_INTERPOSER_CUDA_COMPLETION_H_
