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
// Threading: NCCL's threads, concurrently; lock-free, no allocation per event (a fixed
// pool of tracks; when it is exhausted, calls fall back to the CUDA events).
#ifndef COLLWATCH_INTERPOSER_PROFILER_PLUGIN_H_
#define COLLWATCH_INTERPOSER_PROFILER_PLUGIN_H_

#include "ring/nccl_profiler_abi.h"

// What NCCL finds with dlsym(library, "ncclProfiler_v5").
extern "C" const collwatch::nccl_profiler::NcclProfilerV5 ncclProfiler_v5;

namespace collwatch {

// The wrapper of a call whose completion the plugin tracks is finishing (recorder.cc's
// Finish): true when the plugin will write the call's kComplete (NCCL launched its work);
// false when the wrapper must track it (nothing was launched, or the call failed). The
// wrapper gives up its hold on `track` either way.
bool ProfilerTrackFromWrapper(void* track, bool enqueued) noexcept;

}  // namespace collwatch

#endif  // COLLWATCH_INTERPOSER_PROFILER_PLUGIN_H_
