// The ring's life in this process: created by the first call that may create it (or
// never: recording then stays off), a watcher thread that beats the heartbeat, calibrates
// the clock, advances the tick and turns CUDA events into completions; recording off in a
// fork child; exit() and normal ends marked in the ring.
// Threading: creation once, by the thread that wins kUninitialised -> kCreating (others
// wait, bounded); the watcher thread has every signal blocked; the rest runs in handlers.
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "interposer/agent_spawn.h"
#include "interposer/call_paths.h"
#include "interposer/clock.h"
#include "interposer/config.h"
#include "interposer/cuda_completion.h"
#include "interposer/recorder.h"
#include "interposer/recorder_internal.h"
#include "interposer/regions.h"
#include "interposer/ring_writer.h"

namespace collwatch {
namespace {

void ReleaseLaneAtThreadExit(void* lane_plus_one) noexcept {
  if (g_recorder_state.load(std::memory_order_acquire) != kRecording) return;
  const uintptr_t lane = reinterpret_cast<uintptr_t>(lane_plus_one) - 1;
  g_recorder_ring->ReleaseLane(static_cast<uint32_t>(lane));
}

void* WatcherMain(void*) noexcept {
  constexpr uint64_t kHeartbeatNs = 100'000'000;
  constexpr uint64_t kDeviceWorkTickNs = 200'000;
  constexpr uint64_t kActivityWindowNs = 1'000'000'000;
  uint64_t last_beat = 0;
  uint64_t last_activity = 0;
  uint64_t last_reserved = 0;
  int tracer_tries = 600;  // a minute of heartbeats for the spawned agent's pid to appear
  while (g_recorder_state.load(std::memory_order_acquire) == kRecording) {
    g_recorder_tick.store(g_recorder_tick.load(std::memory_order_relaxed) + 1,
                          std::memory_order_relaxed);
    const uint64_t pending = PollCompletions(&AppendCompletion);
    const uint64_t now = MonotonicNs();
    if (now - last_beat >= kHeartbeatNs) {
      g_recorder_ring->Heartbeat(now);
      CalibrateClock(g_recorder_config.tsc_clock);
      if (tracer_tries > 0 && (AllowAgentToTrace(g_recorder_config) || --tracer_tries == 0)) tracer_tries = 0;
      last_beat = now;
    }
    const uint64_t reserved = g_recorder_ring->RecordsReserved();
    if (reserved != last_reserved) {
      last_reserved = reserved;
      last_activity = now;
    }
    // Short naps while device work is in flight keep completion times close to real;
    // while calls are made, the tick bounds the return time of calls that skip the clock.
    uint64_t nap_ns = ring::kIdleTickNs;
    if (pending > 0) {
      nap_ns = kDeviceWorkTickNs;
    } else if (now - last_activity < kActivityWindowNs) {
      nap_ns = ring::kActiveTickNs;
    }
    const timespec nap{0, static_cast<long>(nap_ns)};
    nanosleep(&nap, nullptr);
  }
  return nullptr;
}

// Helper threads never take the job's signals.
void StartWatcher() noexcept {
  sigset_t all;
  sigset_t previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  pthread_t thread;
  if (pthread_create(&thread, nullptr, &WatcherMain, nullptr) == 0) {
    pthread_setname_np(thread, "collwatch");
    pthread_detach(thread);
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

void AfterForkInChild() noexcept { g_recorder_state.store(kOff, std::memory_order_release); }

// An on_exit handler: exit()'s status into the ring (ring_format.h Header::exit_code),
// published by MarkExited, which runs after every exit handler. Silent in a fork child
// (recording is off there: the ring is its parent's) and after recording stopped.
void RecordExitStatus(int status, void* /*unused*/) noexcept {
  if (g_recorder_state.load(std::memory_order_acquire) == kRecording) {
    g_recorder_ring->RecordExitCode(status & 0xff);
  }
}

void CreateRing() noexcept {
  g_recorder_config = LoadConfig();
  // Never destroyed: the watcher thread and late hooks may write until the very end.
  if (!g_recorder_config.disabled) {
    g_recorder_ring = RingWriter::Create(g_recorder_config).release();
  }
  if (g_recorder_ring == nullptr) {
    g_recorder_state.store(kOff, std::memory_order_release);
    return;
  }
  MirrorRegionsInto(g_recorder_ring->strings(), g_recorder_ring->string_capacity());
  SetCallPathSlots(g_recorder_ring->call_paths(), g_recorder_ring->call_path_capacity());
  pthread_key_create(&g_lane_key, &ReleaseLaneAtThreadExit);
  if (g_recorder_config.verbose) {
    std::fprintf(stderr, "collwatch: recording to %s\n", g_recorder_ring->path());
  }
  pthread_atfork(nullptr, nullptr, &AfterForkInChild);
  // glibc's on_exit, unlike atexit, hands the handler the status. Should registering
  // fail, an exit reads as "status not recorded".
  on_exit(&RecordExitStatus, nullptr);
  g_recorder_state.store(kRecording, std::memory_order_release);
  StartWatcher();
}

}  // namespace

// Ready()'s rare path: creates the ring, or waits for another thread creating it.
__attribute__((noinline)) bool ReadySlow(bool may_create) noexcept {
  int state = g_recorder_state.load(std::memory_order_acquire);
  if (state == kRecording) return true;
  if (state == kOff || !may_create) return false;
  if (state == kUninitialised &&
      g_recorder_state.compare_exchange_strong(state, kCreating, std::memory_order_acq_rel)) {
    CreateRing();
    return g_recorder_state.load(std::memory_order_acquire) == kRecording;
  }
  // Another thread is creating the ring (a millisecond): wait for it, bounded.
  for (int i = 0;
       i < 100000 && g_recorder_state.load(std::memory_order_acquire) == kCreating; ++i) {
    sched_yield();
  }
  return g_recorder_state.load(std::memory_order_acquire) == kRecording;
}

void DisableRecording() noexcept {
  int previous = g_recorder_state.exchange(kOff, std::memory_order_acq_rel);
  if (previous == kRecording) g_recorder_ring->SetState(ring::WriterState::kDisabled);
}

// A normal exit marks the ring so readers can tell a finished rank from a killed one.
__attribute__((destructor)) void MarkExited() noexcept {
  if (g_recorder_state.load(std::memory_order_acquire) == kRecording) {
    g_recorder_ring->Heartbeat(MonotonicNs());
    g_recorder_ring->SetState(ring::WriterState::kExited);
  }
}

}  // namespace collwatch
