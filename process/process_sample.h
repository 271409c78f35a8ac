// A look at a process from outside, through /proc (its state, CPU time, wait channel):
// the agent and `collwatch run` take them on the process's node, the wire carries them,
// the analyzer explains them (analyzer/liveness.h).
// Threading: plain values; SampleProcess reads /proc, never blocks long.
#ifndef COLLWATCH_PROCESS_PROCESS_SAMPLE_H_
#define COLLWATCH_PROCESS_PROCESS_SAMPLE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace collwatch {

// The kernel's view of a process (/proc/PID/stat), reduced to what a hang diagnosis needs.
// Values equal proto ProcessState's.
enum class ProcessState : uint8_t { kUnknown, kRunning, kSleeping, kDiskWait, kStopped, kZombie, kGone };
// "unknown", "running", "sleeping", "I/O", "stopped", "zombie", "gone"
std::string_view ProcessStateName(ProcessState state);
// The inverse of ProcessStateName; nullopt for any other text.
std::optional<ProcessState> ParseProcessState(std::string_view name);

// One look at a process from its node.
struct ProcessSample {
  ProcessState state = ProcessState::kUnknown;
  std::string wait_channel;    // /proc/PID/wchan while sleeping or in I/O ("" unknown)
  uint64_t cpu_ns = 0;         // utime + stime, all threads
  bool cpu_advancing = false;  // cpu_ns grew since the previous sample
  int64_t sampled_ns = 0;      // CLOCK_REALTIME of the sample (0: never sampled)
};

// Reads /proc/PID/stat and /proc/PID/wchan (no ptrace, never blocks long); `previous`
// (nullptr: none) gives cpu_advancing. The state is the main thread's (the one that
// calls into the framework); the CPU time is the whole process's.
ProcessSample SampleProcess(int32_t pid, const ProcessSample* previous, int64_t now_realtime_ns);

// This machine's name as ring headers record it (ProcessInfo::host of its processes).
std::string ThisHostName();

}  // namespace collwatch

#endif  // COLLWATCH_PROCESS_PROCESS_SAMPLE_H_
