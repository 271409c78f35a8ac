// The collector's Prometheus metrics over HTTP (`--metrics HOST:PORT`, GET /metrics in the
// text format), served by prometheus-cpp's exposer. The figures are read when scraped,
// from the live state, the online analysis, the monitoring counts and the store folder,
// so ingest pays nothing for them. The names are listed in docs/monitoring.md.
// Threading: the exposer's HTTP threads call Collect; all it reads is thread-safe.
#ifndef COLLWATCH_COLLECTOR_METRICS_ENDPOINT_H_
#define COLLWATCH_COLLECTOR_METRICS_ENDPOINT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace prometheus {
class Exposer;
class Collectable;
}  // namespace prometheus

namespace collwatch {

class CollectorService;

class MetricsEndpoint {
 public:
  // Listens on `address` (HOST:PORT, port 0: any free one) for scrapes of `service`'s
  // metrics; `service` must outlive the endpoint.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(const std::string& address,
                                                                CollectorService* service);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // "http://127.0.0.1:9464/metrics", the chosen port filled in.
  const std::string& url() const { return url_; }

 private:
  MetricsEndpoint() = default;
  std::shared_ptr<prometheus::Collectable> metrics_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string url_;
};

}  // namespace collwatch

#endif  // COLLWATCH_COLLECTOR_METRICS_ENDPOINT_H_
