// libcollwatch.so as NCCL's profiler plugin (ring/nccl_profiler_abi.h; NCCL loads it when
// NCCL_PROFILER_PLUGIN names it). Two ways, chosen per call:
// - With the preload's wrappers (LD_PRELOAD): the wrapper has written the call's kEnter;
//   NCCL's CollApi/P2pApi event, emitted on the calling thread inside the real call, ties
//   the plugin's track to it, and the plugin writes its kComplete when NCCL's kernel
//   channel events say the work is done: no CUDA event per call.
// - Alone (NCCL loaded the library, no wrapper ran: no LD_PRELOAD, or NCCL linked
//   statically): the plugin writes kEnter and kReturn from the API events itself, with
//   the communicator identity NCCL gives its init, and kComplete as above.
// No record is ever written twice: a call has either its wrapper's kEnter or the plugin's.
// Older NCCLs ask for older interface versions, which have no API events (a call is seen
// only at its launch) and say less (ring/nccl_profiler_abi.h). What each one gives:
// - v4 (NCCL 2.27): alone, kEnter and kReturn at the launch, kComplete after its
//   channels; with the preload, an ungrouped call launched on its own thread inside its
//   wrapper is tied to it and completed as in v5; any other call keeps its CUDA event.
// - v3, v2, v1 (2.26, 2.24-2.25, 2.23): no channel count (v3) or no kernel events (v2,
//   v1), so no completion: alone, kEnter and kReturn at the launch, the return flagged
//   kFlagNoCompletion, the communicator's size unknown (kUnset: init names nothing); with
//   the preload the plugin asks NCCL for no event at all and the wrappers do everything.
// Alone (every version before 5), all-gathers and broadcasts carry NCCL's count in bytes
// with datatype ncclInt8, and no stream.
// Threading: NCCL's threads, concurrently; lock-free, no allocation per event (a fixed
// pool of tracks; when it is exhausted, calls fall back to the CUDA events).
#ifndef COLLWATCH_INTERPOSER_PROFILER_PLUGIN_H_
#define COLLWATCH_INTERPOSER_PROFILER_PLUGIN_H_

#include "ring/nccl_profiler_abi.h"

// What NCCL finds with dlsym(library, "ncclProfiler_vN"): one per interface version, so that
// NCCL 2.23 to 2.28 each find the newest it knows.
extern "C" const collwatch::nccl_profiler::NcclProfilerV5 ncclProfiler_v5;
extern "C" const collwatch::nccl_profiler::NcclProfilerV4 ncclProfiler_v4;
extern "C" const collwatch::nccl_profiler::NcclProfilerV3 ncclProfiler_v3;
extern "C" const collwatch::nccl_profiler::NcclProfilerV2 ncclProfiler_v2;
extern "C" const collwatch::nccl_profiler::NcclProfilerV1 ncclProfiler_v1;

namespace collwatch {

// The wrapper of a call whose completion the plugin tracks is finishing (recorder.cc's
// Finish): true when the plugin will write the call's kComplete (NCCL launched its work);
// false when the wrapper must track it (nothing was launched, or the call failed). The
// wrapper gives up its hold on `track` either way.
bool ProfilerTrackFromWrapper(void* track, bool enqueued) noexcept;

}  // namespace collwatch

#endif  // COLLWATCH_INTERPOSER_PROFILER_PLUGIN_H_
