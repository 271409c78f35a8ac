// A Watch client that keeps the findings a (remote) collector publishes: `collwatch run
// --collector ADDR` prints them and stops a hung job on them, as with the embedded
// collector. Reconnects while the collector restarts.
// Threading: one background thread reads the stream; Findings() from any thread.
#ifndef COLLWATCH_COLLECTOR_FINDING_WATCHER_H_
#define COLLWATCH_COLLECTOR_FINDING_WATCHER_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "analyzer/finding.h"
#include "grpcpp/grpcpp.h"

namespace collwatch {

class FindingWatcher {
 public:
  FindingWatcher(std::string address, std::string token, std::string job);
  ~FindingWatcher();
  FindingWatcher(const FindingWatcher&) = delete;
  FindingWatcher& operator=(const FindingWatcher&) = delete;

  // The findings of the job so far, oldest first.
  std::vector<analyzer::Finding> Findings();
  bool connected() const { return connected_.load(); }

 private:
  void Loop();

  const std::string address_;
  const std::string token_;
  const std::string job_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> connected_{false};
  std::mutex mutex_;  // guards findings_ and context_
  std::vector<analyzer::Finding> findings_;
  grpc::ClientContext* context_ = nullptr;  // the stream in progress, to cancel it
  std::thread thread_;
};

}  // namespace collwatch

#endif  // COLLWATCH_COLLECTOR_FINDING_WATCHER_H_
