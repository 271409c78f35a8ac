// What collwatch knows of a process of the job apart from its calls: where it runs, its
// RANK, its clock offset, and its ring's liveness as the ring or its agent reports it.
// The ring reader's identity, the wire's RankIdentity and the analyzer's model all turn
// into this. Threading: plain values and pure functions.
#ifndef COLLWATCH_PROCESS_PROCESS_INFO_H_
#define COLLWATCH_PROCESS_PROCESS_INFO_H_

#include <cstdint>
#include <string>
#include <string_view>

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

struct ProcessInfo {
  std::string host;
  int32_t pid = 0;
  int32_t global_rank = ring::kUnset;  // RANK, when the launcher set it
  int32_t world_size = ring::kUnset;
  int64_t realtime_offset_ns = 0;  // writer CLOCK_MONOTONIC + offset = CLOCK_REALTIME
};

}  // namespace collwatch

#endif  // COLLWATCH_PROCESS_PROCESS_INFO_H_
