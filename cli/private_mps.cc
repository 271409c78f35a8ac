// The private MPS server of `collwatch run --one-gpu --mps`: nvidia-cuda-mps-control run
// with pipe and log folders of its own; stopped with its "quit" command, and by signal
// where that does not end it (a server wedged by a killed client has been seen).
#include "cli/private_mps.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ring/clocks.h"

extern char** environ;

namespace collwatch {
namespace {

constexpr char kControl[] = "nvidia-cuda-mps-control";
constexpr char kPipeVariable[] = "CUDA_MPS_PIPE_DIRECTORY";
constexpr char kLogVariable[] = "CUDA_MPS_LOG_DIRECTORY";
// The folder the server's folders go in, at most: leaves room under the 107 bytes of a
// socket path for "/collwatch-mps-XXXXXX/pipe/" and MPS's own names.
constexpr size_t kMaxParentLength = 48;

// A moment `seconds` from now, on MonotonicClockNs's clock.
uint64_t DeadlineIn(double seconds) { return MonotonicClockNs() + static_cast<uint64_t>(seconds * 1e9); }

// This process's environment with `extra` set over it, as posix_spawn wants it.
std::vector<std::string> EnvironmentWith(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> entries;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    if (extra.count(name) == 0) entries.push_back(entry);
  }
  for (const auto& [name, value] : extra) entries.push_back(name + "=" + value);
  return entries;
}

// Runs the control program with `arguments`, `input` on its stdin, its output appended to
// `output_file` (never to collwatch's: the daemon it starts would hold those open), and
// waits up to `timeout_s`: its exit status, -1 if it could not start (errno set), -2 on
// timeout (it is then killed).
int RunControl(const std::vector<std::string>& arguments, const std::string& input,
               const std::map<std::string, std::string>& environment, const std::string& output_file,
               double timeout_s) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[0], STDIN_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<std::string> argv_strings = {kControl};
  argv_strings.insert(argv_strings.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (std::string& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings = EnvironmentWith(environment);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t child = 0;
  const int spawned = posix_spawnp(&child, kControl, &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[0]);
  if (spawned != 0) {
    close(pipe_fds[1]);
    errno = spawned;
    return -1;
  }
  if (!input.empty()) {
    // A control program that exits without reading gets EPIPE here, not a signal.
    struct sigaction ignore {}, previous {};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ignore, &previous);
    const ssize_t written = write(pipe_fds[1], input.data(), input.size());
    (void)written;  // its exit status says what happened
    sigaction(SIGPIPE, &previous, nullptr);
  }
  close(pipe_fds[1]);
  const uint64_t deadline = DeadlineIn(timeout_s);
  for (;;) {
    int status = 0;
    const pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (done < 0 && errno != EINTR) return -1;
    if (MonotonicClockNs() > deadline) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      return -2;
    }
    usleep(20 * 1000);
  }
}

// The parent of `pid` while it runs (not ended, not a zombie) as an nvidia-cuda-mps*
// process; nullopt otherwise (a pid reused since by another program is not one).
std::optional<pid_t> MpsProcessParent(pid_t pid) {
  // "pid (comm) state ppid ...": the name may hold spaces and parentheses.
  std::ifstream stat_file(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(stat_file, line);
  const size_t open = line.find('(');
  const size_t close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close + 4 >= line.size()) return std::nullopt;
  if (line.compare(open + 1, 15, "nvidia-cuda-mps") != 0 || line[close + 2] == 'Z') return std::nullopt;
  return static_cast<pid_t>(std::strtol(line.c_str() + close + 4, nullptr, 10));
}

// Those of `pids` that still run as MPS processes.
std::vector<pid_t> StillRunning(const std::vector<pid_t>& pids) {
  std::vector<pid_t> running;
  for (pid_t pid : pids) {
    if (MpsProcessParent(pid).has_value()) running.push_back(pid);
  }
  return running;
}

constexpr char kControlOutput[] = "/collwatch-control-output.txt";

// The end of the control daemon's log and of the control program's output, for an error
// message.
std::string LogTail(const std::string& log_folder) {
  std::string all;
  for (const char* name : {"/control.log", kControlOutput}) {
    std::ifstream log(log_folder + name);
    std::stringstream text;
    text << log.rdbuf();
    all += text.str();
  }
  if (all.size() > 600) all = "..." + all.substr(all.size() - 600);
  while (!all.empty() && (all.back() == '\n' || all.back() == ' ')) all.pop_back();
  return all.empty() ? "" : absl::StrCat(" (its log: ", all, ")");
}

}  // namespace

absl::StatusOr<std::unique_ptr<PrivateMpsServer>> PrivateMpsServer::Start() {
  // MPS's sockets live in the pipe folder, and a socket's path holds at most 107 bytes:
  // a long TMPDIR gives way to /tmp.
  const char* tmp = std::getenv("TMPDIR");
  const bool tmp_fits = tmp != nullptr && tmp[0] != '\0' && std::strlen(tmp) <= kMaxParentLength;
  std::string pattern = absl::StrCat(tmp_fits ? tmp : "/tmp", "/collwatch-mps-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("--mps: cannot make a folder for the MPS server (", pattern, "): ", std::strerror(errno)));
  }
  std::unique_ptr<PrivateMpsServer> server(new PrivateMpsServer(pattern));
  if (mkdir(server->PipeFolder().c_str(), 0700) != 0 || mkdir(server->LogFolder().c_str(), 0700) != 0) {
    const std::string why = std::strerror(errno);
    server->Stop(0);
    return absl::FailedPreconditionError(absl::StrCat("--mps: cannot make the MPS server's folders under ",
                                                      server->folder_, ": ", why));
  }
  // -d daemonises: the program returns once the control daemon runs.
  const int status = RunControl({"-d"}, "", server->JobEnvironment(), server->LogFolder() + kControlOutput, 30);
  if (status == 0) return server;
  const int error = errno;
  std::string why;
  if (status == -1) {
    why = error == ENOENT ? absl::StrCat(kControl, " is not in PATH (it comes with the NVIDIA driver)")
                          : absl::StrCat(kControl, " cannot be started: ", std::strerror(error));
  } else if (status == -2) {
    why = absl::StrCat(kControl, " -d did not return in 30 s");
  } else {
    why = absl::StrCat(kControl, " -d failed (exit status ", status, ")", LogTail(server->LogFolder()));
  }
  server->Stop(0);
  return absl::FailedPreconditionError(absl::StrCat(
      "--mps: ", why, ". Without --mps the ranks share the GPU in time slices (slower, same findings)."));
}

PrivateMpsServer::~PrivateMpsServer() { Stop(); }

std::map<std::string, std::string> PrivateMpsServer::JobEnvironment() const {
  return {{kPipeVariable, PipeFolder()}, {kLogVariable, LogFolder()}};
}

std::vector<pid_t> PrivateMpsServer::ServerProcesses() const {
  struct MpsProcess {
    pid_t pid;
    pid_t parent;
    bool ours;  // its environment holds this pipe folder
  };
  std::vector<MpsProcess> candidates;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return {};
  const std::string wanted = absl::StrCat(kPipeVariable, "=", PipeFolder());
  const uid_t me = getuid();
  while (dirent* entry = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || pid <= 0 || pid == getpid()) continue;
    const std::string base = absl::StrCat("/proc/", pid);
    struct stat info {};
    if (stat(base.c_str(), &info) != 0 || info.st_uid != me) continue;
    const std::optional<pid_t> parent = MpsProcessParent(static_cast<pid_t>(pid));
    if (!parent.has_value()) continue;
    bool ours = false;
    std::ifstream environ_file(base + "/environ", std::ios::binary);
    std::string variable;
    while (!ours && std::getline(environ_file, variable, '\0')) ours = variable == wanted;
    candidates.push_back({static_cast<pid_t>(pid), *parent, ours});
  }
  closedir(proc);
  std::vector<pid_t> found;
  for (const MpsProcess& p : candidates) {
    const bool child_of_ours = std::any_of(candidates.begin(), candidates.end(), [&](const MpsProcess& q) {
      return q.ours && q.pid == p.parent;
    });
    if (p.ours || child_of_ours) found.push_back(p.pid);
  }
  return found;
}

std::string PrivateMpsServer::Stop(double grace_s) {
  if (stopped_) return "";
  stopped_ = true;
  std::string problem;
  // Taken before the quit: the server outlives its daemon's exit, and is then no child of it.
  const std::vector<pid_t> processes = ServerProcesses();
  if (grace_s > 0 || !processes.empty()) {
    const int status =
        RunControl({}, "quit\n", JobEnvironment(), LogFolder() + kControlOutput, grace_s > 0 ? grace_s : 1);
    if (status != 0 && !processes.empty()) {
      problem = absl::StrCat("the MPS server did not take its quit command (", status == -2 ? "no answer" : "status ",
                             status == -2 ? "" : std::to_string(status), ")");
    }
    const uint64_t deadline = DeadlineIn(grace_s);
    std::vector<pid_t> left = StillRunning(processes);
    while (!left.empty() && MonotonicClockNs() < deadline) {
      usleep(50 * 1000);
      left = StillRunning(processes);
    }
    if (!left.empty()) {
      for (pid_t pid : left) kill(pid, SIGKILL);
      problem = absl::StrCat(problem.empty() ? "" : problem + "; ", "killed ", left.size(),
                             " MPS process(es) that outlived its quit by ", grace_s, " s");
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(folder_, ignored);
  return problem;
}

}  // namespace collwatch
