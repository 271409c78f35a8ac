// What the collector tells the cluster's monitoring, apart from the trace store: the
// counts its metrics read (findings by kind, refused streams), and where each new finding
// and process change goes (the event log, the --on-finding command).
// Threading: thread-safe; the analysis thread reports, the metrics' HTTP threads read.
#ifndef COLLWATCH_COLLECTOR_COLLECTOR_MONITORING_H_
#define COLLWATCH_COLLECTOR_COLLECTOR_MONITORING_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "analyzer/finding.h"
#include "collector/event_log.h"
#include "collector/finding_command.h"
#include "collector/live_state.h"

namespace collwatch {

struct MonitoringOptions {
  std::string metrics_listen;         // HOST:PORT of the Prometheus endpoint; empty: none
  std::string on_finding;             // shell command run per new finding; empty: none
  double on_finding_timeout_s = 60;   // each run's time limit
  std::string event_log;              // JSON-lines file; empty: none
};

// Streams and records the collector refused, for one reason.
struct Refusals {
  uint64_t streams = 0;
  uint64_t records = 0;
};

class CollectorMonitoring {
 public:
  // Every finding kind counts from 0, so a rate over it is defined before the first.
  CollectorMonitoring();
  // Opens the event log and starts the command worker as `options` asks; the error says
  // which cannot be.
  absl::Status Start(const MonitoringOptions& options);

  // A new finding of the job `job`.
  void Finding(const std::string& job, const analyzer::Finding& finding);
  // Process changes from LiveState::TakeProcessChanges.
  void ProcessChanges(const std::vector<ProcessChange>& changes, uint64_t dropped);
  // The collector ended a stream with `code`; `records`: the events of the message refused.
  void Refused(absl::StatusCode code, uint64_t records);
  // Whether anything here wants the process changes.
  bool wants_process_changes() const { return event_log_ != nullptr; }

  std::map<std::string, uint64_t> FindingsByKind();
  std::map<std::string, Refusals> RefusalsByReason();
  // Unset without --on-finding.
  std::optional<FindingCommandCounts> finding_command_counts();

 private:
  std::mutex mutex_;
  std::map<std::string, uint64_t> findings_by_kind_;
  std::map<std::string, Refusals> refusals_;
  std::unique_ptr<EventLog> event_log_;
  std::unique_ptr<FindingCommand> finding_command_;
};

// The metrics' `reason` label of a stream the collector ended with `code`:
// "unauthenticated", "other_job", "invalid", "rate_limited", "store".
std::string RefusalReason(absl::StatusCode code);

}  // namespace collwatch

#endif  // COLLWATCH_COLLECTOR_COLLECTOR_MONITORING_H_
