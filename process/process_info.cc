// Names, clock offsets and liveness of processes. Threading: pure functions.
#include "process/process_info.h"

#include <algorithm>

namespace collwatch {

std::string_view ProcessStatusName(ProcessStatus status) {
  switch (status) {
    case ProcessStatus::kRunning: return "running";
    case ProcessStatus::kExited: return "exited";
    case ProcessStatus::kDisabled: return "recording disabled";
    case ProcessStatus::kDead: return "dead";
    case ProcessStatus::kSilent: return "silent";
  }
  return "unknown";
}

int64_t RealtimeOffsetNs(uint64_t start_realtime_ns, uint64_t start_monotonic_ns) {
  const auto clamped = [](uint64_t ns) { return static_cast<int64_t>(std::min<uint64_t>(ns, kMaxTimeNs)); };
  return clamped(start_realtime_ns) - clamped(start_monotonic_ns);
}


ProcessStatus StatusOfRing(ring::WriterState state, bool writer_alive, uint64_t heartbeat_ns,
                           uint64_t now_monotonic_ns, double silent_after_s) {
  if (state == ring::WriterState::kExited) return ProcessStatus::kExited;
  if (!writer_alive) return ProcessStatus::kDead;
  if (state == ring::WriterState::kDisabled) return ProcessStatus::kDisabled;
  if (heartbeat_ns != 0 && now_monotonic_ns > heartbeat_ns &&
      static_cast<double>(now_monotonic_ns - heartbeat_ns) / 1e9 > silent_after_s) {
    return ProcessStatus::kSilent;
  }
  return ProcessStatus::kRunning;
}

Liveness LivenessOf(ProcessStatus status, const ProcessSample& sample) {
  const bool sampled = sample.sampled_ns != 0;
  switch (status) {
    case ProcessStatus::kExited: return Liveness::kExited;
    case ProcessStatus::kDead: return Liveness::kKilledOrCrashed;
    default: break;
  }
  if (sampled && (sample.state == ProcessState::kGone || sample.state == ProcessState::kZombie)) {
    return Liveness::kGone;
  }
  if (status != ProcessStatus::kSilent) return Liveness::kRunning;
  // A stopped process does not beat; one in uninterruptible I/O may not either.
  if (sampled && (sample.state == ProcessState::kStopped || sample.state == ProcessState::kDiskWait)) {
    return Liveness::kStopped;
  }
  return Liveness::kSilent;
}

bool IsLost(Liveness liveness) { return liveness == Liveness::kExited || IsLostWithoutExit(liveness); }

bool IsLostWithoutExit(Liveness liveness) {
  return liveness == Liveness::kKilledOrCrashed || liveness == Liveness::kSilent || liveness == Liveness::kGone;
}

}  // namespace collwatch
