// The long-running commands. Threading: signals are blocked before any thread starts,
// then the main thread waits for them (sigtimedwait), so gRPC threads never take them.
#include "cli/daemon_commands.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analyzer/report.h"
#include "cli/files_beside.h"
#include "cli/job_processes.h"
#include "cli/one_gpu_mode.h"
#include "collector/cluster_watcher.h"
#include "dashboard/terminal_ui.h"
#include "nlohmann/json.hpp"
#include "ring/clocks.h"

extern char** environ;

namespace collwatch {
namespace {

sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// Blocks SIGINT/SIGTERM in this thread (and every thread started after).
void BlockStopSignals() {
  sigset_t set = StopSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// Waits up to `seconds` for SIGINT/SIGTERM; returns the signal or 0.
int WaitForStopSignal(double seconds) {
  sigset_t set = StopSignals();
  timespec timeout{static_cast<time_t>(seconds), static_cast<long>((seconds - static_cast<double>(static_cast<time_t>(seconds))) * 1e9)};
  const int signal = sigtimedwait(&set, nullptr, &timeout);
  return signal > 0 ? signal : 0;
}

std::string Hex(uint64_t value) { return absl::StrFormat("%x", value); }

std::string StatusLine(const LiveSummary& summary) {
  std::string line = absl::StrFormat("collwatch: %d/%d ranks reporting", summary.ranks_reporting, summary.ranks_known);
  // Processes holding several ranks (ncclCommInitAll, grouped init): say how many processes.
  if (summary.processes_known != summary.ranks_known) {
    absl::StrAppendFormat(&line, " (%d processes)", summary.processes_known);
  }
  absl::StrAppendFormat(&line, ", %.1f coll/s, %d events", summary.collectives_per_second, summary.events);
  if (summary.ranks_lost > 0) absl::StrAppend(&line, absl::StrFormat(", %d lost", summary.ranks_lost));
  if (summary.oldest_inflight_comm != 0) {
    absl::StrAppend(&line, absl::StrFormat(", oldest in flight: comm %s seq %d for %.1f s",
                                           Hex(summary.oldest_inflight_comm), summary.oldest_inflight_seq,
                                           summary.oldest_inflight_age_s));
  } else {
    absl::StrAppend(&line, ", nothing in flight");
  }
  return line;
}

// The job id as the interposer writes it into ring headers (same alphabet and length).
std::string DefaultJobId() {
  if (const char* job = std::getenv("COLLWATCH_JOB_ID"); job != nullptr && job[0] != '\0') {
    std::string safe = std::string(job).substr(0, 63);
    for (char& c : safe) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
    }
    return safe;
  }
  const time_t now = time(nullptr);
  tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  return absl::StrCat("run-", stamp, "-", getpid());
}

// Starts CMD in its own process group. `output_fd` >= 0: its stdout and stderr go there
// and its stdin is /dev/null (the terminal belongs to the dashboard).
pid_t StartCommand(const std::vector<std::string>& command, const std::map<std::string, std::string>& env,
                   int output_fd) {
  const pid_t child = fork();
  if (child != 0) {
    if (child > 0) setpgid(child, child);  // both sides set it: no race with exec
    return child;
  }
  // Its own process group, so a hung job's ranks can be stopped together.
  setpgid(0, 0);
  // The child gets default signal handling back and the extra environment.
  sigset_t set = StopSignals();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
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

// Stops the job's process group: SIGTERM, then SIGKILL for what is left after
// `grace_s`. Returns the leader's exit code (128 + signal when killed).
int StopJob(pid_t child, double grace_s) {
  kill(-child, SIGTERM);
  int exit_code = -1;
  for (double waited = 0; waited < grace_s; waited += 0.1) {
    int status = 0;
    // Reap the leader: as a zombie it would keep the group alive.
    if (exit_code < 0 && waitpid(child, &status, WNOHANG) == child) {
      exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (kill(-child, 0) != 0) break;  // the whole group is gone
    usleep(100'000);
  }
  kill(-child, SIGKILL);
  if (exit_code < 0) {
    int status = 0;
    if (waitpid(child, &status, 0) == child) exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return exit_code;
}

// The last `lines` lines of the job's log, after the dashboard gave the terminal back.
void PrintTail(const std::string& path, size_t lines) {
  std::ifstream file(path);
  std::vector<std::string> tail;
  for (std::string line; std::getline(file, line);) {
    tail.push_back(line);
    if (tail.size() > lines) tail.erase(tail.begin());
  }
  std::cerr << "collwatch run: the job's output is in " << path << (tail.empty() ? " (empty)" : "; its end:") << "\n";
  for (const std::string& line : tail) std::cerr << "  " << line << "\n";
}

// While the dashboard owns the terminal, collwatch's own messages (the agent's, say) go
// to a file instead of through the screen; they are replayed on stderr when it closes.
class StderrAside {
 public:
  explicit StderrAside(std::string path) : path_(std::move(path)) {
    const int file = open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (file < 0) return;
    std::cerr.flush();
    saved_ = dup(STDERR_FILENO);
    dup2(file, STDERR_FILENO);
    close(file);
  }
  ~StderrAside() {
    if (saved_ < 0) return;
    std::cerr.flush();
    dup2(saved_, STDERR_FILENO);
    close(saved_);
    std::ifstream file(path_);
    std::cerr << file.rdbuf();
    std::cerr.clear();  // an empty file sets failbit
    unlink(path_.c_str());
  }
  StderrAside(const StderrAside&) = delete;
  StderrAside& operator=(const StderrAside&) = delete;

 private:
  std::string path_;
  int saved_ = -1;
};

// A fresh secret for the embedded collector, so that other users of the node can neither
// watch the job nor feed it forged records through its loopback port. Empty on failure.
std::string RandomToken() {
  unsigned char bytes[24];
  size_t filled = 0;
  while (filled < sizeof bytes) {
    const ssize_t got = getrandom(bytes + filled, sizeof bytes - filled, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return "";
    filled += static_cast<size_t>(got);
  }
  std::string token;
  for (const unsigned char byte : bytes) absl::StrAppend(&token, absl::Hex(byte, absl::kZeroPad2));
  return token;
}

// Writes `secret` to `path`, readable by its owner alone (an old file there is replaced,
// never followed if it is a link).
bool WriteSecretFile(const std::string& path, const std::string& secret, std::string* error) {
  unlink(path.c_str());
  const int file = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (file < 0) {
    *error = absl::StrCat("cannot create ", path, ": ", std::strerror(errno));
    return false;
  }
  const std::string line = secret + "\n";
  const bool written = write(file, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  close(file);
  if (!written) *error = absl::StrCat("cannot write ", path);
  return written;
}

// run.json's `rank_processes`: the ranks `collwatch run` saw in its command's process
// tree and its last look at each (TraceLoader reads them back).
nlohmann::json RankProcessesJson(const std::map<pid_t, RankProcess>& ranks) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [pid, rank] : ranks) {
    list.push_back({{"pid", rank.info.pid},
                    {"host", rank.info.host},
                    {"global_rank", rank.info.global_rank},
                    {"world_size", rank.info.world_size},
                    {"state", ProcessStateName(rank.sample.state)},
                    {"wait_channel", rank.sample.wait_channel},
                    {"cpu_ns", rank.sample.cpu_ns},
                    {"cpu_advancing", rank.sample.cpu_advancing},
                    {"sampled_ns", rank.sample.sampled_ns}});
  }
  return list;
}

}  // namespace

bool ReadSecretFile(const std::string& path, std::string* contents, std::string* error) {
  std::ifstream file(path);
  if (!file) {
    *error = absl::StrCat(path, ": cannot be read");
    return false;
  }
  std::stringstream buffer;
  buffer << file.rdbuf();
  *contents = buffer.str();
  while (!contents->empty() && (contents->back() == '\n' || contents->back() == '\r')) contents->pop_back();
  if (contents->empty()) {
    *error = absl::StrCat(path, ": is empty");
    return false;
  }
  return true;
}

int RunCollectorCommand(const CollectorOptions& options) {
  BlockStopSignals();
  absl::StatusOr<std::unique_ptr<CollectorServer>> server = CollectorServer::Start(options);
  if (!server.ok()) {
    std::cerr << "collwatch collector: " << server.status().message() << "\n";
    return 1;
  }
  std::cerr << "collwatch collector: listening on " << (*server)->address() << ", traces in " << options.out_dir
            << (options.fsync ? " (fdatasync before each ack)" : "") << "\n";
  while (WaitForStopSignal(3600) == 0) {
  }
  (*server)->Shutdown();
  return 0;
}

int RunAgentCommand(const AgentOptions& options) {
  BlockStopSignals();
  absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Start(options);
  if (!agent.ok()) {
    std::cerr << "collwatch agent: " << agent.status().message() << "\n";
    return 1;
  }
  std::cerr << "collwatch agent: shipping rings of "
            << (options.ring_dir.empty() ? DefaultRingDir() : options.ring_dir) << " to " << options.collector << "\n";
  while (WaitForStopSignal(0.2) == 0) {
    if ((*agent)->IdleExpired()) {
      std::cerr << "collwatch agent: no live ring for " << options.idle_exit_s << " s; exiting\n";
      break;
    }
  }
  (*agent)->Stop();
  return 0;
}

int RunJobCommand(const RunOptions& options) {
  if (options.command.empty()) {
    std::cerr << "collwatch run: no command given (collwatch run [options] -- CMD ...)\n";
    return 2;
  }
  // libcollwatch.so for CMD, as built (../interposer) or installed (../lib, its own folder).
  const absl::StatusOr<std::string> found_preload = FindFileBesideThisBinary(
      Setting::kPreload, {"../interposer/libcollwatch.so", "../lib/libcollwatch.so", "libcollwatch.so"},
      "libcollwatch.so", "../interposer, ../lib and its own folder");
  if (!found_preload.ok()) {
    std::cerr << "collwatch run: " << found_preload.status().message() << "\n";
    return 2;
  }
  const std::string& preload = *found_preload;
  std::string error;
  std::map<std::string, std::string> command_env;
  std::string ld_preload = preload;
  if (options.one_gpu) {
    // Checked before anything starts: a job put on a GPU it cannot have fails late and unclearly.
    absl::StatusOr<OneGpuEnvironment> one_gpu = PrepareOneGpuMode();
    if (!one_gpu.ok()) {
      std::cerr << "collwatch run: " << one_gpu.status().message() << "\n";
      return 2;
    }
    ld_preload = absl::StrCat(preload, ":", one_gpu->cpu_nccl_path);
    command_env.insert(one_gpu->extra.begin(), one_gpu->extra.end());
  }
  std::error_code fs_error;
  std::filesystem::create_directories(options.out_dir, fs_error);
  if (fs_error) {
    std::cerr << "collwatch run: cannot create " << options.out_dir << ": " << fs_error.message() << "\n";
    return 2;
  }
  const std::string job = DefaultJobId();
  std::string ring_dir = options.ring_dir;
  bool own_ring_dir = false;
  if (ring_dir.empty()) {
    char pattern[] = "/dev/shm/collwatch-run-XXXXXX";
    std::string fallback = absl::StrCat(options.out_dir, "/.rings-XXXXXX");
    char* made = mkdtemp(pattern);
    if (made == nullptr) made = mkdtemp(fallback.data());
    if (made == nullptr) {
      std::cerr << "collwatch run: cannot create a ring folder: " << std::strerror(errno) << "\n";
      return 2;
    }
    ring_dir = made;
    own_ring_dir = true;
  }

  BlockStopSignals();
  std::unique_ptr<CollectorServer> server;
  std::string address = options.collector;
  std::string token = options.token;
  std::string token_file;  // the embedded collector's secret, for `collwatch top`
  if (address.empty()) {
    token = RandomToken();
    token_file = absl::StrCat(options.out_dir, "/.collwatch-token");
    if (token.empty() || !WriteSecretFile(token_file, token, &error)) {
      std::cerr << "collwatch run: no secret for the embedded collector: "
                << (token.empty() ? std::string("getrandom failed") : error) << "\n";
      return 2;
    }
  }
  absl::Cleanup remove_token_file = [&token_file] {
    if (!token_file.empty()) unlink(token_file.c_str());
  };
  if (address.empty()) {
    CollectorOptions collector;
    collector.listen = "127.0.0.1:0";
    collector.token = token;
    collector.out_dir = options.out_dir;
    collector.job = job;
    collector.log = false;  // `collwatch run` prints findings itself
    if (options.stall_after_s > 0) collector.analyzer.stall_after_s = options.stall_after_s;
    absl::StatusOr<std::unique_ptr<CollectorServer>> started = CollectorServer::Start(collector);
    if (!started.ok()) {
      std::cerr << "collwatch run: embedded collector: " << started.status().message() << "\n";
      return 2;
    }
    server = *std::move(started);
    address = server->address();
  }
  AgentOptions agent_options;
  agent_options.collector = address;
  agent_options.ring_dir = ring_dir;
  agent_options.job = job;
  agent_options.token = token;
  agent_options.tls_ca_pem = options.tls_ca_pem;
  absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Start(agent_options);
  if (!agent.ok()) {
    std::cerr << "collwatch run: agent: " << agent.status().message() << "\n";
    return 2;
  }

  // The dashboard needs the terminal to itself: the job's output goes to a log.
  const bool show_dashboard = options.dashboard && isatty(STDIN_FILENO) != 0 && isatty(STDOUT_FILENO) != 0;
  const std::string job_log = absl::StrCat(options.out_dir, "/job.log");
  int job_log_fd = -1;
  if (show_dashboard) {
    job_log_fd = open(job_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (job_log_fd < 0) {
      std::cerr << "collwatch run: cannot write " << job_log << ": " << std::strerror(errno) << "\n";
      return 2;
    }
  }
  if (const char* existing = std::getenv("LD_PRELOAD"); existing != nullptr && existing[0] != '\0') {
    ld_preload = absl::StrCat(existing, ":", ld_preload);
  }
  command_env.insert({{"LD_PRELOAD", ld_preload},
                      {"NVTX_INJECTION64_PATH", preload},
                      {"COLLWATCH_RING_DIR", ring_dir},
                      {"COLLWATCH_JOB_ID", job}});
  const pid_t child = StartCommand(options.command, command_env, job_log_fd);
  if (job_log_fd >= 0) close(job_log_fd);
  if (child < 0) {
    std::cerr << "collwatch run: fork: " << std::strerror(errno) << "\n";
    return 2;
  }
  // The job has its own process group (to stop it whole); on a terminal it becomes the
  // foreground group, as a shell would make it, so it may read the terminal (pdb) and
  // gets Ctrl-C itself.
  const bool terminal_job = !show_dashboard && isatty(STDIN_FILENO) != 0 && tcgetpgrp(STDIN_FILENO) == getpgrp();
  if (terminal_job) {
    signal(SIGTTOU, SIG_IGN);  // we keep writing status lines from the background
    tcsetpgrp(STDIN_FILENO, child);
  }
  const bool tty = isatty(STDERR_FILENO) != 0;
  const double print_every = tty ? options.status_interval_s : 10 * options.status_interval_s;
  timespec last_print{};
  clock_gettime(CLOCK_MONOTONIC, &last_print);
  // Findings come from the embedded collector, or from the external one's Watch stream
  // (which also feeds the dashboard).
  std::unique_ptr<ClusterWatcher> watcher;
  if (server == nullptr || show_dashboard) {
    watcher = std::make_unique<ClusterWatcher>(ClusterWatcherOptions{
        .address = address, .token = token, .tls_ca_pem = options.tls_ca_pem, .job = job});
  }
  std::unique_ptr<dashboard::TerminalScreen> screen;
  std::unique_ptr<StderrAside> stderr_aside;
  dashboard::DashboardModel model;
  auto close_screen = [&] {
    screen.reset();
    stderr_aside.reset();
  };
  if (show_dashboard) {
    std::string screen_error;
    screen = dashboard::TerminalScreen::Open(/*plain=*/false, &screen_error);
    if (screen == nullptr) {
      std::cerr << "collwatch run: no dashboard: " << screen_error << "\n";
    } else {
      stderr_aside = std::make_unique<StderrAside>(absl::StrCat(options.out_dir, "/.collwatch-messages"));
    }
  } else if (server != nullptr) {
    std::cerr << "collwatch run: live dashboard: collwatch top --collector " << address << " --token-file "
              << token_file << "\n";
  }
  auto current_findings = [&] {
    return server != nullptr ? server->service().online_analyzer().Findings() : watcher->Findings();
  };
  int exit_code = -1;
  size_t findings_shown = 0;
  bool stopped_hung_job = false;
  int64_t stopped_at_ns = 0;
  std::vector<analyzer::Finding> findings_at_stop;  // later ones would be the stop's echo
  // Returns whether the job is healthy: no finding, no rank that died or failed, and the
  // command's exit status (once known) 0.
  auto write_report = [&](const std::vector<analyzer::Finding>& findings) {
    analyzer::ReportInfo info;
    if (server != nullptr) info = server->service().online_analyzer().Info(job);
    info.job = job;
    info.online = true;
    info.source = server != nullptr ? options.out_dir : absl::StrCat("collector ", address);
    if (exit_code >= 0) info.command_exit_status = exit_code;
    if (stopped_hung_job) analyzer::NoteStoppedByCollwatch(&info);
    std::string write_error;
    if (!analyzer::WriteReportFiles(options.out_dir, findings, info, &write_error)) std::cerr << "collwatch run: " << write_error << "\n";
    return analyzer::Healthy(findings, info);
  };
  // The command's ranks seen through /proc, for the embedded collector's analysis: a rank
  // that has made no NCCL call has no ring for the agent, but can be stopped or gone.
  // Each one's latest look also goes to run.json, for `collwatch analyze`: once collwatch
  // stopped a hung job, the look before the stop (analysis is as of then).
  JobProcessTree job_processes(child);
  std::map<pid_t, RankProcess> ranks_seen;
  constexpr double kProcessWalkIntervalS = 0.5;
  timespec last_walk{};
  auto observe_job_processes = [&] {
    for (const RankProcess& rank : job_processes.Walk(static_cast<int64_t>(RealtimeNs()))) {
      if (stopped_hung_job) {
        ranks_seen.try_emplace(rank.info.pid, rank);
      } else {
        ranks_seen[rank.info.pid] = rank;
      }
      // An external collector takes rings only.
      if (server != nullptr) server->service().online_analyzer().ObserveProcess(rank.info, rank.sample);
    }
    clock_gettime(CLOCK_MONOTONIC, &last_walk);
  };
  while (exit_code < 0) {
    int status = 0;
    const pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child) {
      exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (screen != nullptr) {
      const ClusterView view = watcher->View();
      model.Update(view.state, dashboard::ConnectionOf(view, address), static_cast<int64_t>(RealtimeNs()));
      screen->Draw(model.Render(screen->width(), screen->height()));
      if (const int key = screen->ReadKey(0.1); key >= 0 && !model.HandleKey(key)) {
        close_screen();
        std::cerr << "collwatch run: dashboard closed; the job goes on (its output: " << job_log << ")\n";
      }
    }
    // Ctrl-C or a scheduler's SIGTERM goes to the job; we wait for it to end.
    if (const int signal = WaitForStopSignal(screen != nullptr ? 0 : 0.1); signal != 0) kill(-child, signal);
    // Each finding the moment it appears (on the dashboard while it is up).
    const std::vector<analyzer::Finding> findings = current_findings();
    for (; screen == nullptr && findings_shown < findings.size(); ++findings_shown) {
      if (tty) std::cerr << "\r\033[K";
      std::cerr << "\ncollwatch: " << analyzer::FindingText(findings[findings_shown]) << "\n";
    }
    if (options.kill_on_hang && !findings.empty() && !stopped_hung_job) {
      close_screen();  // the terminal is needed for what follows
      // What follows is collwatch's doing, not the job's: analyse no more.
      if (server != nullptr) server->service().online_analyzer().Freeze();
      findings_at_stop = findings;
      write_report(findings);
      std::cerr << "collwatch run: --kill-on-hang: stopping the job (report in " << options.out_dir
                << "/report.txt)\n";
      stopped_at_ns = static_cast<int64_t>(RealtimeNs());
      (*agent)->NoteJobStopping();
      exit_code = StopJob(child, options.kill_grace_s);
      stopped_hung_job = true;
      break;
    }
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (static_cast<double>(now.tv_sec - last_walk.tv_sec) + static_cast<double>(now.tv_nsec - last_walk.tv_nsec) / 1e9 >=
        kProcessWalkIntervalS) {
      observe_job_processes();
    }
    if (server != nullptr && screen == nullptr && static_cast<double>(now.tv_sec - last_print.tv_sec) >= print_every) {
      const std::string line = StatusLine(server->service().live_state().Summary());
      if (tty) {
        std::cerr << "\r\033[K" << line << std::flush;
      } else {
        std::cerr << line << "\n";
      }
      last_print = now;
    }
  }
  close_screen();
  if (terminal_job) tcsetpgrp(STDIN_FILENO, getpgrp());
  const bool drained = (*agent)->Drain(options.drain_timeout_s);
  // The job is over: ranks that never made a ring are seen gone.
  observe_job_processes();
  const AgentStats stats = (*agent)->Stats();
  (*agent)->Stop();
  if (tty) std::cerr << "\r\033[K";
  if (show_dashboard) PrintTail(job_log, 10);
  // After a stop on purpose every rank reads as lost; the report says how each ended.
  if (server != nullptr && !stopped_hung_job) std::cerr << StatusLine(server->service().live_state().Summary()) << "\n";
  if (!drained) {
    std::cerr << "collwatch run: not every record reached the collector within " << options.drain_timeout_s
              << " s; the rings stay in " << ring_dir << " (collwatch dump)\n";
  }
  if (stats.lost > 0) std::cerr << "collwatch run: " << stats.lost << " records were overwritten in the rings before they were read\n";

  nlohmann::json run = {{"job", job},
                        {"command", options.command},
                        {"exit_status", exit_code},
                        {"collector", address},
                        {"traces", absl::StrCat(options.out_dir, "/", job)},
                        {"rings", stats.rings},
                        {"events", stats.events_read},
                        {"lost", stats.lost},
                        {"drained", drained},
                        {"stall_after_s", options.stall_after_s},
                        {"kill_on_hang", options.kill_on_hang},
                        {"one_gpu", options.one_gpu},
                        {"stopped_hung_job", stopped_hung_job},
                        {"stopped_at_ns", stopped_at_ns},
                        {"rank_processes", RankProcessesJson(ranks_seen)}};
  std::ofstream(absl::StrCat(options.out_dir, "/run.json")) << run.dump(2) << "\n";
  if (server != nullptr) {
    CollectorService& service = server->service();
    if (!stopped_hung_job) {
      // Everything is in: the last look needs no grace for ranks that will never report.
      service.online_analyzer().Tick(static_cast<int64_t>(RealtimeNs()), /*final_pass=*/true);
    }
    service.StopAnalysis();
  }
  const std::vector<analyzer::Finding> findings = stopped_hung_job ? findings_at_stop : current_findings();
  for (; findings_shown < findings.size(); ++findings_shown) {
    std::cerr << "\ncollwatch: " << analyzer::FindingText(findings[findings_shown]) << "\n";
  }
  const bool healthy = write_report(findings);
  std::string verdict = findings.empty() ? "no findings" : absl::StrCat(findings.size(), " finding(s)");
  if (findings.empty() && !healthy) verdict = "no findings, but the job is not healthy (how each rank ended is in the report)";
  std::cerr << "collwatch run: " << verdict << "; report in " << options.out_dir << "/report.txt\n";
  watcher.reset();
  if (server != nullptr) server->Shutdown();
  if (own_ring_dir && drained) std::filesystem::remove_all(ring_dir, fs_error);
  std::cerr << "collwatch run: traces in "
            << (server != nullptr ? absl::StrCat(options.out_dir, "/", job) : absl::StrCat("the collector at ", address))
            << "; command exited with " << exit_code << "\n";
  if (stopped_hung_job) {
    std::cerr << "collwatch run: the job hung and was stopped (--kill-on-hang): exit " << kExitStoppedHungJob << "\n";
    return kExitStoppedHungJob;
  }
  return exit_code;
}

}  // namespace collwatch
