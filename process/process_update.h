// What one message about a process says, in the one form every source turns into and the
// analyzer's model applies (analyzer::JobModel::Apply): an agent's batch as the collector
// stored it (store/event_codec.h), a stored rank trace, or a ring read post-mortem.
// Threading: plain values and pure functions.
#ifndef COLLWATCH_PROCESS_PROCESS_UPDATE_H_
#define COLLWATCH_PROCESS_PROCESS_UPDATE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "process/process_info.h"
#include "process/process_sample.h"
#include "ring/ring_reader.h"

namespace collwatch {

struct ProcessUpdate {
  std::vector<IndexedRecord> records;                     // new records, each lane in order
  std::vector<std::pair<uint32_t, std::string>> regions;  // writer's region id -> NVTX name
  std::vector<std::pair<uint32_t, CallPath>> call_paths;  // writer's call path id -> its frames
  std::optional<ProcessStatus> status;  // nullopt: the message says nothing of it
  uint64_t heartbeat_ns = 0;            // writer CLOCK_MONOTONIC of its latest beat (0: none)
  uint64_t lost_records = 0;            // lost in the ring, torn or dropped by the writer, so far
  ProcessSample sample;                 // a look from its node (sampled_ns 0: none)
  std::optional<int32_t> exit_code;     // what it passed to exit() (0-255), as its ring recorded it
};

// The piece of names and the piece of status that frame a process's records, taken from its
// whole update: applied in pieces, the names go first and the status last, as Apply takes a
// whole one. The names are moved out of `whole`.
ProcessUpdate NamesPieceOf(ProcessUpdate& whole);
ProcessUpdate StatusPieceOf(const ProcessUpdate& whole);

// The process that writes a ring, as its header names it.
ProcessInfo ProcessInfoOfRing(const RingIdentity& identity);

// A ring read whole at `now_monotonic_ns` (the reader's node): `batch` (moved in), the
// names of the regions its records use and their call paths. The status follows StatusOfRing.
ProcessUpdate ProcessUpdateFromRing(const RingReader& reader, ReadBatch batch, uint64_t now_monotonic_ns);

}  // namespace collwatch

#endif  // COLLWATCH_PROCESS_PROCESS_UPDATE_H_
