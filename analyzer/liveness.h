// How a process is doing and how it ended, from what the model holds about it (its
// ring's status, heartbeat and exit, the latest sample from /proc: process/), for
// findings and the report's verdict. Threading: pure functions.
#ifndef COLLWATCH_ANALYZER_LIVENESS_H_
#define COLLWATCH_ANALYZER_LIVENESS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "analyzer/finding.h"
#include "analyzer/job_model.h"
#include "process/process_sample.h"

namespace collwatch::analyzer {

// A heartbeat younger than this is fresh. The writer beats every 100 ms, but agents ship
// it with their batches, at least once a second, and the store keeps one a second: an
// age of a second or so is normal for a live rank, seen online or post-mortem.
inline constexpr double kHeartbeatFreshS = 2.5;

// How a process ended, as far as anything recorded it.
enum class ProcessEnd : uint8_t {
  kRunning,             // not ended (or nothing says so)
  kExited,              // its ring says it went through exit(); Process::exit_code when recorded
  kKilledOrCrashed,     // its ring's writer is gone without exiting: a signal, a crash, _exit()
  kStoppedByCollwatch,  // ended when `collwatch run --kill-on-hang` stopped the job
  kGone,                // seen only from outside (no ring: no NCCL call yet), and gone
};
// "running", "exited", "killed or crashed", "stopped by collwatch", "gone"
std::string_view ProcessEndName(ProcessEnd end);
ProcessEnd EndOf(const Process& process);
// A process that failed: killed or crashed, exited with a status other than 0, or gone
// before any NCCL call while other ranks of the job used NCCL (with none that did, it may
// be a program that never meant to: nothing says it failed).
bool EndedBadly(const JobModel& model, ProcessId process);
// "" while running; "exited with 1", "killed or crashed (no exit recorded)", ...
std::string EndedText(const Process& process);

// False for a process seen only from outside whose RANK a process with a ring also
// claims (a launcher's wrapper, a worker forked before NCCL was used): not a rank itself.
bool IsRankProcess(const JobModel& model, ProcessId process);

// What a finding says about `process`, rank `comm_rank` of its communicator, as of
// `now_ns` (CLOCK_REALTIME).
ProcessReport DescribeProcess(const JobModel& model, ProcessId process, int32_t comm_rank, int64_t now_ns);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_LIVENESS_H_
