// The import, and what it tells the user: ranks read, ranks missing, history cut.
#include "cli/import_command.h"

#include "absl/strings/str_join.h"
#include "files/safe_text.h"
#include "flight_recorder/trace_import.h"
#include "ring/ring_format.h"
#include "ring/settings.h"

namespace collwatch {
namespace {

// A job id names a folder of the trace store and travels in protobuf strings (UTF-8 only):
// it must be in the alphabet ring file names give a job (SafeJobName) as it is, whole.
bool IsJobId(const std::string& job) {
  char safe[ring::kJobBytes];
  SafeJobName(job.c_str(), safe, sizeof safe);
  return !job.empty() && job == safe;
}

}  // namespace

int RunImportCommand(const ImportCommandOptions& options, std::ostream& out, std::ostream& err) {
  // Checked before anything is read or created: nothing is left behind.
  if (!IsJobId(options.job)) {
    err << "collwatch import: --job '" << TerminalText(options.job) << "' is not a job id: give at most "
        << ring::kJobBytes - 1 << " letters, digits, '-', '_' and '.', not '.' first (nothing written)\n";
    return 2;
  }
  flight_recorder::ImportOptions import;
  import.inputs = options.flight_recorder;
  import.out_dir = options.out_dir;
  import.job = options.job;
  absl::StatusOr<flight_recorder::ImportRecord> record = flight_recorder::ImportFlightRecorder(import);
  if (!record.ok()) {
    err << "collwatch import: " << TerminalText(std::string(record.status().message())) << " (nothing written)\n";
    return 2;
  }
  std::vector<int32_t> ranks;
  for (const flight_recorder::ImportedDump& dump : record->dumps) ranks.push_back(dump.rank);
  out << "Imported " << record->dumps.size() << " Flight Recorder dump" << (record->dumps.size() == 1 ? "" : "s")
      << " (ranks " << absl::StrJoin(ranks, ", ") << ", format " << record->dumps.front().version << ") into "
      << TerminalText(options.out_dir) << "\n";
  for (const std::string& note : record->notes) out << "  note: " << TerminalText(note) << "\n";
  // A file that may hold a rank's dump, not read: said on stderr too, never only a note.
  for (const std::string& file : record->not_read) {
    err << "collwatch import: warning: " << TerminalText(file) << ": the analysis will say the data is incomplete\n";
  }
  out << "Analysed as of " << record->as_of_basis << ".\n";
  out << "Next: collwatch analyze " << TerminalText(options.out_dir) << "\n";
  return 0;
}

}  // namespace collwatch
