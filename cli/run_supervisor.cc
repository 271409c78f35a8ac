// One poll loop of about 0.1 s: has the command ended, a key on the dashboard, a stop
// signal to pass on, new findings, a process walk due (every 0.5 s), a status line due.
// The stop signals are taken synchronously here (sigtimedwait), never by a handler.
// Threading: see run_supervisor.h.
#include "cli/run_supervisor.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "analyzer/analyzer.h"
#include "analyzer/report.h"
#include "cli/command_process.h"
#include "cli/flight_recorder_dump.h"
#include "cli/run_record.h"
#include "cli/run_status_line.h"
#include "cli/stop_signals.h"
#include "collector/finding_codec.h"
#include "process/log_line.h"
#include "process/process_sample.h"
#include "ring/clocks.h"
#include "stacks/process_stacks.h"
#include "store/trace_store.h"

namespace collwatch {
namespace {

constexpr uint64_t kProcessWalkIntervalNs = 500'000'000;
// How long --kill-on-hang waits for a stall's stacks before stopping the job.
constexpr uint64_t kStacksWaitNs = 5'000'000'000;
constexpr size_t kJobLogTailLines = 10;
// --kill-on-hang leaves a job alone while the ranks its stalls wait for are at work, up to
// this many times the stall floor of waiting (300 s at the default 30 s: half of PyTorch's
// 10-minute watchdog), and stops it once they have not been seen at work for kAtWorkGraceNs
// (a look between two bursts of work may find the CPU still).
constexpr double kAtWorkCapMultiple = 10;
constexpr uint64_t kAtWorkGraceNs = 1'500'000'000;

}  // namespace

RunSupervisor::RunSupervisor(const RunOptions& options, std::string job, RingFolder rings, RunServices& services)
    : options_(options),
      job_(std::move(job)),
      rings_(std::move(rings)),
      services_(services),
      embedded_(services.embedded()),
      tty_(isatty(STDERR_FILENO) != 0),
      job_log_(absl::StrCat(options.out_dir, "/job.log")) {}

int RunSupervisor::Run(const std::map<std::string, std::string>& environment) {
  if (!StartJob(environment)) return kExitRunFailed;
  WatchJob();
  return Finish();
}

bool RunSupervisor::StartJob(const std::map<std::string, std::string>& environment) {
  // The dashboard needs the terminal to itself: the job's output goes to a log. Only in the
  // terminal's foreground: from the background (`collwatch run ... &`, or under `timeout`)
  // the terminal would stop it, or it would draw over the shell.
  const bool foreground = InTerminalForeground(STDIN_FILENO);
  show_dashboard_ = options_.dashboard && foreground && isatty(STDOUT_FILENO) != 0;
  // The job has its own process group (to stop it whole); in the terminal's foreground it
  // becomes the foreground group, as a shell would make it, so it may read the terminal
  // (pdb) and gets Ctrl-C itself. Anywhere else it keeps collwatch's ignored SIGTTOU and
  // SIGTTIN: a job stopped by the terminal in a group no shell knows would stay stopped,
  // and collwatch would wait on it for ever.
  terminal_job_ = !show_dashboard_ && foreground;
  int job_log_fd = -1;
  if (show_dashboard_) {
    job_log_fd = OpenJobLog(job_log_);
    if (job_log_fd < 0) {
      LogLine(LogLevel::kError, "collwatch run") << "cannot write " << job_log_ << ": " << std::strerror(errno);
      return false;
    }
  }
  command_ = StartCommand(options_.command, environment, job_log_fd,
                          terminal_job_ ? CommandTerminal::kForeground : CommandTerminal::kAsCollwatch);
  if (job_log_fd >= 0) close(job_log_fd);
  if (command_ < 0) {
    LogLine(LogLevel::kError, "collwatch run") << "fork: " << std::strerror(errno);
    return false;
  }
  // Status lines go on from the background: SIGTTOU is ignored (RunJobCommand).
  if (terminal_job_) tcsetpgrp(STDIN_FILENO, command_);
  job_processes_ = std::make_unique<JobProcessTree>(command_);
  return true;
}

void RunSupervisor::WatchJob() {
  const double print_every_s = tty_ ? options_.status_interval_s : 10 * options_.status_interval_s;
  uint64_t last_print_ns = MonotonicClockNs();
  // From now on the folder names its collector (a record of an earlier run there is
  // replaced, so `collwatch top DIR` never reads a run that ended).
  if (const absl::Status written = WriteRunRecord(options_.out_dir, StartRecord()); !written.ok()) {
    LogLine(LogLevel::kError, "collwatch run") << written.message();
  }
  // Findings come from the embedded collector, or from the external one's Watch stream
  // (which also feeds the dashboard).
  if (embedded_ == nullptr || show_dashboard_) {
    watcher_ = std::make_unique<ClusterWatcher>(ClusterWatcherOptions{
        .address = services_.address(), .token = services_.token(), .tls_ca_pem = options_.tls_ca_pem, .job = job_});
  }
  if (show_dashboard_) {
    std::string error;
    dashboard_ = RunDashboard::Open(absl::StrCat(options_.out_dir, "/.collwatch-messages"), &error);
    if (dashboard_ == nullptr) LogLine(LogLevel::kError, "collwatch run") << "no dashboard: " << error;
  } else if (embedded_ != nullptr) {
    LogLine(LogLevel::kInfo, "collwatch run") << "live dashboard: collwatch top " << options_.out_dir
              << ", or collwatch top --collector " << services_.address() << " --token-file " << services_.token_file();
  }
  if (embedded_ != nullptr && !embedded_->metrics_url().empty()) {
    LogLine(LogLevel::kInfo, "collwatch run") << "metrics at " << embedded_->metrics_url();
  }
  while (true) {
    if (const std::optional<int> ended = ExitStatusIfEnded(command_); ended.has_value()) {
      exit_code_ = *ended;
      return;
    }
    if (dashboard_ != nullptr && !InTerminalForeground(STDIN_FILENO)) {
      CloseDashboard();  // put in the background (Ctrl-Z, bg): it would draw over the shell
      LogLine(LogLevel::kInfo, "collwatch run") << "in the background now: dashboard closed; the job goes on (its output: "
                << job_log_ << ")";
    }
    if (dashboard_ != nullptr && !dashboard_->Refresh(*watcher_, services_.address(), 0.1)) {
      CloseDashboard();
      LogLine(LogLevel::kInfo, "collwatch run") << "dashboard closed; the job goes on (its output: " << job_log_ << ")";
    }
    // Ctrl-C or a scheduler's SIGTERM goes to the job; we wait for it to end.
    ForwardStopSignal(command_, dashboard_ != nullptr ? 0 : 0.1);
    // Each finding the moment it appears (on the dashboard while it is up).
    const std::vector<analyzer::Finding> findings = CurrentFindings();
    TakeStacksOfUnstreamedProcesses(findings);
    if (dashboard_ == nullptr) ShowNewFindings(findings, /*clear_status_line=*/tty_);
    const uint64_t now_ns = MonotonicClockNs();
    if (options_.kill_on_hang && analyzer::HangCount(findings) > 0 && !HoldForWork(findings)) {
      // A stall's stacks are taken from the live processes: stop the job once they are in
      // (or have not come for kStacksWaitNs).
      if (first_finding_ns_ == 0) first_finding_ns_ = now_ns;
      const bool stacks_coming = std::any_of(findings.begin(), findings.end(), [](const analyzer::Finding& f) {
        return analyzer::Analyzer::WantsStacks(f) && (!f.stacks || !f.stacks->complete);
      });
      if (!stacks_coming || now_ns - first_finding_ns_ >= kStacksWaitNs) {
        StopHungJob(findings);
        return;
      }
    }
    if (now_ns - last_walk_ns_ >= kProcessWalkIntervalNs) ObserveJobProcesses();
    if (embedded_ != nullptr && dashboard_ == nullptr &&
        static_cast<double>(now_ns - last_print_ns) / 1e9 >= print_every_s) {
      const std::string line = RunStatusLine(embedded_->service().live_state().Summary());
      if (tty_) {
        std::cerr << "\r\033[K" << line << std::flush;
      } else {
        LogLine(LogLevel::kInfo, "collwatch") << absl::StripPrefix(line, "collwatch: ");  // LogLine says who
      }
      last_print_ns = now_ns;
    }
  }
}

RunRecord RunSupervisor::StartRecord() const {
  const auto absolute = [](const std::string& path) {
    std::error_code error;
    return path.empty() ? path : std::filesystem::absolute(path, error).string();
  };
  RunRecord record;
  record.running = true;
  record.job = job_;
  record.command = options_.command;
  record.collector = services_.address();
  record.token_file = absolute(embedded_ != nullptr ? services_.token_file() : options_.token_file);
  record.tls_ca_file = absolute(embedded_ != nullptr ? "" : options_.tls_ca_file);
  record.collwatch_pid = getpid();
  record.collwatch_host = ThisHostName();
  record.traces = JobTracesDir(options_.out_dir, job_);
  // The floor in force, default included (an external collector's own is not known).
  record.stall_after_s = options_.stall_after_s > 0 || embedded_ == nullptr ? options_.stall_after_s
                                                                            : analyzer::AnalyzerOptions{}.stall_after_s;
  record.kill_on_hang = options_.kill_on_hang;
  record.one_gpu = options_.one_gpu;
  return record;
}

bool RunSupervisor::HoldForWork(const std::vector<analyzer::Finding>& findings) {
  if (embedded_ == nullptr) return false;  // only the embedded collector's model can tell
  OnlineAnalyzer& online = embedded_->service().online_analyzer();
  const auto now = static_cast<int64_t>(RealtimeNs());
  bool at_work = true;
  int64_t waits_since = now;
  for (const analyzer::Finding& finding : findings) {
    if (finding.resolution) continue;
    waits_since = std::min(waits_since, finding.first_bad_ns);
    at_work = at_work && online.LateRanksAtWork(finding, now);
  }
  const uint64_t now_mono = MonotonicClockNs();
  if (at_work) last_at_work_ns_ = now_mono;
  const double floor_s = options_.stall_after_s > 0 ? options_.stall_after_s : analyzer::AnalyzerOptions{}.stall_after_s;
  const double cap_s = kAtWorkCapMultiple * floor_s;
  const bool hold = last_at_work_ns_ != 0 && now_mono - last_at_work_ns_ < kAtWorkGraceNs &&
                    static_cast<double>(now - waits_since) / 1e9 < cap_s;
  if (hold && !said_at_work_) {
    said_at_work_ = true;
    LogLine(LogLevel::kInfo, "collwatch run") << "--kill-on-hang: the late ranks are at work (running outside NCCL, CPU busy): "
              << "not stopping the job while they are, up to " << cap_s << " s of waiting";
  }
  return hold;
}

void RunSupervisor::StopHungJob(const std::vector<analyzer::Finding>& findings) {
  CloseDashboard();  // the terminal is needed for what follows
  // What follows is collwatch's doing, not the job's: analyse no more.
  if (embedded_ != nullptr) embedded_->service().online_analyzer().Freeze();
  findings_at_stop_ = findings;
  // PyTorch's Flight Recorder dumps are what many users read after a hang: each rank that
  // has a dump pipe is asked for one, and given a few seconds, before the job is stopped.
  flight_recorder_dumps_ = FlightRecorderDumpsOf(ranks_seen_);
  if (!flight_recorder_dumps_.empty()) {
    LogLine(LogLevel::kInfo, "collwatch run") << "--kill-on-hang: asking the Flight Recorder of " << flight_recorder_dumps_.size()
              << (flight_recorder_dumps_.size() == 1 ? " rank" : " ranks") << " for a dump (waiting up to "
              << kFlightRecorderDumpWaitS << " s) before stopping the job";
  }
  AskFlightRecorderDumps(kFlightRecorderDumpWaitS, &flight_recorder_dumps_);
  for (const FlightRecorderDump& dump : flight_recorder_dumps_) {
    LogLine(LogLevel::kInfo, "collwatch run") << "--kill-on-hang: " << FlightRecorderDumpText(dump);
  }
  WriteReport(findings);
  LogLine(LogLevel::kError, "collwatch run") << "--kill-on-hang: stopping the job (report in " << options_.out_dir
            << "/report.txt)";
  stopped_at_ns_ = static_cast<int64_t>(RealtimeNs());
  services_.agent().NoteJobStopping();
  exit_code_ = StopCommandGroup(command_, options_.kill_grace_s);
  stopped_hung_job_ = true;
}

int RunSupervisor::Finish() {
  CloseDashboard();
  if (terminal_job_) tcsetpgrp(STDIN_FILENO, getpgrp());
  Agent& agent = services_.agent();
  // Drained means stored: every ring's records acknowledged by the collector, into a
  // store that is still there (writes into a removed folder succeed, and are lost).
  const bool acknowledged = agent.Drain(options_.drain_timeout_s);
  const bool store_in_place = embedded_ == nullptr || embedded_->StoreStillInPlace();
  const bool drained = acknowledged && store_in_place;
  // The job is over: ranks that never made a ring are seen gone.
  ObserveJobProcesses();
  const AgentStats stats = agent.Stats();
  agent.Stop();
  if (tty_) std::cerr << "\r\033[K";
  if (show_dashboard_) PrintJobLogTail(job_log_, kJobLogTailLines, std::cerr);
  // After a stop on purpose every rank reads as lost; the report says how each ended.
  if (embedded_ != nullptr && !stopped_hung_job_) {
    LogLine(LogLevel::kInfo, "collwatch")
        << absl::StripPrefix(RunStatusLine(embedded_->service().live_state().Summary()), "collwatch: ");
  }
  if (!store_in_place) {
    LogLine(LogLevel::kError, "collwatch run") << "the trace store " << options_.out_dir
              << " was removed or moved while the job ran: what it took since is lost; the rings stay in "
              << rings_.path << " (collwatch analyze or dump them)";
  } else if (!drained && stats.failed > 0) {
    LogLine(LogLevel::kError, "collwatch run") << "the collector refused " << stats.failed << " of the " << stats.rings
              << " rings' streams (the agent said why above); the rings stay in " << rings_.path
              << " (collwatch analyze or dump them)";
  } else if (!drained) {
    LogLine(LogLevel::kError, "collwatch run") << "not every record reached the collector within " << options_.drain_timeout_s
              << " s; the rings stay in " << rings_.path << " (collwatch analyze or dump them)";
  }
  if (stats.lost > 0) {
    LogLine(LogLevel::kError, "collwatch run") << stats.lost << " records were overwritten in the rings before they were read";
  }
  RunRecord record = StartRecord();
  record.running = false;
  record.exit_status = exit_code_;
  record.rings = stats.rings;
  record.events = stats.events_read;
  record.lost = stats.lost;
  record.drained = drained;
  record.stopped_hung_job = stopped_hung_job_;
  record.stopped_at_ns = stopped_at_ns_;
  record.rank_processes = ranks_seen_;
  record.flight_recorder_dumps = flight_recorder_dumps_;
  if (const absl::Status written = WriteRunRecord(options_.out_dir, record); !written.ok()) {
    LogLine(LogLevel::kError, "collwatch run") << written.message();
  }
  if (embedded_ != nullptr) {
    CollectorService& service = embedded_->service();
    service.StopAnalysis();
    // Everything is in: the last look needs no grace for ranks that will never report. Its
    // findings go where the analysis thread's go (the log, --on-finding, --event-log).
    if (!stopped_hung_job_) service.AnalyseOnce(/*final_pass=*/true);
  }
  const std::vector<analyzer::Finding> findings = stopped_hung_job_ ? findings_at_stop_ : CurrentFindings();
  ShowNewFindings(findings, /*clear_status_line=*/false);
  std::vector<std::string> data_gaps;
  if (!drained) {
    const char* why = !store_in_place   ? "the store's folder was removed or moved during the run"
                      : stats.failed > 0 ? "streams refused by the collector"
                                         : "the drain timed out";
    data_gaps.push_back(absl::StrCat("not every ring's records are in the trace store (", why, "): the rings stay in ",
                                     rings_.path));
  }
  std::string why_not_healthy;
  const bool healthy = WriteReport(findings, data_gaps, &why_not_healthy);
  const std::string verdict = healthy ? (findings.empty() ? "healthy, no findings" : "healthy (stragglers only)")
                                      : absl::StrCat("not healthy: ", why_not_healthy);
  LogLine(healthy ? LogLevel::kInfo : LogLevel::kError, "collwatch run") << verdict << "; report in " << options_.out_dir << "/report.txt";
  watcher_.reset();
  if (embedded_ != nullptr) embedded_->Shutdown();
  if (rings_.owned && drained) {
    std::error_code ignored;
    std::filesystem::remove_all(rings_.path, ignored);
  }
  LogLine(LogLevel::kInfo, "collwatch run") << "traces in "
            << (embedded_ != nullptr ? JobTracesDir(options_.out_dir, job_)
                                     : absl::StrCat("the collector at ", services_.address()))
            << "; command exited with " << exit_code_;
  if (stopped_hung_job_) {
    LogLine(LogLevel::kError, "collwatch run") << "the job hung and was stopped (--kill-on-hang): exit " << kExitStoppedHungJob;
    return kExitStoppedHungJob;
  }
  if (options_.fail_on_findings && exit_code_ == 0 && !healthy) {
    LogLine(LogLevel::kError, "collwatch run") << "the command exited with 0 but the run is not healthy (--fail-on-findings): exit "
              << kExitRunNotHealthy;
    return kExitRunNotHealthy;
  }
  return exit_code_;
}

void RunSupervisor::ShowNewFindings(const std::vector<analyzer::Finding>& findings, bool clear_status_line) {
  // A stall's stacks come after it: shown once, when they do.
  for (size_t i = 0; i < findings_shown_ && i < findings.size(); ++i) {
    if (!findings[i].stacks || stacks_shown_.count(i)) continue;
    stacks_shown_.insert(i);
    if (clear_status_line) std::cerr << "\r\033[K";
    LogLine(LogLevel::kFinding, "collwatch") << "stacks at " << findings[i].headline << "\n"
                                             << analyzer::StackClassesText(findings[i].stacks->classes);
  }
  for (; findings_shown_ < findings.size(); ++findings_shown_) {
    if (clear_status_line) std::cerr << "\r\033[K";
    LogLine(LogLevel::kFinding, "collwatch") << analyzer::FindingText(findings[findings_shown_]);
    if (findings[findings_shown_].stacks) stacks_shown_.insert(findings_shown_);
  }
}

void RunSupervisor::TakeStacksOfUnstreamedProcesses(const std::vector<analyzer::Finding>& findings) {
  if (embedded_ == nullptr) return;
  OnlineAnalyzer& analyzer = embedded_->service().online_analyzer();
  for (; stacks_looked_for_ < findings.size(); ++stacks_looked_for_) {
    if (!analyzer::Analyzer::WantsStacks(findings[stacks_looked_for_])) continue;
    for (const ProcessInfo& info : analyzer.UnstreamedProcessesNamedBy(findings[stacks_looked_for_])) {
      if (info.host != ThisHostName()) continue;
      analyzer.AddStacksOf(info, stacks::TakeProcessStacks(info.pid), static_cast<int64_t>(RealtimeNs()));
    }
  }
}

std::vector<analyzer::Finding> RunSupervisor::CurrentFindings() {
  return embedded_ != nullptr ? embedded_->service().online_analyzer().Findings() : watcher_->Findings();
}

// Each rank's latest look goes to run.json, for `collwatch analyze`: once collwatch stopped
// a hung job, the look before the stop (analysis is as of then). A rank that has made no
// NCCL call has no ring for the agent, but can be stopped or gone: the embedded
// collector's analysis hears of it here (an external collector takes rings only).
void RunSupervisor::ObserveJobProcesses() {
  for (const RankProcess& rank : job_processes_->Walk(static_cast<int64_t>(RealtimeNs()))) {
    if (stopped_hung_job_) {
      ranks_seen_.try_emplace(rank.info.pid, rank);
    } else {
      ranks_seen_[rank.info.pid] = rank;
    }
    if (embedded_ != nullptr) embedded_->service().online_analyzer().ObserveProcess(rank.info, rank.sample);
  }
  NoteRanksWithoutRings();
  last_walk_ns_ = MonotonicClockNs();
}

// A rank whose ring could not be made is seen by the walk alone, and would read as gone
// without a word of NCCL; its note says why. Read at each walk, so also once more after
// the job ended and before Finish removes a ring folder of our own.
void RunSupervisor::NoteRanksWithoutRings() {
  for (NoRingNoteRead& note : ListNoRingNotes(rings_.path)) {
    if (note.job != job_ || std::any_of(no_rings_.begin(), no_rings_.end(), [&](const NoRingNoteRead& known) {
          return known.pid == note.pid && known.host == note.host;
        })) {
      continue;
    }
    if (embedded_ != nullptr) embedded_->service().online_analyzer().NoteNoRing(note);
    no_rings_.push_back(std::move(note));
  }
}

bool RunSupervisor::WriteReport(const std::vector<analyzer::Finding>& findings,
                                const std::vector<std::string>& data_gaps, std::string* why_not_healthy) {
  analyzer::ReportInfo info;
  if (embedded_ != nullptr) {
    info = embedded_->service().online_analyzer().Info(job_);
  } else {
    info.calls_counted = false;  // the external collector counts them
    const ClusterView view = watcher_->View();
    for (const v1::RefusedStream& stream : view.state.refused_streams()) {
      info.refused_streams.push_back(RefusedStreamFromProto(stream));
    }
    // The external collector knows only rings: a rank without one is named here.
    for (const NoRingNoteRead& note : no_rings_) info.data_gaps.push_back(NotRecordedText(note));
  }
  info.job = job_;
  info.online = true;
  info.source = embedded_ != nullptr ? options_.out_dir : absl::StrCat("collector ", services_.address());
  if (exit_code_ >= 0) info.command_exit_status = exit_code_;
  info.data_gaps.insert(info.data_gaps.end(), data_gaps.begin(), data_gaps.end());
  if (stopped_hung_job_) analyzer::NoteStoppedByCollwatch(&info);
  for (const FlightRecorderDump& dump : flight_recorder_dumps_) info.notes.push_back(FlightRecorderDumpText(dump));
  std::string error;
  if (!analyzer::WriteReportFiles(options_.out_dir, findings, info, &error)) {
    LogLine(LogLevel::kError, "collwatch run") << error;
  }
  if (why_not_healthy != nullptr) *why_not_healthy = analyzer::WhyNotHealthy(findings, info);
  return analyzer::Healthy(findings, info);
}

}  // namespace collwatch
