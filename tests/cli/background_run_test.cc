// `collwatch run` and `collwatch top` on a terminal whose foreground is another process
// group (#37: `collwatch run ... &`, `timeout` without --foreground): a pseudo-terminal
// with a session leader of our own, with and without TOSTOP. Nothing of collwatch's may
// ever be stopped by the terminal; the run ends by itself with its job's status and
// removes its ring folder. Threading: single-threaded test code plus forked children.
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/read_files.h"
#include "tests/support/run_env.h"
#include "tests/support/subprocess.h"

extern char** environ;

namespace collwatch::background_run_test {
namespace {

using testing::ReadFile;
using testing::TempDir;

constexpr double kTimeoutS = 60;

struct Terminal {
  bool tostop = false;     // `stty tostop`: a background write stops the writer
  bool foreground = false;  // the command's group is the terminal's foreground group
};

// How the command ended, as its session leader saw it through waitpid(WUNTRACED).
struct Outcome {
  std::string how;  // "exited", "signaled", "stopped" (then killed) or "timeout"
  int value = -1;   // the exit code or the signal
  std::string screen;  // everything written to the terminal
};

Outcome ReadOutcome(const std::string& report, std::string screen) {
  Outcome outcome;
  const size_t space = report.find(' ');
  outcome.how = report.substr(0, space);
  if (space != std::string::npos) outcome.value = std::stoi(report.substr(space + 1));
  outcome.screen = std::move(screen);
  return outcome;
}

// The session leader: starts `argv` in a process group of its own (made the foreground
// one when asked) and reports on `report_fd` how it ended. Never returns.
[[noreturn]] void LeadSession(const std::vector<char*>& argv, const std::vector<char*>& envp, Terminal terminal,
                              int report_fd) {
  if (terminal.tostop) {
    termios modes{};
    tcgetattr(STDIN_FILENO, &modes);
    modes.c_lflag |= TOSTOP;
    tcsetattr(STDIN_FILENO, TCSANOW, &modes);
  }
  const pid_t command = fork();
  if (command == 0) {
    setpgid(0, 0);
    if (terminal.foreground) {
      sigset_t ttou;
      sigemptyset(&ttou);
      sigaddset(&ttou, SIGTTOU);
      sigprocmask(SIG_BLOCK, &ttou, nullptr);
      tcsetpgrp(STDIN_FILENO, getpid());
      sigprocmask(SIG_UNBLOCK, &ttou, nullptr);
    }
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  setpgid(command, command);
  std::string report = "timeout";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kTimeoutS);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    const pid_t waited = waitpid(command, &status, WNOHANG | WUNTRACED);
    if (waited == command && WIFSTOPPED(status)) {
      report = "stopped " + std::to_string(WSTOPSIG(status));
      break;
    }
    if (waited == command && WIFEXITED(status)) {
      report = "exited " + std::to_string(WEXITSTATUS(status));
      break;
    }
    if (waited == command && WIFSIGNALED(status)) {
      report = "signaled " + std::to_string(WTERMSIG(status));
      break;
    }
    usleep(20'000);
  }
  if (report.rfind("exited", 0) != 0 && report.rfind("signaled", 0) != 0) {
    kill(-command, SIGKILL);  // what the user of the bug report had to do
    waitpid(command, nullptr, 0);
  }
  (void)!write(report_fd, report.data(), report.size());
  _exit(0);
}

// Runs `args` on a fresh 80x24 pseudo-terminal as described; `env` is added.
Outcome OnTerminal(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                   Terminal terminal) {
  std::vector<std::string> variables;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string variable = *entry;
    if (!env.count(variable.substr(0, variable.find('=')))) variables.push_back(variable);
  }
  for (const auto& [name, value] : env) variables.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (std::string& variable : variables) envp.push_back(variable.data());
  envp.push_back(nullptr);
  std::vector<std::string> arguments = args;
  std::vector<char*> argv;
  for (std::string& arg : arguments) argv.push_back(arg.data());
  argv.push_back(nullptr);

  int report[2];
  if (pipe(report) != 0) return {};
  winsize size{};
  size.ws_row = 24;
  size.ws_col = 80;
  int master = -1;
  const pid_t leader = forkpty(&master, nullptr, nullptr, &size);
  if (leader == 0) {
    close(report[0]);
    LeadSession(argv, envp, terminal, report[1]);
  }
  close(report[1]);
  if (leader < 0) return {};
  // The terminal is read all along: a full one would block its writers.
  std::string screen;
  bool leader_done = false;
  while (true) {
    pollfd readable{master, POLLIN, 0};
    if (poll(&readable, 1, 50) > 0) {
      char buffer[4096];
      const ssize_t n = read(master, buffer, sizeof buffer);
      if (n > 0) {
        screen.append(buffer, static_cast<size_t>(n));
        continue;
      }
      if (leader_done) break;  // EIO: every writer has closed the terminal
    } else if (leader_done) {
      break;
    }
    leader_done = leader_done || waitpid(leader, nullptr, WNOHANG) == leader;
  }
  close(master);
  std::string outcome;
  char buffer[64];
  for (ssize_t n; (n = read(report[0], buffer, sizeof buffer)) > 0;) outcome.append(buffer, static_cast<size_t>(n));
  close(report[0]);
  return ReadOutcome(outcome, std::move(screen));
}

// `collwatch run FLAGS -- sh -c ...`: two CPU-NCCL ranks that push NVTX ranges, a line
// of the job's own on the terminal, and exit status 7. The job writes its ring folder
// (COLLWATCH_RING_DIR) to DIR/ring_dir.
Outcome RunJobOnTerminal(const TempDir& dir, const std::vector<std::string>& flags, Terminal terminal) {
  const std::string script = "echo \"$COLLWATCH_RING_DIR\" > " + dir.path() +
                             "/ring_dir; echo the job writes to the terminal; " + COLLWATCH_NCCL_RANKS_PATH +
                             " 2 all " + dir.path() + " && exit 7";
  std::vector<std::string> args = {COLLWATCH_CLI_PATH, "run", "--out", dir.path() + "/out"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), {"--", "/bin/sh", "-c", script});
  return OnTerminal(args,
                    testing::CollwatchRunEnv({{"COLLWATCH_CPU_NCCL_SHM_DIR", dir.path()}, {"TERM", "xterm"}}),
                    terminal);
}

// The run ended by itself with the job's status, and its ring folder is gone.
void ExpectFinishedCleanly(const TempDir& dir, const Outcome& run) {
  EXPECT_EQ(run.how, "exited") << "signal/code " << run.value << "; the terminal showed:\n" << run.screen;
  EXPECT_EQ(run.value, 7) << run.screen;
  EXPECT_NE(run.screen.find("the job writes to the terminal"), std::string::npos) << run.screen;
  EXPECT_NE(run.screen.find("command exited with 7"), std::string::npos) << run.screen;
  std::string rings = ReadFile(dir.path() + "/ring_dir");
  while (!rings.empty() && rings.back() == '\n') rings.pop_back();
  ASSERT_FALSE(rings.empty()) << "the job did not start";
  EXPECT_FALSE(std::filesystem::exists(rings)) << rings << " is left behind";
  std::error_code ignored;
  std::filesystem::remove_all(rings, ignored);
}

// The dashboard is the default on a terminal; from the background it would stop the
// run at its first change of the terminal's modes.
TEST(BackgroundRunTest, RunInTheBackgroundGoesOnWithoutTheDashboard) {
  TempDir dir;
  const Outcome run = RunJobOnTerminal(dir, {}, Terminal{});
  ExpectFinishedCleanly(dir, run);
  EXPECT_EQ(run.screen.find("\033[?1049h"), std::string::npos) << "the dashboard took the screen";
}

// Under `stty tostop` every line written from the background stops the writer: collwatch's
// status lines and the job's own output.
TEST(BackgroundRunTest, RunInTheBackgroundUnderTostopIsNeverStopped) {
  TempDir dir;
  ExpectFinishedCleanly(dir, RunJobOnTerminal(dir, {"--no-dashboard"}, Terminal{.tostop = true}));
}

TEST(BackgroundRunTest, RunInTheBackgroundUnderTostopWithTheDashboardAskedIsNeverStopped) {
  TempDir dir;
  ExpectFinishedCleanly(dir, RunJobOnTerminal(dir, {}, Terminal{.tostop = true}));
}

// In the foreground the job gets the terminal (and its default stops back); collwatch
// writes its lines from the background.
TEST(BackgroundRunTest, RunInTheForegroundUnderTostopHandsTheTerminalToTheJob) {
  TempDir dir;
  ExpectFinishedCleanly(dir, RunJobOnTerminal(dir, {"--no-dashboard"}, Terminal{.tostop = true, .foreground = true}));
}

TEST(BackgroundRunTest, TopInTheBackgroundSaysItNeedsTheForeground) {
  const Outcome top = OnTerminal({COLLWATCH_CLI_PATH, "top", "--collector", "127.0.0.1:1"},
                                 testing::CollwatchRunEnv({{"TERM", "xterm"}}), Terminal{});
  EXPECT_EQ(top.how, "exited") << "signal/code " << top.value << "; the terminal showed:\n" << top.screen;
  EXPECT_EQ(top.value, 2);
  EXPECT_NE(top.screen.find("not in the terminal's foreground"), std::string::npos) << top.screen;
}

}  // namespace
}  // namespace collwatch::background_run_test
