// The agent's per-rank send queue. Threading: see outgoing_batches.h.
#include "agent/outgoing_batches.h"

#include <map>

#include "store/event_codec.h"

namespace collwatch {

void OutgoingBatches::Add(v1::Event event, uint64_t now_ns) {
  if (open_->events_size() == 0) open_since_ns_ = now_ns;
  *open_->add_events() = std::move(event);
  if (open_->events_size() >= limits_.max_events) Seal(nullptr);
}

void OutgoingBatches::AddRegion(v1::RegionName region) { *open_->add_regions() = std::move(region); }

void OutgoingBatches::AddCallPath(v1::CallPath path) { *open_->add_call_paths() = std::move(path); }

void OutgoingBatches::AddStacks(v1::ProcessStacks stacks) { *open_->mutable_stacks() = std::move(stacks); }

bool OutgoingBatches::SealIfDue(uint64_t now_ns, bool force, const v1::StreamEventsRequest& status) {
  const bool has_content = open_->events_size() > 0 || open_->regions_size() > 0 || open_->call_paths_size() > 0;
  const bool old = has_content && now_ns - open_since_ns_ >= limits_.max_delay_ns;
  force = force || open_->has_stacks();
  if (!force && !old) return false;
  Seal(&status);
  return true;
}

void OutgoingBatches::Seal(const v1::StreamEventsRequest* status) {
  if (status != nullptr) {
    open_->set_lost(status->lost());
    open_->set_torn(status->torn());
    open_->set_dropped(status->dropped());
    open_->set_heartbeat_ns(status->heartbeat_ns());
    open_->set_writer_status(status->writer_status());
    open_->set_agent_time_ns(status->agent_time_ns());
    if (status->has_process()) *open_->mutable_process() = status->process();
    open_->set_exit_recorded(status->exit_recorded());
    open_->set_exit_code(status->exit_code());
  }
  const uint64_t events = open_events();
  queue_.push_back(Pending{std::move(open_), events, false});
  unacked_events_ += events;
  ++batches_sealed_;
  open_ = std::make_shared<v1::StreamEventsRequest>();
  // A batch sealed because it is full carries the previous status until the next stamp.
  if (status == nullptr && queue_.size() > 1) {
    const v1::StreamEventsRequest& before = *queue_[queue_.size() - 2].request;
    v1::StreamEventsRequest& sealed = *queue_.back().request;
    sealed.set_writer_status(before.writer_status());
    sealed.set_lost(before.lost());
    sealed.set_torn(before.torn());
    sealed.set_dropped(before.dropped());
    if (before.has_process()) *sealed.mutable_process() = before.process();
    sealed.set_exit_recorded(before.exit_recorded());
    sealed.set_exit_code(before.exit_code());
  }
}

std::shared_ptr<const v1::StreamEventsRequest> OutgoingBatches::NextToSend() {
  for (Pending& pending : queue_) {
    if (pending.sent) continue;
    pending.sent = true;
    pending.request->set_batch_seq(next_seq_++);
    return pending.request;
  }
  return nullptr;
}

void OutgoingBatches::Acked(uint64_t seq) {
  while (!queue_.empty() && queue_.front().sent && queue_.front().request->batch_seq() <= seq) {
    unacked_events_ -= queue_.front().events;
    queue_.pop_front();
  }
}

void OutgoingBatches::NewConnection() {
  next_seq_ = 1;
  for (Pending& pending : queue_) {
    pending.sent = false;
    pending.request->set_batch_seq(0);
  }
}

void OutgoingBatches::ApplyResume(const v1::StreamEventsResponse& answer) {
  std::map<uint32_t, uint64_t> next;
  for (const v1::LaneResume& resume : answer.resume()) next[resume.lane()] = resume.next_position();
  if (next.empty()) return;
  auto trim = [&](v1::StreamEventsRequest* request) {
    auto* events = request->mutable_events();
    int kept = 0;
    for (int i = 0; i < events->size(); ++i) {
      const v1::Event& event = events->Get(i);
      auto lane = next.find(event.lane());
      if (lane != next.end() && LanePosition(event) < lane->second) continue;
      if (kept != i) events->SwapElements(kept, i);
      ++kept;
    }
    const int dropped = events->size() - kept;
    for (int i = 0; i < dropped; ++i) events->RemoveLast();
    return static_cast<uint64_t>(dropped);
  };
  for (Pending& pending : queue_) {
    const uint64_t dropped = trim(pending.request.get());
    pending.events -= dropped;
    unacked_events_ -= dropped;
  }
  trim(open_.get());
}

}  // namespace collwatch
