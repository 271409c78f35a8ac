// `collwatch top`'s target and its end: the collector and the files of its secrets, named by
// flags or found in a run's folder (run.json, written by `collwatch run` once its command
// has started); then the dashboard, and how it ended in words on stderr and an exit status.
// Threading: the main thread.
#ifndef COLLWATCH_CLI_TOP_COMMAND_H_
#define COLLWATCH_CLI_TOP_COMMAND_H_

#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "cli/run_record.h"
#include "dashboard/top_command.h"

namespace collwatch {

struct TopCommandOptions {
  std::string run_dir;      // DIR: the --out folder of a running `collwatch run`
  std::string token_file;   // --token-file
  std::string tls_ca_file;  // --tls-ca
  std::string size;         // --size COLSxROWS of a --once frame
  dashboard::TopOptions top;  // --collector, --job, --plain, --refresh, --once, --json
};

// The record of the run that is going on in `run_dir`; an error a user can act on when
// the folder holds no run record, or its run has ended (with or without its last word).
absl::StatusOr<RunRecord> LiveRunIn(const std::string& run_dir);

// Runs `collwatch top`; returns its exit status (cli/exit_codes.h): 0 quit or the frame
// printed, 1 no state from the collector in time, 2 bad usage, no run going on in DIR, a
// token or a job the collector refused, or no terminal.
int RunTopCommand(TopCommandOptions options, std::ostream& out, std::ostream& err);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_TOP_COMMAND_H_
