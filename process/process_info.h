// What collwatch knows of a process of the job apart from its calls: where it runs, its
// RANK, its clock offset, and how it is doing. The ring reader's identity, the wire's
// RankIdentity and the analyzer's model all turn into this; the one definition of a
// process's liveness (StatusOfRing, LivenessOf) serves the agent, the post-mortem loader,
// the analyzer and the collector's live state. Threading: plain values, pure functions.
#ifndef COLLWATCH_PROCESS_PROCESS_INFO_H_
#define COLLWATCH_PROCESS_PROCESS_INFO_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "process/process_sample.h"
#include "ring/ring_format.h"

namespace collwatch {

// Larger communicator sizes in a record are damage.
inline constexpr int32_t kMaxRanks = 1 << 17;

// Times come from the writers' clocks, which a damaged ring or a hostile agent makes
// anything: conversions saturate into [1, kMaxTimeNs] (the year 2116), so that the
// difference of two times never overflows.
inline constexpr int64_t kMaxTimeNs = int64_t{1} << 62;
// The offset from a writer's CLOCK_MONOTONIC to CLOCK_REALTIME, from the pair of readings
// its ring header holds, within [-kMaxTimeNs, kMaxTimeNs].
int64_t RealtimeOffsetNs(uint64_t start_realtime_ns, uint64_t start_monotonic_ns);

// Liveness of a process as its agent (or the ring) reports it.
enum class ProcessStatus : uint8_t { kRunning, kExited, kDisabled, kDead, kSilent };
std::string_view ProcessStatusName(ProcessStatus status);

// A live writer whose heartbeat is older than this is silent (it beats every 100 ms).
inline constexpr double kSilentAfterS = 3.0;

// What a ring says of its writer, read on the writer's node at `now_monotonic_ns`: exited
// when it went through exit(); dead when its process is gone without (killed, crashed,
// _exit); recording disabled; silent when its heartbeat (writer CLOCK_MONOTONIC, 0: none
// yet) is older than `silent_after_s`; else running. The agent and the post-mortem loader
// both ask this.
ProcessStatus StatusOfRing(ring::WriterState state, bool writer_alive, uint64_t heartbeat_ns,
                           uint64_t now_monotonic_ns, double silent_after_s = kSilentAfterS);

// How a process is doing, from its status and the latest look at it from its node.
enum class Liveness : uint8_t {
  kRunning,          // running (recording or not), or nothing says otherwise
  kStopped,          // silent, but seen stopped (SIGSTOP, a debugger) or stuck in I/O: still there
  kSilent,           // stopped beating, with nothing to say it is still there
  kExited,           // went through exit()
  kKilledOrCrashed,  // its writer is gone without exiting
  kGone,             // seen gone, or a zombie, from its node
};
// An unsampled `sample` (sampled_ns 0) adds nothing to `status`.
Liveness LivenessOf(ProcessStatus status, const ProcessSample& sample);
// No longer takes part in the job's collectives: exited, killed or crashed, silent, gone.
bool IsLost(Liveness liveness);
// Lost without exiting (killed or crashed, silent, gone): what status lines count as lost,
// since every rank exits at the end of a job that went well.
bool IsLostWithoutExit(Liveness liveness);

struct ProcessInfo {
  std::string host;
  int32_t pid = 0;
  int32_t global_rank = ring::kUnset;  // RANK, when the launcher set it
  int32_t world_size = ring::kUnset;
  int64_t realtime_offset_ns = 0;  // writer CLOCK_MONOTONIC + offset = CLOCK_REALTIME
};

}  // namespace collwatch

#endif  // COLLWATCH_PROCESS_PROCESS_INFO_H_
