// The --on-finding worker. A command is started with posix_spawn in a process group of its
// own (so the time limit stops it whole) with default signal dispositions and an empty
// signal mask (collwatch's threads block every signal; the command must not inherit that).
// Threading: see finding_command.h.
#include "collector/finding_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collector/collector_service.h"
#include "process/log_line.h"
#include "ring/clocks.h"

extern char** environ;

namespace collwatch {
namespace {

constexpr char kWho[] = "collwatch collector";
constexpr uint64_t kPollNs = 10'000'000;

uint64_t SecondsToNs(double seconds) { return static_cast<uint64_t>(std::max(0.0, seconds) * 1e9); }

// collwatch's environment with `added` set over it, as "NAME=value" strings.
std::vector<std::string> EnvironmentWith(const std::map<std::string, std::string>& added) {
  std::vector<std::string> entries;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const size_t equals = text.find('=');
    if (equals != std::string::npos && added.count(text.substr(0, equals)) != 0) continue;
    entries.push_back(text);
  }
  for (const auto& [name, value] : added) entries.push_back(absl::StrCat(name, "=", value));
  return entries;
}

// Writes `bytes` into the non-blocking pipe `fd` until done, the reader closed it, or
// `deadline_ns`. A command that does not read its input is not waited for beyond that.
void WriteInput(int fd, const std::string& bytes, uint64_t deadline_ns) {
  size_t done = 0;
  while (done < bytes.size() && MonotonicClockNs() < deadline_ns) {
    const ssize_t wrote = write(fd, bytes.data() + done, bytes.size() - done);
    if (wrote > 0) {
      done += static_cast<size_t>(wrote);
    } else if (wrote < 0 && (errno == EAGAIN || errno == EINTR)) {
      pollfd writable{.fd = fd, .events = POLLOUT, .revents = 0};
      poll(&writable, 1, 10);
    } else {
      return;  // EPIPE: the command ended or closed its input (SIGPIPE is blocked here)
    }
  }
}

std::string ExitWords(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exit status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("killed by signal ", WTERMSIG(status));
  return "ended";
}

}  // namespace

FindingCommand::FindingCommand(std::string command, double timeout_s)
    : command_(std::move(command)), timeout_s_(timeout_s) {
  worker_ = std::thread([this] { WorkLoop(); });
}

FindingCommand::~FindingCommand() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    stop_deadline_ns_ = MonotonicClockNs() + SecondsToNs(timeout_s_);
  }
  wake_.notify_all();
  worker_.join();
}

void FindingCommand::Enqueue(std::string json, std::map<std::string, std::string> environment) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.size() >= kMaxQueued) {
      ++counts_.dropped;
      LogLine(LogLevel::kError, kWho) << "--on-finding: " << kMaxQueued
                                      << " findings wait for their command already; this one's is dropped";
      return;
    }
    queue_.push_back(Run{std::move(json), std::move(environment)});
  }
  wake_.notify_all();
}

FindingCommandCounts FindingCommand::counts() {
  std::lock_guard<std::mutex> lock(mutex_);
  return counts_;
}

void FindingCommand::WorkLoop() {
  BlockAllSignalsInThisThread();
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    const uint64_t now = MonotonicClockNs();
    if (stopping_ && now >= stop_deadline_ns_) {
      counts_.dropped += queue_.size();
      LogLine(LogLevel::kError, kWho) << "--on-finding: the collector is stopping: " << queue_.size()
                                      << " finding commands not run";
      return;
    }
    const Run run = std::move(queue_.front());
    queue_.pop_front();
    uint64_t deadline = now + SecondsToNs(timeout_s_);
    if (stopping_) deadline = std::min(deadline, stop_deadline_ns_);
    lock.unlock();
    RunOne(run, deadline);
    lock.lock();
  }
}

void FindingCommand::RunOne(const Run& run, uint64_t deadline_ns) {
  const auto count = [this](uint64_t FindingCommandCounts::*outcome) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++(counts_.*outcome);
  };
  int input[2];
  if (pipe2(input, O_CLOEXEC) != 0) {
    LogLine(LogLevel::kError, kWho) << "--on-finding: no pipe for the command: " << std::strerror(errno);
    count(&FindingCommandCounts::failed);
    return;
  }
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_adddup2(&files, input[0], STDIN_FILENO);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int signal : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) sigaddset(&defaults, signal);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  std::vector<std::string> environment = EnvironmentWith(run.environment);
  std::vector<char*> envp;
  for (std::string& entry : environment) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::string shell = "/bin/sh", dash_c = "-c", command = command_;
  char* argv[] = {shell.data(), dash_c.data(), command.data(), nullptr};
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, "/bin/sh", &files, &attributes, argv, envp.data());
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attributes);
  close(input[0]);
  if (spawned != 0) {
    close(input[1]);
    LogLine(LogLevel::kError, kWho) << "--on-finding: cannot start /bin/sh: " << std::strerror(spawned);
    count(&FindingCommandCounts::failed);
    return;
  }
  fcntl(input[1], F_SETFL, O_NONBLOCK);
  WriteInput(input[1], run.json, deadline_ns);
  close(input[1]);
  int status = 0;
  while (true) {
    const pid_t ended = waitpid(pid, &status, WNOHANG);
    if (ended == pid || (ended < 0 && errno != EINTR)) break;
    if (MonotonicClockNs() >= deadline_ns) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      LogLine(LogLevel::kError, kWho) << "--on-finding: the command ran past its time limit (" << timeout_s_
                                      << " s) and was killed";
      count(&FindingCommandCounts::timed_out);
      return;
    }
    std::this_thread::sleep_for(std::chrono::nanoseconds(kPollNs));
  }
  // What it left of its process group is not waited for: the command ended.
  const bool succeeded = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  LogLine(succeeded ? LogLevel::kInfo : LogLevel::kError, kWho) << "--on-finding: the command ended with "
                                                                 << ExitWords(status);
  count(succeeded ? &FindingCommandCounts::succeeded : &FindingCommandCounts::failed);
}

}  // namespace collwatch
