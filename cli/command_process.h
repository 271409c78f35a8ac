// `collwatch run`'s command as a child process: started in a process group of its own with
// the environment collwatch adds, polled without blocking, signalled and stopped as a
// whole group (a hung job's ranks all go together). Threading: the supervising thread.
#ifndef COLLWATCH_CLI_COMMAND_PROCESS_H_
#define COLLWATCH_CLI_COMMAND_PROCESS_H_

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace collwatch {

// How the command stands to the terminal on standard input.
enum class CommandTerminal {
  // SIGTTOU and SIGTTIN as this process has them (`collwatch run` ignores them).
  kAsCollwatch,
  // Its group becomes the terminal's foreground group, set from the child as well before
  // the exec (its first read or write finds it there), with SIGTTOU and SIGTTIN back to
  // default, as a shell's foreground job. This process must ignore SIGTTOU.
  kForeground,
};

// Starts `command` (argv[0] looked up in PATH) as the leader of a new process group, with
// `environment` set over this process's, default SIGINT/SIGTERM handling and, when
// `output_fd` >= 0, stdout and stderr going there and stdin from /dev/null. Returns the
// child's pid (also its group id), or -1 with errno set when fork failed. A command that
// cannot be executed says why on stderr and exits 127, as a shell does.
pid_t StartCommand(const std::vector<std::string>& command, const std::map<std::string, std::string>& environment,
                   int output_fd, CommandTerminal terminal = CommandTerminal::kAsCollwatch);

// The exit status a shell shows for a waitpid status: the exit code, or 128 + the signal
// that ended the process.
int ExitStatusOf(int wait_status);

// The command's exit status once it has ended (it is then reaped); nullopt while it runs.
std::optional<int> ExitStatusIfEnded(pid_t command);

// Sends `signal` to every process of the command's group.
void SignalCommandGroup(pid_t command, int signal);

// Stops the command's group: SIGTERM, then SIGKILL for what is left after `grace_s`.
// Returns the leader's exit status (128 + signal when a signal ended it).
int StopCommandGroup(pid_t command, double grace_s);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_COMMAND_PROCESS_H_
