// What the recorder's two files share: recorder.cc (the per-call path: records,
// communicator identity, groups) and recorder_lifecycle.cc (the ring's life in this
// process: creation on first use, the watcher thread, fork and exit). Not for other files.
// Threading: g_recorder_state is the one gate (acquire/release); the ring and the config
// are written once, before the state becomes kRecording, and only read after.
#ifndef COLLWATCH_INTERPOSER_RECORDER_INTERNAL_H_
#define COLLWATCH_INTERPOSER_RECORDER_INTERNAL_H_

#include <pthread.h>

#include <atomic>
#include <cstdint>

#include "interposer/config.h"
#include "interposer/cuda_completion.h"
#include "interposer/ring_writer.h"

namespace collwatch {

enum RecorderState : int { kUninitialised = 0, kCreating = 1, kRecording = 2, kOff = 3 };

// Defined in recorder.cc, beside the per-call path that reads them on every call; all
// constant-initialised, so a hook called from another library's constructor finds them set.
extern std::atomic<int> g_recorder_state;
extern RingWriter* g_recorder_ring;  // set once before g_recorder_state becomes kRecording
extern Config g_recorder_config;
// Advanced by the watcher thread every period: a call that sees the same value at enter
// and at return took less than one period, and skips the clock read at return (see
// "Return times" in ring_format.h). Its own cache line: hooks only read it.
extern std::atomic<uint64_t> g_recorder_tick;
extern pthread_key_t g_lane_key;  // its destructor gives a lane back when its thread exits

// recorder.cc: writes the kComplete record of `request` (the watcher's completion callback).
void AppendCompletion(const CompletionRequest& request, uint64_t observed_ns,
                      int32_t cuda_status) noexcept;

// recorder_lifecycle.cc: Ready()'s rare path: creates the ring, or waits for another
// thread creating it. True when records may be written.
bool ReadySlow(bool may_create) noexcept;

}  // namespace collwatch

#endif  // COLLWATCH_INTERPOSER_RECORDER_INTERNAL_H_
