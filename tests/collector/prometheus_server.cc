// The Prometheus server of the monitoring tests. Threading: see prometheus_server.h.
#include "tests/collector/prometheus_server.h"

#include <curl/curl.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "nlohmann/json.hpp"
#include "tests/support/read_files.h"
#include "tests/support/test_time.h"

namespace collwatch::testing {
namespace {

size_t Append(char* data, size_t size, size_t count, void* body) {
  static_cast<std::string*>(body)->append(data, size * count);
  return size * count;
}

}  // namespace

std::optional<std::string> HttpGet(const std::string& url, double timeout_s) {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return std::nullopt;
  std::string body;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Append);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(Scaled(timeout_s) * 1000));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  long code = 0;
  const CURLcode done = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_cleanup(curl);
  if (done != CURLE_OK || code != 200) return std::nullopt;
  return body;
}

bool PrometheusServer::Start(const std::string& dir, const std::string& target) {
  dir_ = dir;
  port_ = FreeLoopbackPort();
  std::ofstream(dir + "/prometheus.yml") << "global:\n"
                                            "  scrape_interval: 1s\n"
                                            "  scrape_timeout: 1s\n"
                                            "scrape_configs:\n"
                                            "  - job_name: collwatch\n"
                                            "    static_configs:\n"
                                            "      - targets: ['" << target << "']\n";
  process_ = std::make_unique<Subprocess>(
      std::vector<std::string>{kPrometheusPath, "--config.file=" + dir + "/prometheus.yml",
                               "--storage.tsdb.path=" + dir + "/tsdb", "--web.listen-address=127.0.0.1:" +
                               std::to_string(port_), "--log.level=warn"},
      std::map<std::string, std::string>{}, dir + "/prometheus.out", dir + "/prometheus.err");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(Scaled(30));
  while (std::chrono::steady_clock::now() < deadline && process_->Running()) {
    if (HttpGet("http://127.0.0.1:" + std::to_string(port_) + "/-/ready", 1)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

std::optional<std::vector<PrometheusSample>> PrometheusServer::Query(const std::string& query) {
  CURL* curl = curl_easy_init();
  char* escaped = curl_easy_escape(curl, query.c_str(), static_cast<int>(query.size()));
  const std::string url = "http://127.0.0.1:" + std::to_string(port_) + "/api/v1/query?query=" + escaped;
  curl_free(escaped);
  curl_easy_cleanup(curl);
  const std::optional<std::string> body = HttpGet(url);
  if (!body) return std::nullopt;
  const nlohmann::json answer = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
  if (!answer.is_object() || answer.value("status", "") != "success") return std::nullopt;
  std::vector<PrometheusSample> samples;
  for (const nlohmann::json& result : answer["data"]["result"]) {
    PrometheusSample& sample = samples.emplace_back();
    for (const auto& [name, value] : result["metric"].items()) sample.labels[name] = value.get<std::string>();
    sample.value = std::stod(result["value"][1].get<std::string>());  // [time, "value"]
  }
  return samples;
}

std::optional<double> PrometheusServer::WaitFor(const std::string& query, const std::function<bool(double)>& wanted,
                                                double timeout_s) {
  std::optional<double> last;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(Scaled(timeout_s));
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::optional<std::vector<PrometheusSample>> samples = Query(query); samples && !samples->empty()) {
      last = samples->front().value;
      for (const PrometheusSample& sample : *samples) {
        if (wanted(sample.value)) return sample.value;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return last;
}

std::string PrometheusServer::log() const { return ReadFile(dir_ + "/prometheus.err"); }

}  // namespace collwatch::testing
