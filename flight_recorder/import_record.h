// flight_recorder.json: what `collwatch import --flight-recorder` writes beside the traces
// it made, for `collwatch analyze` and the other readers (cli/trace_loader): which dump
// gave which rank, the ranks that wrote none, where each rank's kept history starts, and
// the moment the dumps describe. Threading: any thread.
#ifndef COLLWATCH_FLIGHT_RECORDER_IMPORT_RECORD_H_
#define COLLWATCH_FLIGHT_RECORDER_IMPORT_RECORD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace collwatch::flight_recorder {

inline constexpr char kImportRecordName[] = "flight_recorder.json";

struct ImportedDump {
  std::string file;
  int32_t rank = -1;
  std::string version;       // the dump format's
  uint64_t entries = 0;
  bool history_cut = false;  // the Flight Recorder had dropped older entries
};

// A group whose ranks' kept histories start at different collectives.
struct GroupHistory {
  std::string group;   // "0 (default_pg)"
  uint64_t comm_id = 0;
  // The first collective every rank that dumped still holds: before it, some ranks'
  // calls are gone and cannot be compared.
  uint64_t compared_from_seq = 0;
};

struct ImportRecord {
  std::string job;
  std::vector<ImportedDump> dumps;
  std::vector<int32_t> missing_ranks;    // named in a group's ranks, with no dump
  std::vector<GroupHistory> cut_groups;
  int64_t as_of_ns = 0;                  // CLOCK_REALTIME the analysis is made as of
  std::string as_of_basis;               // why that moment
  double stall_after_s = 0;              // the job's own collective timeout (0: unknown)
  std::vector<std::string> notes;        // what could not be carried over, and why
  // Files of the folders given that may hold a dump and were not read ("FILE: is a FIFO,
  // not a regular file, not read"): the report's data gaps, its verdict incomplete.
  std::vector<std::string> not_read;
};

// Writes OUT_DIR/flight_recorder.json.
absl::Status WriteImportRecord(const std::string& out_dir, const ImportRecord& record);
// OUT_DIR/flight_recorder.json when it is there (lenient: a key missing or of the wrong
// type keeps its default); nullopt when it is not.
std::optional<ImportRecord> ReadImportRecord(const std::string& out_dir);

}  // namespace collwatch::flight_recorder

#endif  // COLLWATCH_FLIGHT_RECORDER_IMPORT_RECORD_H_
