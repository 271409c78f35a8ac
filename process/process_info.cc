// Names and clock offsets of processes.
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

}  // namespace collwatch
