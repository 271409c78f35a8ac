// The collector: the gRPC service (StreamEvents: one stream per rank, batches in, acks
// out after the batch is written to the trace store; Watch: cluster state for
// dashboards) and the server that hosts it, with its security rules.
// Threading: gRPC's callback threads run the reactors; the store and the live state are
// thread-safe; gRPC alarms pace the Watch streams.
#ifndef COLLWATCH_COLLECTOR_COLLECTOR_SERVICE_H_
#define COLLWATCH_COLLECTOR_COLLECTOR_SERVICE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "analyzer/analyzer.h"
#include "files/safe_files.h"
#include "collector/collector_monitoring.h"
#include "collector/live_state.h"
#include "collector/metrics_endpoint.h"
#include "collector/online_analyzer.h"
#include "collector/server_claims.h"
#include "grpcpp/grpcpp.h"
#include "proto/collector_channel.h"
#include "process/log_line.h"
#include "proto/collwatch.grpc.pb.h"
#include "store/trace_store.h"

namespace collwatch {

// The service's name in grpc.health.v1 (its full proto name); "" is the whole server.
inline constexpr char kCollectorServiceName[] = "collwatch.v1.Collector";

// Helper threads leave signals to the thread that waits for them: each calls this first.
void BlockAllSignalsInThisThread();

struct CollectorOptions {
  std::string listen = "127.0.0.1:7777";  // host:port, or unix:PATH
  std::string out_dir = "collwatch-out";
  std::string token;          // shared secret; required to listen beyond loopback
  std::string tls_cert_pem;   // TLS certificate chain and key (PEM contents), both or none
  std::string tls_key_pem;
  std::string job;            // serve only this job; empty: the first job that says hello
  bool fsync = false;         // fdatasync each batch before acknowledging it
  int max_message_bytes = 8 << 20;
  int max_events_per_batch = 1 << 16;
  double max_events_per_second = 4e6;  // per stream, averaged over a second
  double watch_interval_s = 0.5;
  bool log = true;            // log refused streams and errors on stderr
  bool analyze = true;        // run the analyzer online
  double analyze_interval_s = 0.1;
  analyzer::AnalyzerOptions analyzer;
  MonitoringOptions monitoring;  // metrics, --on-finding, --event-log (docs/monitoring.md)
};

// True for 127.0.0.0/8, ::1, localhost and unix sockets (IP literals only: a host name
// other than localhost is not loopback, whatever it starts with).
bool IsLoopbackAddress(const std::string& address);

// OK for HOST:PORT with a port 0-65535 (0: any free port), and for unix:PATH whose folder
// exists; else an error saying what to give.
absl::Status CheckListenAddress(const std::string& address);

// Equal strings, in time that depends only on the length of `expected` (the secret).
bool ConstantTimeEquals(const std::string& given, const std::string& expected);

class CollectorService final : public v1::Collector::CallbackService {
 public:
  // `monitoring` started (CollectorMonitoring::Start); none: one that only counts.
  explicit CollectorService(const CollectorOptions& options, std::unique_ptr<CollectorMonitoring> monitoring = nullptr);
  ~CollectorService() override;

  grpc::ServerBidiReactor<v1::StreamEventsRequest, v1::StreamEventsResponse>* StreamEvents(
      grpc::CallbackServerContext* context) override;
  grpc::ServerWriteReactor<v1::WatchResponse>* Watch(grpc::CallbackServerContext* context,
                                                     const v1::WatchRequest* request) override;
  // Asks every connected stream's agent for its process's stacks (`collwatch top`'s key).
  grpc::ServerUnaryReactor* TakeStacks(grpc::CallbackServerContext* context, const v1::TakeStacksRequest* request,
                                       v1::TakeStacksResponse* response) override;

  LiveState& live_state() { return live_state_; }
  OnlineAnalyzer& online_analyzer() { return online_analyzer_; }
  CollectorMonitoring& monitoring() { return *monitoring_; }
  std::string job();
  // Writes report.json and report.txt of the findings so far into `dir`.
  absl::Status WriteReport(const std::string& dir);
  // Ends the Watch streams at their next tick; call before the server shuts down.
  void StopWatchers();
  // Stops the analysis thread (idempotent).
  void StopAnalysis();
  // One pass of the analysis: its new findings logged, counted, stored in the live state
  // and handed to the monitoring outputs, as the analysis thread does every interval.
  // `final_pass`: everything is in (OnlineAnalyzer::Tick); call after StopAnalysis.
  void AnalyseOnce(bool final_pass = false);

  // Used by the reactors.
  absl::Status Authenticate(const grpc::CallbackServerContext& context) const;
  // Checks a hello and opens its trace; fills the resume points.
  absl::StatusOr<std::shared_ptr<RankTraceWriter>> Hello(const v1::RankIdentity& identity,
                                                         v1::StreamEventsResponse* answer);
  const CollectorOptions& options() const { return options_; }
  TraceStore& store() { return store_; }
  // The stacks request waiting for the stream `key`'s next answer, taken (none: nullopt).
  std::optional<v1::StacksRequest> TakeStacksRequest(const std::string& key);
  // A line on stderr (when options().log), as "collwatch collector: line".
  void Log(LogLevel level, const std::string& line) const;

  bool stopping() const { return stopping_.load(); }
  class WatchReactor;
  std::atomic<int> watchers_{0};  // Watch reactors not done yet (CollectorServer waits for none)

 private:

  void AnalysisLoop();
  // Asks the agents of the streams `keys` for their processes' stacks (a stall finding
  // names them), in each stream's next answer.
  void RequestStacks(const std::vector<std::string>& keys, const std::string& reason);

  CollectorOptions options_;
  std::unique_ptr<CollectorMonitoring> monitoring_;
  TraceStore store_;
  LiveState live_state_;
  OnlineAnalyzer online_analyzer_;
  std::mutex analysis_mutex_;
  std::condition_variable analysis_wake_;
  bool analysis_stop_ = false;
  std::thread analysis_thread_;
  std::mutex job_mutex_;
  std::string job_;
  std::atomic<bool> stopping_{false};
  std::mutex stacks_mutex_;
  std::map<std::string, v1::StacksRequest> stacks_wanted_;  // by stream key
  uint64_t next_stacks_request_ = 1;
};

// A running collector server.
class CollectorServer {
 public:
  // Validates the options (security rules), takes the store folder (made when missing;
  // it must be this user's, closed to others' writes, and no other collector's, by folder
  // and by path: server_claims.h) and starts listening, never on a unix socket path
  // another server answers on. A port of 0 picks one.
  static absl::StatusOr<std::unique_ptr<CollectorServer>> Start(const CollectorOptions& options);
  ~CollectorServer();

  // The address clients dial (the chosen port filled in).
  const std::string& address() const { return address_; }
  // The metrics' URL ("" without --metrics).
  std::string metrics_url() const { return metrics_ != nullptr ? metrics_->url() : ""; }
  // Whether the store folder is still where it was made (files/safe_files.h): the
  // records acknowledged since it was removed or moved are lost.
  bool StoreStillInPlace() const {
    return store_lock_.has_value() && store_lock_->StillAt(service_->options().out_dir);
  }
  CollectorService& service() { return *service_; }
  void Shutdown();
  void Wait() { server_->Wait(); }

 private:
  CollectorServer() = default;
  // First members: released after the store is closed (server_claims.h: the rule).
  std::optional<StorePathLock> store_path_lock_;
  std::optional<FolderLock> store_lock_;
  std::unique_ptr<CollectorService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsEndpoint> metrics_;  // last: it reads the service while it serves
  std::string address_;
  bool shut_down_ = false;
};

}  // namespace collwatch

#endif  // COLLWATCH_COLLECTOR_COLLECTOR_SERVICE_H_
