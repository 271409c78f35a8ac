// run.json: what `collwatch run` writes beside its traces about the run itself, once when
// the command has started (state "running", and where its collector listens, for
// `collwatch top DIR`) and again when it has ended: the job id, the command and how it
// ended, what the agent shipped, the options that change the analysis, the rank processes
// it saw, the Flight Recorder dumps asked before a stop. `collwatch analyze` and `dump`
// read it back (trace_loader).
// Threading: any thread.
#ifndef COLLWATCH_CLI_RUN_RECORD_H_
#define COLLWATCH_CLI_RUN_RECORD_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/flight_recorder_dump.h"
#include "cli/job_processes.h"
#include "nlohmann/json.hpp"

namespace collwatch {

struct RunRecord {
  // "running" from the command's start, "ended" once the record is final; a record of a
  // collwatch before the start record existed has none, and reads as ended.
  bool running = false;
  std::string job;
  std::vector<std::string> command;
  int exit_status = -1;        // the command's, as a shell shows it (128 + signal)
  std::string collector;       // the address the agent shipped to
  std::string token_file;      // absolute path of the file holding its token ("" none)
  std::string tls_ca_file;     // absolute path of its TLS root certificates ("" none: no TLS)
  pid_t collwatch_pid = 0;     // the `collwatch run` process, on collwatch_host
  std::string collwatch_host;
  std::string traces;          // OUT/JOB
  int rings = 0;               // the agent's counts
  uint64_t events = 0;
  uint64_t lost = 0;           // overwritten in the rings before they were read
  bool drained = false;        // every record reached the collector
  double stall_after_s = 0;    // the stall threshold's floor in force (0: an external collector's, unknown)
  bool kill_on_hang = false;
  bool one_gpu = false;
  bool stopped_hung_job = false;
  int64_t stopped_at_ns = 0;   // CLOCK_REALTIME of the stop (0: no stop)
  // The ranks seen in the command's process tree and the last look at each (after a
  // stop, the look before it).
  std::map<pid_t, RankProcess> rank_processes;
  // The Flight Recorder dumps --kill-on-hang asked for before the stop, by rank.
  std::vector<FlightRecorderDump> flight_recorder_dumps;
};

// The record as run.json's object; the keys are those trace_loader.cc reads.
nlohmann::json RunRecordJson(const RunRecord& record);

// Writes it, indented, to OUT_DIR/run.json.
absl::Status WriteRunRecord(const std::string& out_dir, const RunRecord& record);

// RunRecordJson's inverse, lenient as a reader of a file others may have edited: a key
// missing or of the wrong type keeps its default (exit_status -1: not known), a rank
// process without a host or a pid is left out.
RunRecord RunRecordFromJson(const nlohmann::json& json);

// OUT_DIR/run.json when it is there and names its job; nullopt otherwise.
std::optional<RunRecord> ReadRunRecord(const std::string& out_dir);
// The same, saying why not: NOT_FOUND when OUT_DIR holds no run.json at all; another
// error naming the file when one is there but cannot be read as a run record (cut short,
// a FIFO, a link to a device, no job): a run whose record is lost, which readers must
// say, since it held how the job ended.
absl::StatusOr<RunRecord> ReadRunRecordOrWhy(const std::string& out_dir);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_RUN_RECORD_H_
