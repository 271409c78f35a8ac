// fork + execvp with the group set on both sides of the fork (no race with the exec);
// stopping polls every 100 ms so that a group that ends at once is not waited on.
// Threading: see command_process.h.
#include "cli/command_process.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cli/stop_signals.h"

namespace collwatch {

pid_t StartCommand(const std::vector<std::string>& command, const std::map<std::string, std::string>& environment,
                   int output_fd) {
  const pid_t child = fork();
  if (child != 0) {
    if (child > 0) setpgid(child, child);
    return child;
  }
  setpgid(0, 0);
  // collwatch blocks the stop signals to take them itself; the command gets them back.
  const sigset_t stop_signals = StopSignals();
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
  for (const auto& [name, value] : environment) setenv(name.c_str(), value.c_str(), 1);
  if (output_fd >= 0) {
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    dup2(output_fd, STDOUT_FILENO);
    dup2(output_fd, STDERR_FILENO);
  }
  std::vector<char*> argv;
  for (const std::string& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  std::fprintf(stderr, "collwatch run: cannot run %s: %s\n", argv[0], std::strerror(errno));
  _exit(127);
}

int ExitStatusOf(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

std::optional<int> ExitStatusIfEnded(pid_t command) {
  int wait_status = 0;
  if (waitpid(command, &wait_status, WNOHANG) != command) return std::nullopt;
  return ExitStatusOf(wait_status);
}

void SignalCommandGroup(pid_t command, int signal) { kill(-command, signal); }

int StopCommandGroup(pid_t command, double grace_s) {
  SignalCommandGroup(command, SIGTERM);
  std::optional<int> exit_status;
  for (double waited = 0; waited < grace_s; waited += 0.1) {
    // Reap the leader: as a zombie it would keep the group alive.
    if (!exit_status.has_value()) exit_status = ExitStatusIfEnded(command);
    if (kill(-command, 0) != 0) break;  // the whole group is gone
    usleep(100'000);
  }
  SignalCommandGroup(command, SIGKILL);
  if (!exit_status.has_value()) {
    int wait_status = 0;
    if (waitpid(command, &wait_status, 0) == command) exit_status = ExitStatusOf(wait_status);
  }
  return exit_status.value_or(-1);
}

}  // namespace collwatch
