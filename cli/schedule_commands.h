// `collwatch diff`, `baseline` and `check`: load trace folders, run the analyzer's schedule
// tools (analyzer/schedule_diff.h, baseline.h, schedule_check.h), write the files, and turn
// the outcome into an exit status.
// Threading: the caller's thread.
#ifndef COLLWATCH_CLI_SCHEDULE_COMMANDS_H_
#define COLLWATCH_CLI_SCHEDULE_COMMANDS_H_

#include <ostream>
#include <string>

#include "cli/exit_codes.h"

namespace collwatch {

// Exit statuses of the schedule commands (cli/exit_codes.h). kExitBadInput: unreadable
// folder or baseline, unwritable file, or data that is not the whole run's (a rank
// without a trace, a trace skipped or damaged) where the answer would be "same".
inline constexpr int kExitSame = kExitOk;          // identical / matches the baseline / written
inline constexpr int kExitChanged = kExitFindings;  // the schedules differ

struct DiffCommandOptions {
  std::string dir_a;
  std::string dir_b;
  bool ignore_regions = false;
  bool code_lines = false;  // regions from Python call paths name their lines
  bool json = false;        // docs/schema/diff.schema.json instead of the text
};
// Prints the first difference of each communicator's schedule between two runs.
int RunDiffCommand(const DiffCommandOptions& options, std::ostream& out, std::ostream& err);

struct BaselineCommandOptions {
  std::string dir;
  std::string file;          // "-": standard output
  bool code_lines = false;   // regions from Python call paths name their lines; `check` follows
};
// Writes the baseline of the run in `dir` to `file`.
int RunBaselineCommand(const BaselineCommandOptions& options, std::ostream& out, std::ostream& err);

struct CheckCommandOptions {
  std::string baseline_file;
  std::string dir;
  std::string junit_file;  // empty: none
  bool ignore_regions = false;
  bool json = false;       // docs/schema/check.schema.json instead of the text
};
// Compares the run in `dir` with the baseline; a JUnit file too when asked, also when the
// input is bad (an error case then).
int RunCheckCommand(const CheckCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_SCHEDULE_COMMANDS_H_
