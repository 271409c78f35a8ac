// The secret is written before the collector listens, so that no moment exists in which
// the collector runs without a token; the file is removed when the services go.
// Threading: see run_services.h.
#include "cli/run_services.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "cli/secrets.h"

namespace collwatch {

absl::StatusOr<std::unique_ptr<RunServices>> RunServices::Start(const RunOptions& options, const std::string& job,
                                                                const std::string& ring_dir) {
  std::unique_ptr<RunServices> services(new RunServices());
  services->address_ = options.collector;
  services->token_ = options.token;
  const MonitoringOptions& monitoring = options.monitoring;
  if (!services->address_.empty() &&
      (!monitoring.metrics_listen.empty() || !monitoring.on_finding.empty() || !monitoring.event_log.empty())) {
    return absl::InvalidArgumentError(
        "--metrics, --on-finding and --event-log are the collector's: with --collector, give them to `collwatch "
        "collector`");
  }
  if (services->address_.empty()) {
    services->token_ = RandomToken();
    if (services->token_.empty()) {
      return absl::UnavailableError("no secret for the embedded collector: getrandom failed");
    }
    services->token_file_ = absl::StrCat(options.out_dir, "/.collwatch-token");
    if (absl::Status written = WriteSecretFile(services->token_file_, services->token_); !written.ok()) {
      return absl::Status(written.code(), absl::StrCat("no secret for the embedded collector: ", written.message()));
    }
    CollectorOptions collector;
    collector.listen = "127.0.0.1:0";
    collector.token = services->token_;
    collector.out_dir = options.out_dir;
    collector.job = job;
    collector.log = false;  // `collwatch run` prints findings itself
    collector.monitoring = monitoring;
    if (options.stall_after_s > 0) collector.analyzer.stall_after_s = options.stall_after_s;
    absl::StatusOr<std::unique_ptr<CollectorServer>> started = CollectorServer::Start(collector);
    if (!started.ok()) {
      return absl::Status(started.status().code(), absl::StrCat("embedded collector: ", started.status().message()));
    }
    services->server_ = *std::move(started);
    services->address_ = services->server_->address();
  }
  AgentOptions agent_options;
  agent_options.collector = services->address_;
  agent_options.ring_dir = ring_dir;
  agent_options.job = job;
  agent_options.token = services->token_;
  agent_options.tls_ca_pem = options.tls_ca_pem;
  // `collwatch run` removes its own ring folder once drained; one the user named keeps its
  // rings, marked shipped for `collwatch gc`.
  agent_options.keep_rings = true;
  absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Start(agent_options);
  if (!agent.ok()) return absl::Status(agent.status().code(), absl::StrCat("agent: ", agent.status().message()));
  services->agent_ = *std::move(agent);
  return services;
}

RunServices::~RunServices() {
  agent_.reset();
  server_.reset();
  if (!token_file_.empty()) unlink(token_file_.c_str());
}

}  // namespace collwatch
