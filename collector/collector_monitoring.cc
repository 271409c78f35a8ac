// The collector's monitoring outputs. Threading: see collector_monitoring.h.
#include "collector/collector_monitoring.h"

#include <utility>

#include "analyzer/report.h"
#include "files/json_contract.h"
#include "proto/collwatch.pb.h"

namespace collwatch {

CollectorMonitoring::CollectorMonitoring() {
  const google::protobuf::EnumDescriptor* kinds = v1::FindingKind_descriptor();
  for (int i = 0; i < kinds->value_count(); ++i) {
    const int number = kinds->value(i)->number();
    if (number == 0) continue;  // FINDING_KIND_UNSPECIFIED
    findings_by_kind_[std::string(analyzer::FindingKindName(static_cast<analyzer::FindingKind>(number)))] = 0;
  }
}

absl::Status CollectorMonitoring::Start(const MonitoringOptions& options) {
  if (!options.event_log.empty()) {
    absl::StatusOr<std::unique_ptr<EventLog>> log = EventLog::Open(options.event_log);
    if (!log.ok()) return log.status();
    event_log_ = *std::move(log);
  }
  if (!options.on_finding.empty()) {
    if (options.on_finding_timeout_s <= 0) {
      return absl::InvalidArgumentError("--on-finding-timeout must be more than 0 seconds");
    }
    finding_command_ = std::make_unique<FindingCommand>(options.on_finding, options.on_finding_timeout_s);
  }
  return absl::OkStatus();
}

void CollectorMonitoring::Finding(const std::string& job, const analyzer::Finding& finding) {
  const std::string kind(analyzer::FindingKindName(finding.kind));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++findings_by_kind_[kind];
  }
  if (event_log_ == nullptr && finding_command_ == nullptr) return;
  const nlohmann::json json = analyzer::FindingJson(finding);
  if (event_log_ != nullptr) event_log_->Finding(job, json);
  if (finding_command_ != nullptr) {
    finding_command_->Enqueue(json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                              {{"COLLWATCH_JOB", job},
                               {"COLLWATCH_FINDING_KIND", kind},
                               // The finding is report.json's: its schema's version.
                               {"COLLWATCH_SCHEMA_VERSION", std::to_string(kReportSchemaVersion)}});
  }
}

void CollectorMonitoring::ProcessChanges(const std::vector<ProcessChange>& changes, uint64_t dropped) {
  if (event_log_ == nullptr) return;
  for (const ProcessChange& change : changes) event_log_->Process(change);
  if (dropped > 0) event_log_->ChangesDropped(dropped);
}

void CollectorMonitoring::Refused(absl::StatusCode code, uint64_t records) {
  std::lock_guard<std::mutex> lock(mutex_);
  Refusals& refusals = refusals_[RefusalReason(code)];
  ++refusals.streams;
  refusals.records += records;
}

std::map<std::string, uint64_t> CollectorMonitoring::FindingsByKind() {
  std::lock_guard<std::mutex> lock(mutex_);
  return findings_by_kind_;
}

std::map<std::string, Refusals> CollectorMonitoring::RefusalsByReason() {
  std::lock_guard<std::mutex> lock(mutex_);
  return refusals_;
}

std::optional<FindingCommandCounts> CollectorMonitoring::finding_command_counts() {
  if (finding_command_ == nullptr) return std::nullopt;
  return finding_command_->counts();
}

std::string RefusalReason(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnauthenticated: return "unauthenticated";
    case absl::StatusCode::kPermissionDenied: return "other_job";  // CollectorService::Hello
    case absl::StatusCode::kInvalidArgument: return "invalid";
    case absl::StatusCode::kResourceExhausted: return "rate_limited";
    default: return "store";  // the trace store could not take it
  }
}

}  // namespace collwatch
