// `collwatch run -- CMD`: CMD under collwatch, with the preload, an agent and (unless
// --collector names one) an embedded collector, findings as they come and a report at the
// end. This is the order of a run; each step lives in its own file (run_environment,
// run_services, run_supervisor). Threading: call from the main thread before any other
// thread starts: it blocks the stop signals, which every thread started later inherits.
#ifndef COLLWATCH_CLI_RUN_COMMAND_H_
#define COLLWATCH_CLI_RUN_COMMAND_H_

#include "cli/run_options.h"

namespace collwatch {

// Runs CMD under collwatch and returns CMD's exit status (128 + signal if a signal ended
// it), or its own outcomes (cli/exit_codes.h: not healthy with --fail-on-findings, a hung
// job stopped, the run could not start).
int RunJobCommand(const RunOptions& options);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_RUN_COMMAND_H_
