// Looking at a process through /proc. Threading: any thread; no state of its own.
#include "process/process_sample.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ring/ring_format.h"

namespace collwatch {
namespace {

// Reads a small /proc file whole (at most `capacity` - 1 bytes); -1 when it cannot be
// opened (the process is gone, or not ours to read).
ssize_t ReadProcFile(const char* path, char* buffer, size_t capacity) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t filled = 0;
  while (filled + 1 < capacity) {
    const ssize_t got = read(fd, buffer + filled, capacity - 1 - filled);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    filled += static_cast<size_t>(got);
  }
  close(fd);
  buffer[filled] = '\0';
  return static_cast<ssize_t>(filled);
}

ProcessState StateFromLetter(char letter) {
  switch (letter) {
    case 'R': return ProcessState::kRunning;
    case 'S': case 'I': return ProcessState::kSleeping;  // I: idle (kernel threads)
    case 'D': return ProcessState::kDiskWait;
    case 'T': case 't': return ProcessState::kStopped;  // t: stopped by a tracer
    case 'Z': return ProcessState::kZombie;
    case 'X': case 'x': return ProcessState::kGone;
    default: return ProcessState::kUnknown;
  }
}

}  // namespace

std::string_view ProcessStateName(ProcessState state) {
  switch (state) {
    case ProcessState::kUnknown: return "unknown";
    case ProcessState::kRunning: return "running";
    case ProcessState::kSleeping: return "sleeping";
    case ProcessState::kDiskWait: return "I/O";
    case ProcessState::kStopped: return "stopped";
    case ProcessState::kZombie: return "zombie";
    case ProcessState::kGone: return "gone";
  }
  return "unknown";
}

std::optional<ProcessState> ParseProcessState(std::string_view name) {
  for (const ProcessState state : {ProcessState::kUnknown, ProcessState::kRunning, ProcessState::kSleeping,
                                   ProcessState::kDiskWait, ProcessState::kStopped, ProcessState::kZombie,
                                   ProcessState::kGone}) {
    if (ProcessStateName(state) == name) return state;
  }
  return std::nullopt;
}

ProcessSample SampleProcess(int32_t pid, const ProcessSample* previous, int64_t now_realtime_ns) {
  ProcessSample sample;
  sample.sampled_ns = now_realtime_ns;
  if (pid <= 0) return sample;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  char stat[1024];
  if (ReadProcFile(path, stat, sizeof stat) < 0) {
    // No entry: gone. EACCES and the like say nothing about it.
    if (errno == ENOENT || errno == ESRCH) sample.state = ProcessState::kGone;
    return sample;
  }
  // "pid (comm) S ppid ...": the name may hold spaces and parentheses; the last ')' ends it.
  const char* after_name = std::strrchr(stat, ')');
  if (after_name == nullptr || after_name[1] != ' ' || after_name[2] == '\0') return sample;
  sample.state = StateFromLetter(after_name[2]);
  // Fields from the state (field 3) on: utime and stime are fields 14 and 15.
  const char* field = after_name + 2;
  uint64_t ticks = 0;
  for (int number = 3; number <= 15 && field != nullptr; ++number) {
    if (number >= 14) ticks += std::strtoull(field, nullptr, 10);
    field = std::strchr(field, ' ');
    if (field != nullptr) ++field;
  }
  static const long kTicksPerSecond = std::max(sysconf(_SC_CLK_TCK), 1L);
  sample.cpu_ns = ticks * (1'000'000'000ull / static_cast<uint64_t>(kTicksPerSecond));
  sample.cpu_advancing = previous != nullptr && previous->sampled_ns != 0 && sample.cpu_ns > previous->cpu_ns;
  if (sample.state == ProcessState::kSleeping || sample.state == ProcessState::kDiskWait) {
    std::snprintf(path, sizeof path, "/proc/%d/wchan", pid);
    char wchan[128];
    // "0" when the kernel does not say (no symbol, or not allowed to).
    if (ReadProcFile(path, wchan, sizeof wchan) > 0 && std::strcmp(wchan, "0") != 0) sample.wait_channel = wchan;
  }
  return sample;
}

std::string ThisHostName() {
  char host[ring::kHostBytes] = {};
  gethostname(host, sizeof host - 1);  // as the ring writer: truncated, NUL-terminated
  return host;
}

}  // namespace collwatch
