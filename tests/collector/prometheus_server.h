// A real Prometheus server (Debian's /usr/bin/prometheus) for the monitoring tests: started
// on a free loopback port with a temporary configuration that scrapes one target every
// second and a temporary storage folder, asked through its HTTP API, stopped with the
// test. Threading: single-threaded test code.
#ifndef COLLWATCH_TESTS_COLLECTOR_PROMETHEUS_SERVER_H_
#define COLLWATCH_TESTS_COLLECTOR_PROMETHEUS_SERVER_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/subprocess.h"

namespace collwatch::testing {

inline constexpr char kPrometheusPath[] = "/usr/bin/prometheus";

// The body of `url` when it answered 200 within `timeout_s`; nullopt otherwise.
std::optional<std::string> HttpGet(const std::string& url, double timeout_s = 5);

// One sample of an instant query's answer.
struct PrometheusSample {
  std::map<std::string, std::string> labels;
  double value = 0;
};

class PrometheusServer {
 public:
  // Starts Prometheus scraping `target` ("127.0.0.1:PORT", path /metrics) every second,
  // its files under `dir`; waits until it says it is ready (false: it did not, and
  // `log()` says why).
  bool Start(const std::string& dir, const std::string& target);
  // The samples of PromQL `query` now; nullopt when the API did not answer.
  std::optional<std::vector<PrometheusSample>> Query(const std::string& query);
  // Asks `query` every half second until some sample's value satisfies `wanted`, or
  // `timeout_s` passes (scaled); returns the last answer's first value, if any.
  std::optional<double> WaitFor(const std::string& query, const std::function<bool(double)>& wanted,
                                double timeout_s);
  std::string log() const;

 private:
  std::string dir_;
  int port_ = 0;
  std::unique_ptr<Subprocess> process_;
};

}  // namespace collwatch::testing

#endif  // COLLWATCH_TESTS_COLLECTOR_PROMETHEUS_SERVER_H_
