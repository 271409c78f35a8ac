// A Watch client: keeps the cluster state a collector publishes (a full state, then
// deltas applied as they come) and how the connection is doing. `collwatch top` draws
// it; `collwatch run --collector ADDR` prints its findings and stops a hung job on them.
// Reconnects for as long as it lives, so a restarted collector is picked up again.
// Threading: one background thread reads the stream; View()/Findings() from any thread.
#ifndef COLLWATCH_COLLECTOR_CLUSTER_WATCHER_H_
#define COLLWATCH_COLLECTOR_CLUSTER_WATCHER_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "analyzer/finding.h"
#include "grpcpp/grpcpp.h"
#include "proto/collwatch.pb.h"

namespace collwatch {

struct ClusterWatcherOptions {
  std::string address;     // the collector
  std::string token;       // its shared secret, if it has one
  std::string tls_ca_pem;  // root certificates: connect with TLS
  std::string job;         // empty: the collector's only job
  double retry_s = 1;      // pause between connection attempts
};

// The state as last received and the connection's story.
struct ClusterView {
  v1::ClusterState state;
  bool connected = false;          // a stream is open and has delivered
  bool ever_connected = false;
  int connections = 0;             // streams that delivered a full state
  int failed_attempts = 0;         // attempts since the last good stream
  std::string last_error;          // why the last stream ended, when it failed
  // Its gRPC code: UNAUTHENTICATED (no token, a wrong one) will not pass by retrying.
  grpc::StatusCode last_code = grpc::StatusCode::OK;
  uint64_t collector_time_ns = 0;  // collector clock of the latest message
  uint64_t messages = 0;           // messages received
  uint64_t bytes = 0;              // their encoded size
};

class ClusterWatcher {
 public:
  explicit ClusterWatcher(ClusterWatcherOptions options);
  ~ClusterWatcher();
  ClusterWatcher(const ClusterWatcher&) = delete;
  ClusterWatcher& operator=(const ClusterWatcher&) = delete;

  ClusterView View();
  // The job's findings so far, oldest first.
  std::vector<analyzer::Finding> Findings();
  bool connected();
  // Asks the collector to take every process's stacks (TakeStacks; they come in the
  // state's `stacks`). The processes asked, or the error in words. Blocks up to 5 s.
  std::string RequestStacks();

 private:
  void Loop();

  const ClusterWatcherOptions options_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;  // guards view_ and context_
  ClusterView view_;
  grpc::ClientContext* context_ = nullptr;  // the stream in progress, to cancel it
  std::thread thread_;
};

}  // namespace collwatch

#endif  // COLLWATCH_COLLECTOR_CLUSTER_WATCHER_H_
