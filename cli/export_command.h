// `collwatch export [--format chrome] DIR -o FILE`: a run's calls as a Chrome trace
// (analyzer/chrome_export.h) with its findings marked, written while the traces are read
// (cli/trace_pieces.h), in memory that does not grow with the run. Findings come from
// --findings FILE, else DIR/report.json, else the analysis `analyze` makes (which holds the
// run as analyze does). Threading: the caller's thread.
#ifndef COLLWATCH_CLI_EXPORT_COMMAND_H_
#define COLLWATCH_CLI_EXPORT_COMMAND_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

namespace collwatch {

struct ExportOptions {
  std::string dir;
  std::string file;           // "-": standard output
  std::string job;            // the job to export where the folder holds several
  bool absolute_time = false; // ts in µs of CLOCK_REALTIME since the Unix epoch
  std::optional<int64_t> time_base_ns;  // ts in µs since this CLOCK_REALTIME ns (implies absolute)
  std::string ranks;          // "0,3-5": the processes of these job ranks ("" all)
  std::optional<double> since_s;  // the window, seconds from the job's first call
  std::optional<double> until_s;
  std::string findings_file;  // a report.json ("" DIR/report.json, else the analysis)
  bool no_findings = false;
};

// Writes the trace; a line saying what was written on `out` (unless the trace goes there),
// problems on `err`. Exit status: 0 written, 2 bad usage, unreadable input or an output
// that could not be written.
int RunExportCommand(const ExportOptions& options, std::ostream& out, std::ostream& err);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_EXPORT_COMMAND_H_
