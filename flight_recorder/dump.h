// One rank's PyTorch Flight Recorder dump, as PyTorch writes it on a watchdog timeout
// (TORCH_NCCL_DUMP_ON_TIMEOUT: a pickle to TORCH_FR_DUMP_TEMP_FILE<rank>) or as
// _dump_nccl_trace_json gives it: the process groups the rank knew and its last entries
// (one per collective or point-to-point operation it enqueued). Format versions 2.0 to
// 2.10 (PyTorch 2.4 to 2.11); the keys a version lacks are left at their defaults.
// docs/flight-recorder.md describes the fields. Threading: none.
#ifndef COLLWATCH_FLIGHT_RECORDER_DUMP_H_
#define COLLWATCH_FLIGHT_RECORDER_DUMP_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace collwatch::flight_recorder {

// A process group as the rank knew it (pg_config).
struct DumpGroup {
  std::string name;            // unique within the job ("0" is the default group)
  std::string desc;            // "default_pg", "undefined", or the user's group_desc
  std::vector<int32_t> ranks;  // global ranks, in group order
};

struct DumpFrame {
  std::string function;
  std::string file;
  int32_t line = 0;
};

// One entry: an operation enqueued on a process group.
struct DumpEntry {
  int64_t record_id = 0;          // per process, over all groups
  std::string group_name;         // process_group[0]
  std::string group_desc;         // process_group[1]
  int64_t collective_seq_id = 0;  // per group: collective launches (a coalesced group counts once)
  int64_t p2p_seq_id = 0;         // per group: point-to-point launches
  std::string profiling_name;     // "nccl:all_reduce", "nccl:send 0->1", ...
  bool is_p2p = false;
  std::vector<std::vector<int64_t>> input_sizes, output_sizes;
  std::vector<std::string> input_dtypes, output_dtypes;
  std::string state;              // "scheduled", "started" or "completed"
  int64_t time_created_ns = 0;    // wall clock (CLOCK_REALTIME) when enqueued
  int64_t time_started_ns = 0;    // when its start was seen (0: never)
  int64_t time_completed_ns = 0;  // when its completion was seen (0: never)
  bool retired = false;           // the watchdog is done with it
  int64_t timeout_ms = 0;         // 0: not recorded (before version 2.2)
  std::string thread_name;
  std::vector<DumpFrame> frames;  // Python frames at the call, innermost first (pickle only)

  bool completed() const { return state == "completed"; }
};

struct FlightRecorderDump {
  std::string version;           // "2.10"
  std::string comm_lib_version;  // NCCL's version ("" not recorded)
  std::map<std::string, DumpGroup> groups;  // by name
  std::vector<DumpEntry> entries;           // oldest first
};

// Decodes a dump: a pickle (first byte 0x80) or the JSON form. INVALID_ARGUMENT saying
// what is wrong (truncated, not a dump, a field of the wrong type) for anything else.
absl::StatusOr<FlightRecorderDump> ParseDump(std::string_view bytes);

// The global rank a dump file's name gives: PyTorch names each PREFIX<rank> (an extension
// such as ".json" or ".pkl" after it is allowed). nullopt: the name ends in no number.
std::optional<int32_t> RankFromFileName(std::string_view file_name);

}  // namespace collwatch::flight_recorder

#endif  // COLLWATCH_FLIGHT_RECORDER_DUMP_H_
