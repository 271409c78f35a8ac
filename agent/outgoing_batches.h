// The agent's send queue for one rank stream: events gathered into batches bounded in
// size and age, kept until the collector acknowledges them, renumbered and resent on a
// new connection, trimmed by the collector's resume points.
// Threading: not thread-safe; the rank channel that owns it holds its mutex.
#ifndef COLLWATCH_AGENT_OUTGOING_BATCHES_H_
#define COLLWATCH_AGENT_OUTGOING_BATCHES_H_

#include <cstdint>
#include <deque>
#include <memory>

#include "proto/collwatch.pb.h"

namespace collwatch {

struct BatchLimits {
  int max_events = 4096;                 // events per batch
  uint64_t max_delay_ns = 50'000'000;    // age of the oldest event before a batch is sealed
  uint64_t max_unacked_events = 1 << 20; // beyond this the agent stops reading the ring
};

class OutgoingBatches {
 public:
  explicit OutgoingBatches(BatchLimits limits) : limits_(limits) {}

  // Adds to the open batch; seals it when full.
  void Add(v1::Event event, uint64_t now_ns);
  void AddRegion(v1::RegionName region);
  void AddCallPath(v1::CallPath path);
  // The answer to a StacksRequest; the open batch is then due at once.
  void AddStacks(v1::ProcessStacks stacks);
  // Seals the open batch if it is old enough (or `force`, even when empty: a status-only
  // batch). The status fields are stamped on the sealed batch.
  bool SealIfDue(uint64_t now_ns, bool force, const v1::StreamEventsRequest& status);

  // The next sealed batch not yet sent on this connection, numbered; nullptr if none.
  std::shared_ptr<const v1::StreamEventsRequest> NextToSend();
  // Everything sent with batch_seq <= `seq` on this connection is stored.
  void Acked(uint64_t seq);
  // A new connection: every unacked batch is to be sent again, numbered from 1.
  void NewConnection();
  // Drops events the collector already stores (per lane: position < next_position).
  void ApplyResume(const v1::StreamEventsResponse& answer);

  uint64_t unacked_events() const { return unacked_events_ + open_events(); }
  bool Full() const { return unacked_events() >= limits_.max_unacked_events; }
  // Nothing open, nothing waiting for an ack.
  bool Empty() const { return queue_.empty() && open_events() == 0 && open_->regions_size() == 0 &&
                              open_->call_paths_size() == 0 && !open_->has_stacks(); }
  uint64_t batches_sealed() const { return batches_sealed_; }

 private:
  struct Pending {
    std::shared_ptr<v1::StreamEventsRequest> request;
    uint64_t events = 0;
    bool sent = false;
  };
  uint64_t open_events() const { return static_cast<uint64_t>(open_->events_size()); }
  void Seal(const v1::StreamEventsRequest* status);

  BatchLimits limits_;
  std::shared_ptr<v1::StreamEventsRequest> open_ = std::make_shared<v1::StreamEventsRequest>();
  uint64_t open_since_ns_ = 0;
  std::deque<Pending> queue_;  // sealed, oldest first
  uint64_t unacked_events_ = 0;
  uint64_t next_seq_ = 1;
  uint64_t batches_sealed_ = 0;
};

}  // namespace collwatch

#endif  // COLLWATCH_AGENT_OUTGOING_BATCHES_H_
