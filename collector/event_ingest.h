// What the collector does with the messages of one event stream, without the network:
// the hello's checks and trace, then per batch the validation, the rate limit, the store
// append, the live state and the online analysis, and the answer to send back. The gRPC
// reactor (collector_service.cc) and the ingest fuzzer both drive it.
// Threading: one thread at a time per stream (the reactor holds its lock).
#ifndef COLLWATCH_COLLECTOR_EVENT_INGEST_H_
#define COLLWATCH_COLLECTOR_EVENT_INGEST_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "proto/collwatch.pb.h"
#include "store/trace_store.h"

namespace collwatch {

class CollectorService;

// Lanes a hello may claim, as the ring reader accepts.
inline constexpr uint32_t kMaxStreamLanes = 1024;

class EventIngest {
 public:
  explicit EventIngest(CollectorService* service) : service_(service) {}
  EventIngest(const EventIngest&) = delete;
  EventIngest& operator=(const EventIngest&) = delete;

  // One message of the stream, in arrival order. An error ends the stream with that
  // status (the agent sees it); the answer is the ack (and, for the hello, the resume
  // points).
  absl::StatusOr<v1::StreamEventsResponse> Accept(const v1::StreamEventsRequest& request);
  // The stream ended: the live state shows the process disconnected.
  void Close();

  // "job/host/pid/start" of the hello's process; empty before the hello.
  const std::string& key() const { return key_; }

 private:
  CollectorService* service_;
  std::shared_ptr<RankTraceWriter> writer_;
  v1::RankIdentity identity_;
  std::string key_;
  uint64_t last_batch_seq_ = 0;
  double bucket_ = 0;
  double bucket_time_ = 0;
};

}  // namespace collwatch

#endif  // COLLWATCH_COLLECTOR_EVENT_INGEST_H_
