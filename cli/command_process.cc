// fork + execvpe with the group set on both sides of the fork (no race with the exec);
// stopping polls every 100 ms so that a group that ends at once is not waited on.
// Threading: see command_process.h.
#include "cli/command_process.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "cli/stop_signals.h"

extern char** environ;

namespace collwatch {

pid_t StartCommand(const std::vector<std::string>& command, const std::map<std::string, std::string>& environment,
                   int output_fd, CommandTerminal terminal) {
  // Everything the child needs is made before the fork: after it, in a process with other
  // threads (gRPC's), only async-signal-safe calls. (setenv there deadlocked on an
  // allocator lock another thread held at the fork, seen under ASan.)
  std::vector<std::string> variables;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const char* equals = std::strchr(*entry, '=');
    const std::string name = equals != nullptr ? std::string(*entry, static_cast<size_t>(equals - *entry)) : *entry;
    if (!environment.count(name)) variables.emplace_back(*entry);
  }
  for (const auto& [name, value] : environment) variables.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (std::string& variable : variables) envp.push_back(variable.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (const std::string& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  const std::string cannot_run = "collwatch run: cannot run " + (command.empty() ? std::string() : command[0]) + ": ";
  const sigset_t stop_signals = StopSignals();

  const pid_t child = fork();
  if (child != 0) {
    if (child > 0) setpgid(child, child);
    return child;
  }
  setpgid(0, 0);
  if (terminal == CommandTerminal::kForeground) {
    // The parent sets it too (whichever comes first); only then may a stop come.
    tcsetpgrp(STDIN_FILENO, getpid());
    signal(SIGTTOU, SIG_DFL);
    signal(SIGTTIN, SIG_DFL);
  }
  // collwatch blocks the stop signals to take them itself; the command gets them back.
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
  // collwatch ignores SIGXFSZ (a file-size limit is a write error to it); an ignored
  // signal would survive the exec, and the job must meet its limit as it would alone.
  signal(SIGXFSZ, SIG_DFL);
  if (output_fd >= 0) {
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    dup2(output_fd, STDOUT_FILENO);
    dup2(output_fd, STDERR_FILENO);
  }
  execvpe(argv[0], argv.data(), envp.data());
  const char* why = strerrordesc_np(errno);
  (void)!write(STDERR_FILENO, cannot_run.data(), cannot_run.size());
  if (why != nullptr) (void)!write(STDERR_FILENO, why, std::strlen(why));
  (void)!write(STDERR_FILENO, "\n", 1);
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
