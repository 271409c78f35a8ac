// `collwatch import --flight-recorder`: PyTorch Flight Recorder dumps of one job, one per
// rank, made into the trace folder `collwatch run` would have left (trace store, one
// rank trace per dump) plus flight_recorder.json (import_record.h), so that analyze,
// diff, export and the rest read them as they read collwatch's own traces. Each entry
// becomes the enter, return and completion records of one call on the communicator of
// its process group; its Python frames become its call path. All or nothing: the output
// folder appears only once complete. Threading: single-threaded.
#ifndef COLLWATCH_FLIGHT_RECORDER_TRACE_IMPORT_H_
#define COLLWATCH_FLIGHT_RECORDER_TRACE_IMPORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flight_recorder/dump.h"
#include "flight_recorder/dump_files.h"
#include "flight_recorder/import_record.h"
#include "proto/collwatch.pb.h"

namespace collwatch::flight_recorder {

struct ImportOptions {
  std::vector<std::string> inputs;  // dump files, or folders of them
  std::string out_dir;              // must not exist, or be empty
  std::string job = "flight-recorder";
};

// What the dumps become, before anything is written: per dump, its rank trace's identity
// and every record in one batch; and the import record.
struct Conversion {
  std::vector<v1::StreamEventsRequest> ranks;  // in dump order; `rank` is each one's identity
  ImportRecord record;
};
// Converts dumps already read (ReadDumps) of job `job`. Never fails: what cannot be
// carried over is counted in record.notes; the files ReadDumps skipped are said there
// and in record.not_read (SaySkipped).
Conversion ConvertDumps(const std::vector<RankDump>& dumps, const std::string& job,
                        const std::vector<SkippedFile>& skipped = {});

// Reads the dumps and writes the traces and flight_recorder.json under options.out_dir.
absl::StatusOr<ImportRecord> ImportFlightRecorder(const ImportOptions& options);
// The same from dumps already read (`skipped`: files ReadDumps skipped, said).
absl::StatusOr<ImportRecord> WriteImport(const std::vector<RankDump>& dumps, const ImportOptions& options,
                                         const std::vector<SkippedFile>& skipped = {});

}  // namespace collwatch::flight_recorder

#endif  // COLLWATCH_FLIGHT_RECORDER_TRACE_IMPORT_H_
