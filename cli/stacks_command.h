// `collwatch stacks PID...`: what the given processes, or the rank processes under them
// (a launcher's pid gives its ranks), are doing now: each one's thread of interest merged
// into classes across ranks (analyzer/stack_classes.h), then every thread's stacks.
// Processes of several jobs (a pid high in the tree, such as 1) are grouped by job and
// each job shown apart.
// Threading: the caller's thread.
#ifndef COLLWATCH_CLI_STACKS_COMMAND_H_
#define COLLWATCH_CLI_STACKS_COMMAND_H_

#include <sys/types.h>

#include <ostream>
#include <vector>

namespace collwatch {

struct StacksCommandOptions {
  std::vector<pid_t> pids;
  bool json = false;        // the stacks as one JSON object
  bool no_native = false;   // Python call paths only: nothing is stopped
};

// Exit status 0 when every process's stacks were read, 1 when some could not be, 2 when
// none of the pids names a process.
int RunStacksCommand(const StacksCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_STACKS_COMMAND_H_
