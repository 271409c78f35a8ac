// `collwatch run` from the moment its command starts: waits for the command while passing
// Ctrl-C and SIGTERM on to it, shows findings as they come (or the dashboard), watches the
// command's rank processes through /proc, and stops a hung job (--kill-on-hang); then
// drains the agent, writes run.json and the report, and says how the run ended.
// Threading: the supervising (main) thread, with the stop signals blocked; the services
// (collector, agent, watcher) run threads of their own.
#ifndef COLLWATCH_CLI_RUN_SUPERVISOR_H_
#define COLLWATCH_CLI_RUN_SUPERVISOR_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "analyzer/finding.h"
#include "cli/flight_recorder_dump.h"
#include "cli/job_processes.h"
#include "cli/run_dashboard.h"
#include "cli/run_environment.h"
#include "cli/run_options.h"
#include "cli/run_record.h"
#include "cli/run_services.h"
#include "collector/cluster_watcher.h"
#include "ring/ring_leftovers.h"

namespace collwatch {

class RunSupervisor {
 public:
  // The run of `job`, whose rings go to `rings`, shipped by `services` (which outlive it).
  RunSupervisor(const RunOptions& options, std::string job, RingFolder rings, RunServices& services);
  RunSupervisor(const RunSupervisor&) = delete;
  RunSupervisor& operator=(const RunSupervisor&) = delete;

  // Starts the command with `environment` set over collwatch's own, supervises it to its
  // end and finishes the run. Returns `collwatch run`'s exit status (cli/exit_codes.h): the
  // command's (128 + signal when one ended it), or collwatch's own outcome.
  int Run(const std::map<std::string, std::string>& environment);

 private:
  // Starts the command (its output to job.log under the dashboard) and, when collwatch is
  // in the terminal's foreground without the dashboard, makes it the foreground process
  // group. False: said why.
  bool StartJob(const std::map<std::string, std::string>& environment);
  // The loop while the command runs; returns once it ended or was stopped.
  void WatchJob();
  // --kill-on-hang's rule for a pause no history can tell from a hang (a first checkpoint
  // on rank 0): true while every rank the unresolved stalls wait for is at work
  // (Analyzer::LateRanksAtWork), up to a cap; docs/findings.md.
  bool HoldForWork(const std::vector<analyzer::Finding>& findings);
  // Asks the ranks' Flight Recorders for their dumps (waiting up to
  // kFlightRecorderDumpWaitS for them), writes the report, and stops the job.
  void StopHungJob(const std::vector<analyzer::Finding>& findings);
  // Drains, writes run.json and the report; returns the exit status.
  int Finish();

  // Prints the findings not shown yet on stderr, first erasing the status line a terminal
  // shows when `clear_status_line`.
  void ShowNewFindings(const std::vector<analyzer::Finding>& findings, bool clear_status_line);
  std::vector<analyzer::Finding> CurrentFindings();
  // A stall's processes that have no ring (no agent stream to ask): their stacks are
  // taken here, once per finding, and handed to the embedded collector's analysis.
  void TakeStacksOfUnstreamedProcesses(const std::vector<analyzer::Finding>& findings);
  // Walks the command's process tree; the embedded collector's analysis hears of each rank.
  void ObserveJobProcesses();
  // Reads the ring folder's notes of this job's ranks that could make no ring
  // (ring/ring_leftovers.h), each once: the embedded collector's analysis hears of each, so
  // the report gives its reason; with an external collector it is a gap of the report.
  void NoteRanksWithoutRings();
  void CloseDashboard() { dashboard_.reset(); }
  // run.json as it stands once the command has started: the job, its collector and how to
  // reach it (`collwatch top DIR`), the options in force; Finish adds how it ended.
  RunRecord StartRecord() const;
  // Writes report.txt and report.json; returns whether the job is healthy (no finding, no
  // rank that died or failed, the command's exit status 0 once known, the data whole).
  // `data_gaps`: what the trace store lacks of the rings (analyzer::ReportInfo); sets
  // `why_not_healthy` (the reasons in words, "" when healthy) when given.
  bool WriteReport(const std::vector<analyzer::Finding>& findings, const std::vector<std::string>& data_gaps = {},
                   std::string* why_not_healthy = nullptr);

  const RunOptions& options_;
  const std::string job_;
  const RingFolder rings_;
  RunServices& services_;
  CollectorServer* const embedded_;  // nullptr: an external collector
  const bool tty_;                   // stderr is a terminal: status lines rewrite themselves
  const std::string job_log_;        // the command's output while the dashboard is up

  pid_t command_ = -1;
  bool show_dashboard_ = false;
  bool terminal_job_ = false;  // the command is the terminal's foreground group
  std::unique_ptr<ClusterWatcher> watcher_;  // findings and the dashboard's view
  std::unique_ptr<RunDashboard> dashboard_;
  std::unique_ptr<JobProcessTree> job_processes_;
  std::map<pid_t, RankProcess> ranks_seen_;
  std::vector<NoRingNoteRead> no_rings_;  // this job's notes read so far, one a pid
  uint64_t last_walk_ns_ = 0;  // CLOCK_MONOTONIC
  int exit_code_ = -1;         // the command's, once it ended
  size_t findings_shown_ = 0;
  std::set<size_t> stacks_shown_;   // findings whose stacks were shown
  size_t stacks_looked_for_ = 0;    // findings whose unstreamed processes' stacks were taken
  uint64_t first_finding_ns_ = 0;   // monotonic, when --kill-on-hang saw the first finding
  uint64_t last_at_work_ns_ = 0;    // monotonic, when HoldForWork last saw the late ranks at work
  bool said_at_work_ = false;
  bool stopped_hung_job_ = false;
  int64_t stopped_at_ns_ = 0;
  std::vector<analyzer::Finding> findings_at_stop_;  // later ones would be the stop's echo
  std::vector<FlightRecorderDump> flight_recorder_dumps_;  // asked before the stop
};

}  // namespace collwatch

#endif  // COLLWATCH_CLI_RUN_SUPERVISOR_H_
