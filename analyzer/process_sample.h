// What a look at a process from outside says (its state, CPU time, wait channel), and
// what a finding says about a process it names. Plain values with no dependencies, so
// that the job model and findings can hold them; liveness.h takes and explains them.
// Threading: plain values.
#ifndef COLLWATCH_ANALYZER_PROCESS_SAMPLE_H_
#define COLLWATCH_ANALYZER_PROCESS_SAMPLE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace collwatch::analyzer {

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

// What a finding says about one process it names (report.json finding `processes`).
struct ProcessReport {
  int32_t rank = -1;          // rank in the finding's communicator
  int32_t global_rank = -1;   // RANK of the process, -1 unknown
  int32_t pid = 0;
  std::string host;
  std::string state;          // "running", "sleeping in futex_wait_queue", "I/O (in ...)",
                              // "stopped", "zombie", "gone", "unknown"
  bool cpu_advancing = false;
  double heartbeat_age_s = -1;   // seconds since its ring's heartbeat (-1: none)
  bool heartbeat_fresh = false;  // heartbeat younger than a few watcher periods
  std::string ended;             // "" while running; "exited with 1",
                                 // "killed or crashed (no exit recorded)", ...
};

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_PROCESS_SAMPLE_H_
