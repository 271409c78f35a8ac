// How a process is doing and how it ended, in the analysis's words.
#include "analyzer/liveness.h"

#include "absl/strings/str_cat.h"

namespace collwatch::analyzer {
namespace {

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
  // Without a ring its calls are unknown: the reason is what there is to say.
  if (process.observed_only && !process.no_ring_why.empty()) return absl::StrCat("not recorded: ", process.no_ring_why);
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
