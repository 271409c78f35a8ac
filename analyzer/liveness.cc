// Looking at processes through /proc, and the words for how a process is doing.
#include "analyzer/liveness.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace collwatch::analyzer {
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

bool SampledAlive(const ProcessSample& sample) {
  return sample.sampled_ns != 0 && sample.state != ProcessState::kGone && sample.state != ProcessState::kZombie &&
         sample.state != ProcessState::kUnknown;
}

// "sleeping in futex_wait_queue", "I/O (in io_schedule)", ...
std::string StateText(const Process& process) {
  const ProcessSample& sample = process.sample;
  const bool ring_ended = process.status == ProcessStatus::kExited || process.status == ProcessStatus::kDead;
  // The ring's word is newer than a sample that still saw the process alive: agents stop
  // sampling once a ring is drained.
  if (ring_ended && (sample.sampled_ns == 0 || SampledAlive(sample))) return "gone";
  if (sample.sampled_ns == 0) return "unknown";
  switch (sample.state) {
    case ProcessState::kSleeping:
      return sample.wait_channel.empty() ? "sleeping" : absl::StrCat("sleeping in ", sample.wait_channel);
    case ProcessState::kDiskWait:
      return sample.wait_channel.empty() ? "I/O" : absl::StrCat("I/O (in ", sample.wait_channel, ")");
    default:
      return std::string(ProcessStateName(sample.state));
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

std::string_view ProcessEndName(ProcessEnd end) {
  switch (end) {
    case ProcessEnd::kRunning: return "running";
    case ProcessEnd::kExited: return "exited";
    case ProcessEnd::kKilledOrCrashed: return "killed or crashed";
    case ProcessEnd::kStoppedByCollwatch: return "stopped by collwatch";
    case ProcessEnd::kGone: return "gone";
  }
  return "running";
}

ProcessEnd EndOf(const Process& process) {
  if (process.stopped_by_collwatch) return ProcessEnd::kStoppedByCollwatch;
  const bool seen_ended = process.sample.sampled_ns != 0 && (process.sample.state == ProcessState::kGone ||
                                                             process.sample.state == ProcessState::kZombie);
  if (process.observed_only) return seen_ended ? ProcessEnd::kGone : ProcessEnd::kRunning;
  switch (process.status) {
    case ProcessStatus::kExited: return ProcessEnd::kExited;
    case ProcessStatus::kDead: return ProcessEnd::kKilledOrCrashed;
    default: return ProcessEnd::kRunning;
  }
}

bool EndedBadly(const JobModel& model, ProcessId process_id) {
  const Process& process = model.process(process_id);
  switch (EndOf(process)) {
    case ProcessEnd::kKilledOrCrashed:
      return true;
    case ProcessEnd::kGone:
      for (size_t other = 0; other < model.process_count(); ++other) {
        if (!model.process(static_cast<ProcessId>(other)).observed_only) return true;
      }
      return false;
    case ProcessEnd::kExited:
      return process.exit_recorded && process.exit_code != 0;
    default:
      return false;
  }
}

std::string EndedText(const Process& process) {
  switch (EndOf(process)) {
    case ProcessEnd::kRunning: return "";
    case ProcessEnd::kExited:
      return process.exit_recorded ? absl::StrCat("exited with ", process.exit_code) : "exited (status not recorded)";
    case ProcessEnd::kKilledOrCrashed: return "killed or crashed (no exit recorded)";
    case ProcessEnd::kStoppedByCollwatch: return "stopped by collwatch";
    case ProcessEnd::kGone: return "gone before its first NCCL call (how it ended is not known)";
  }
  return "";
}

bool IsRankProcess(const JobModel& model, ProcessId process_id) {
  const Process& process = model.process(process_id);
  if (!process.observed_only || process.info.global_rank < 0) return true;
  for (size_t other = 0; other < model.process_count(); ++other) {
    const Process& candidate = model.process(static_cast<ProcessId>(other));
    if (!candidate.observed_only && candidate.info.global_rank == process.info.global_rank) return false;
  }
  return true;
}

ProcessReport DescribeProcess(const JobModel& model, ProcessId process_id, int32_t comm_rank, int64_t now_ns) {
  const Process& process = model.process(process_id);
  ProcessReport report;
  report.rank = comm_rank;
  report.global_rank = process.info.global_rank;
  report.pid = process.info.pid;
  report.host = process.info.host;
  report.state = StateText(process);
  report.cpu_advancing = SampledAlive(process.sample) && process.sample.cpu_advancing;
  if (process.heartbeat_ns > 0) {
    report.heartbeat_age_s = static_cast<double>(std::max<int64_t>(now_ns - process.heartbeat_ns, 0)) / 1e9;
    report.heartbeat_fresh = report.heartbeat_age_s < kHeartbeatFreshS;
  }
  report.ended = EndedText(process);
  return report;
}

}  // namespace collwatch::analyzer
