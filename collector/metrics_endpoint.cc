// The metrics, as Prometheus' naming conventions have them: the collwatch_ prefix, base
// units (_seconds, _bytes), counters ending in _total, labels for the one dimension a
// family varies in. Threading: see metrics_endpoint.h.
#include "collector/metrics_endpoint.h"

#include <exception>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "collector/collector_service.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"
#include "prometheus/metric_family.h"
#include "store/trace_store.h"

namespace collwatch {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// The bytes of the files under `dir`; 0 for a folder not made yet. The store is
// collwatch's own folder of a few files per rank: a walk per scrape is cheap.
uint64_t FolderBytes(const std::string& dir) {
  uint64_t bytes = 0;
  std::error_code error;
  for (std::filesystem::recursive_directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    std::error_code ignored;
    if (it->is_regular_file(ignored)) bytes += it->file_size(ignored);
  }
  return bytes;
}

class Families {
 public:
  void Gauge(const std::string& name, const std::string& help, double value) {
    Add(name, help, MetricType::Gauge).metric.emplace_back().gauge.value = value;
  }
  void Counter(const std::string& name, const std::string& help, double value, const std::string& label = "",
               const std::string& label_value = "") {
    MetricFamily& family = Add(name, help, MetricType::Counter);
    ClientMetric& metric = family.metric.emplace_back();
    metric.counter.value = value;
    if (!label.empty()) metric.label.push_back({label, label_value});
  }
  std::vector<MetricFamily> Take() { return std::move(families_); }

 private:
  // The family `name`, made on first use: a labelled family has one entry and many metrics.
  MetricFamily& Add(const std::string& name, const std::string& help, MetricType type) {
    if (families_.empty() || families_.back().name != name) families_.push_back({name, help, type, {}});
    return families_.back();
  }
  std::vector<MetricFamily> families_;
};

class CollectorMetrics final : public prometheus::Collectable {
 public:
  explicit CollectorMetrics(CollectorService* service) : service_(service) {}

  std::vector<MetricFamily> Collect() const override {
    Families out;
    const LiveSummary live = service_->live_state().Summary();
    out.Gauge("collwatch_ranks_reporting", "Ranks whose process streams to the collector now.", live.ranks_reporting);
    out.Gauge("collwatch_ranks_known", "Ranks whose process ever reported.", live.ranks_known);
    out.Gauge("collwatch_ranks_lost", "Ranks of processes that died or went silent.", live.ranks_lost);
    out.Counter("collwatch_records_stored_total", "Records (NCCL call events) stored in the trace store.", live.events);
    out.Gauge("collwatch_oldest_inflight_collective_seconds",
              "Age of the oldest collective some rank entered and not every rank completed (0: none).",
              live.oldest_inflight_age_s);
    const std::string lost_help = "Records lost before the collector could store them, or before the analysis took them, by where.";
    out.Counter("collwatch_records_lost_total", lost_help, live.records_lost, "reason", "ring_overwritten");
    out.Counter("collwatch_records_lost_total", lost_help, live.records_torn, "reason", "writer_died");
    out.Counter("collwatch_records_lost_total", lost_help,
                static_cast<double>(service_->online_analyzer().dropped_records()), "reason", "analysis_queue_full");
    CollectorMonitoring& monitoring = service_->monitoring();
    const std::map<std::string, Refusals> refusals = monitoring.RefusalsByReason();
    for (const char* reason : {"unauthenticated", "other_job", "invalid", "rate_limited", "store"}) {
      const auto found = refusals.find(reason);
      out.Counter("collwatch_streams_refused_total", "Event streams the collector ended, by reason.",
                  found == refusals.end() ? 0 : static_cast<double>(found->second.streams), "reason", reason);
    }
    for (const char* reason : {"unauthenticated", "other_job", "invalid", "rate_limited", "store"}) {
      const auto found = refusals.find(reason);
      out.Counter("collwatch_records_refused_total", "Records in the messages the collector refused, by reason.",
                  found == refusals.end() ? 0 : static_cast<double>(found->second.records), "reason", reason);
    }
    const std::map<std::string, uint64_t> findings = monitoring.FindingsByKind();
    for (const auto& [kind, count] : findings) {
      out.Counter("collwatch_findings_total", "Findings of the online analysis, by kind.", static_cast<double>(count),
                  "kind", kind);
    }
    if (const std::optional<FindingCommandCounts> runs = monitoring.finding_command_counts()) {
      const std::string help = "Runs of the --on-finding command, by how they ended.";
      out.Counter("collwatch_on_finding_commands_total", help, runs->succeeded, "outcome", "succeeded");
      out.Counter("collwatch_on_finding_commands_total", help, runs->failed, "outcome", "failed");
      out.Counter("collwatch_on_finding_commands_total", help, runs->timed_out, "outcome", "timed_out");
      out.Counter("collwatch_on_finding_commands_total", help, runs->dropped, "outcome", "dropped");
    }
    const std::string job = service_->job();
    out.Gauge("collwatch_store_bytes", "Bytes of the served job's trace store on disk.",
              job.empty() ? 0 : static_cast<double>(FolderBytes(JobTracesDir(service_->options().out_dir, job))));
    return out.Take();
  }

 private:
  CollectorService* service_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const std::string& address,
                                                                         CollectorService* service) {
  if (absl::Status valid = CheckListenAddress(address); !valid.ok() || absl::StartsWith(address, "unix")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics ", address, ": give HOST:PORT, e.g. 127.0.0.1:9464 (0.0.0.0:9464 for every interface)"));
  }
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint());
  endpoint->metrics_ = std::make_shared<CollectorMetrics>(service);
  try {
    // One HTTP thread: a scrape a second is all it serves.
    endpoint->exposer_ = std::make_unique<prometheus::Exposer>(address, 1);
  } catch (const std::exception& error) {  // civetweb could not listen: prometheus-cpp throws
    return absl::UnavailableError(absl::StrCat("--metrics: cannot listen on ", address, " (", error.what(), ")"));
  }
  endpoint->exposer_->RegisterCollectable(endpoint->metrics_);
  const std::vector<int> ports = endpoint->exposer_->GetListeningPorts();
  const size_t colon = address.rfind(':');
  endpoint->url_ = absl::StrCat("http://", address.substr(0, colon), ":", ports.empty() ? 0 : ports.front(), "/metrics");
  return endpoint;
}

MetricsEndpoint::~MetricsEndpoint() = default;

}  // namespace collwatch
