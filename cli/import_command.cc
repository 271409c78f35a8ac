// The import, and what it tells the user: ranks read, ranks missing, history cut.
#include "cli/import_command.h"

#include "absl/strings/str_join.h"
#include "flight_recorder/trace_import.h"

namespace collwatch {

int RunImportCommand(const ImportCommandOptions& options, std::ostream& out, std::ostream& err) {
  flight_recorder::ImportOptions import;
  import.inputs = options.flight_recorder;
  import.out_dir = options.out_dir;
  import.job = options.job;
  absl::StatusOr<flight_recorder::ImportRecord> record = flight_recorder::ImportFlightRecorder(import);
  if (!record.ok()) {
    err << "collwatch import: " << record.status().message() << " (nothing written)\n";
    return 2;
  }
  std::vector<int32_t> ranks;
  for (const flight_recorder::ImportedDump& dump : record->dumps) ranks.push_back(dump.rank);
  out << "Imported " << record->dumps.size() << " Flight Recorder dump" << (record->dumps.size() == 1 ? "" : "s")
      << " (ranks " << absl::StrJoin(ranks, ", ") << ", format " << record->dumps.front().version << ") into "
      << options.out_dir << "\n";
  for (const std::string& note : record->notes) out << "  note: " << note << "\n";
  out << "Analysed as of " << record->as_of_basis << ".\n";
  out << "Next: collwatch analyze " << options.out_dir << "\n";
  return 0;
}

}  // namespace collwatch
