// Loading a finished (or crashed) job into the analyzer's model: from a `collwatch run`
// output folder, a job folder or one rank's trace in the trace store, or from ring files
// alone when no collector ran. Damaged inputs are reported and skipped, never fatal to
// the rest. Threading: single-threaded.
#ifndef COLLWATCH_CLI_TRACE_LOADER_H_
#define COLLWATCH_CLI_TRACE_LOADER_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "analyzer/job_model.h"
#include "cli/processes_seen.h"
#include "cli/run_record.h"
#include "flight_recorder/import_record.h"
#include "ring/ring_leftovers.h"
#include "ring/ring_reader.h"
#include "store/trace_store.h"

namespace collwatch {

struct LoadSummary {
  std::string job;
  std::string source;                 // "trace store" or "rings"
  std::vector<std::string> inputs;    // rank traces or ring files read
  // What the data lacks (inputs skipped or damaged, records lost before they were
  // shipped): the report's data gaps.
  std::vector<std::string> warnings;
  // What a report says of its source, not warned about (a ring's history overwritten by
  // design, histories cut by Flight Recorder).
  std::vector<std::string> notes;
  uint64_t records = 0;
  double stall_after_s = 0;           // from run.json when present (0: not set)
  int64_t stopped_at_ns = 0;          // run.json: when collwatch stopped the hung job (0: it did not)
  std::optional<int> command_exit_status;  // run.json: how the job's command exited
  // Imported Flight Recorder dumps: handed over, not recorded here, so the files their
  // call paths name are not opened unless under a source root the user names.
  bool imported = false;
  // Imported Flight Recorder dumps: per communicator, the first collective every rank's
  // kept history holds, where their histories were cut apart (flight_recorder.json).
  std::map<uint64_t, uint64_t> compared_from_seq;
};

// Where a path's traces are (LoadTraces and `collwatch dump` read the same).
struct TraceSources {
  enum class Kind { kTraceStore, kRings };
  Kind kind = Kind::kTraceStore;
  std::vector<std::string> paths;  // rank trace folders, or ring files; sorted
  // A `collwatch run` output folder's run.json (its job names the traces), when there is one.
  std::optional<RunRecord> run;
  // Why the run.json there could not be read ("" when there is none, or it was read).
  std::string run_record_lost;
  bool paths_from_run = false;     // `paths` are the traces of run.json's job
  // A `collwatch import --flight-recorder` folder's flight_recorder.json, when there is one.
  std::optional<flight_recorder::ImportRecord> import;
  // A ring folder's notes of the job's ranks that made no ring (ring/ring_notes.h).
  std::vector<NoRingNoteRead> no_rings;
};

// The traces `path` holds: a folder with run.json (collwatch run --out) or with
// flight_recorder.json (collwatch import --flight-recorder), a folder of rank
// traces (DIR/<job>), an output folder of one job, one rank trace folder, a folder of
// *.ring files, or a ring file. NOT_FOUND when it holds none of these. `job` picks one
// job where the path holds several (job folders of an output folder, rings of several
// jobs in a ring folder); without it such a path is INVALID_ARGUMENT naming the jobs, never
// read as one job.
absl::StatusOr<TraceSources> FindTraces(const std::string& path, const std::string& job = "");

// What LoadTraces notes of `sources` before it reads them: run.json's job and how its
// command ended (or that the record could not be read), an import's notes, the source.
void DescribeSources(const TraceSources& sources, LoadSummary* summary);
// What a rank trace's reader found missing (damage skipped, a torn tail, records lost in
// the ring before they were shipped), as LoadTraces warns of it.
void NoteRankTraceGaps(const std::string& dir, const RankTraceReader& reader, LoadSummary* summary);
// What reading a ring found overwritten (a note), torn, dropped or damaged (warnings).
void NoteRingGaps(const std::string& path, uint64_t lost, uint64_t torn, uint64_t damaged, uint64_t dropped,
                  LoadSummary* summary);

// The ring at `path`, or the rank trace in folder `dir`, opened for reading once per
// process: nullptr (and a note in `summary`) for a copy of one `seen` has read already.
absl::StatusOr<std::unique_ptr<RingReader>> OpenRingOnce(const std::string& path, LoadSummary* summary,
                                                         ProcessesSeen* seen);
absl::StatusOr<std::unique_ptr<RankTraceReader>> OpenRankTraceOnce(const std::string& dir, LoadSummary* summary,
                                                                   ProcessesSeen* seen);

// Called on the loading thread as rank traces are read: how many of how many.
using LoadProgress = std::function<void(size_t done, size_t total)>;
// Called on the loading thread once a process's trace or ring is wholly in the model
// (`collwatch analyze` folds its agreeing windows: Analyzer::FoldLoadedProcess).
using TraceApplied = std::function<void(analyzer::ProcessId process)>;

// Fills `model` from `path`: a folder with run.json (collwatch run --out), a folder of
// rank traces (DIR/<job>), one rank trace folder, a folder of *.ring files, or a ring
// file. NOT_FOUND when the path holds none of these. Rank traces are read (and from 2
// cores up built, and where `model` shares its fold references folded) on every core and
// taken into `model` in their order (analyzer::TakeBuiltProcess).
absl::Status LoadTraces(const std::string& path, analyzer::JobModel* model, LoadSummary* summary,
                        const std::string& job = "", const LoadProgress& progress = nullptr,
                        const TraceApplied& applied = nullptr);

// LoadTraces for the commands: the loader's warnings, records it could not place and
// any error go to `err` as "collwatch COMMAND: ...". False when nothing could be read.
bool LoadTracesForCommand(const std::string& command, const std::string& path, analyzer::JobModel* model,
                          LoadSummary* summary, std::ostream& err, const std::string& job = "",
                          const TraceApplied& applied = nullptr);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_TRACE_LOADER_H_
