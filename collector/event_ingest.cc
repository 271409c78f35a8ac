// One event stream's ingest. Threading: see event_ingest.h.
#include "collector/event_ingest.h"

#include <time.h>

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "collector/collector_service.h"
#include "collector/stream_checks.h"
#include "ring/clocks.h"
#include "store/event_codec.h"

namespace collwatch {
namespace {

std::string ProcessKey(const v1::RankIdentity& identity) {
  return absl::StrCat(identity.job(), "/", identity.host(), "/", identity.pid(), "/",
                      identity.start_realtime_ns());
}

bool SameIdentity(const v1::RankIdentity& a, const v1::RankIdentity& b) {
  return a.SerializeAsString() == b.SerializeAsString();
}

double MonotonicSeconds() { return static_cast<double>(MonotonicClockNs()) / 1e9; }

}  // namespace

absl::StatusOr<v1::StreamEventsResponse> EventIngest::Accept(const v1::StreamEventsRequest& request) {
  v1::StreamEventsResponse answer;
  if (writer_ == nullptr) {
    if (!request.has_rank()) {
      return absl::InvalidArgumentError("the first message of a stream must be a hello carrying `rank`");
    }
    absl::StatusOr<std::shared_ptr<RankTraceWriter>> writer = service_->Hello(request.rank(), &answer);
    if (!writer.ok()) return writer.status();
    writer_ = *std::move(writer);
    identity_ = request.rank();
    key_ = ProcessKey(identity_);
    service_->live_state().StreamOpened(key_, identity_);
    bucket_time_ = MonotonicSeconds();
    bucket_ = service_->options().max_events_per_second;
  } else if (request.has_rank() && !SameIdentity(request.rank(), identity_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank identity changed mid-stream (hello said pid ", identity_.pid(), " rank ", identity_.rank(),
        ", this batch says pid ", request.rank().pid(), " rank ", request.rank().rank(),
        "): open a new stream per process"));
  }
  if (request.batch_seq() != 0 && request.batch_seq() <= last_batch_seq_) {
    return absl::InvalidArgumentError(absl::StrCat("batch_seq ", request.batch_seq(),
                                                   " does not follow ", last_batch_seq_));
  }
  if (request.events_size() > service_->options().max_events_per_batch) {
    return absl::InvalidArgumentError(absl::StrCat("batch of ", request.events_size(),
                                                   " events; at most ", service_->options().max_events_per_batch));
  }
  const uint32_t lanes = identity_.lane_count() > 0 ? identity_.lane_count() : kMaxStreamLanes;
  for (const v1::Event& event : request.events()) {
    if (event.lane() >= lanes || event.kind() < v1::EVENT_KIND_ENTER ||
        event.kind() > v1::EVENT_KIND_ASYNC_ERROR) {
      return absl::InvalidArgumentError(absl::StrCat("malformed event: lane ", event.lane(), " of ", lanes,
                                                     ", kind ", static_cast<int>(event.kind())));
    }
  }
  if (absl::Status order = CheckLaneOrder(request, lanes); !order.ok()) return order;
  // Token bucket: a second's worth of events may arrive at once, then the rate holds.
  const double now = MonotonicSeconds();
  const double rate = service_->options().max_events_per_second;
  bucket_ = std::min(rate, bucket_ + (now - bucket_time_) * rate);
  bucket_time_ = now;
  bucket_ -= request.events_size();
  if (bucket_ < 0) {
    return absl::ResourceExhaustedError(absl::StrCat("stream exceeds ", rate,
                                                     " events per second (collector --max-stream-rate)"));
  }
  absl::StatusOr<AppendResult> appended = writer_->Append(request);
  if (!appended.ok()) return appended.status();
  service_->live_state().BatchAccepted(key_, request, appended->stored);
  if (service_->options().analyze) {
    service_->online_analyzer().Enqueue(key_, identity_, ProcessUpdateFromBatch(request, appended->stored_events));
  }
  if (request.has_stacks() && service_->options().analyze) {
    service_->online_analyzer().EnqueueStacks(key_, StacksFromWire(request.stacks()), request.stacks().taken_ns());
  }
  if (request.batch_seq() != 0) last_batch_seq_ = request.batch_seq();
  answer.set_acked_batch_seq(last_batch_seq_);
  if (std::optional<v1::StacksRequest> wanted = service_->TakeStacksRequest(key_)) {
    *answer.mutable_take_stacks() = *std::move(wanted);
  }
  return answer;
}

void EventIngest::Close() {
  if (!key_.empty()) service_->live_state().StreamClosed(key_);
}

}  // namespace collwatch
