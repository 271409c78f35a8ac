// RankChannel: one ring and its gRPC stream to the collector (see rank_channel.h).
// Threading: the tail thread polls (reads, seals batches, tracks liveness), the sender
// thread connects and sends, an ack reader thread per connection trims; all of a
// channel's state is guarded by its mutex.
#include "agent/rank_channel.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "process/log_line.h"
#include "process/process_sample.h"
#include "process/rank_membership.h"
#include "proto/collector_channel.h"
#include "ring/clocks.h"
#include "store/event_codec.h"

namespace collwatch {
namespace {

const char* StatusWords(v1::WriterStatus status) {
  switch (status) {
    case v1::WRITER_STATUS_RUNNING: return "is running";
    case v1::WRITER_STATUS_EXITED: return "exited";
    case v1::WRITER_STATUS_DISABLED: return "stopped recording after an internal failure";
    case v1::WRITER_STATUS_DEAD: return "died without exiting (killed or crashed)";
    case v1::WRITER_STATUS_SILENT: return "stopped beating (heartbeat stale; stuck or stopped)";
    default: return "is in an unknown state";
  }
}

// Errors that a retry cannot fix: the collector refused this stream for good.
bool Permanent(grpc::StatusCode code) {
  return code == grpc::StatusCode::PERMISSION_DENIED || code == grpc::StatusCode::UNAUTHENTICATED ||
         code == grpc::StatusCode::INVALID_ARGUMENT || code == grpc::StatusCode::FAILED_PRECONDITION ||
         code == grpc::StatusCode::DATA_LOSS || code == grpc::StatusCode::UNIMPLEMENTED;
}

// A collector we could not talk to, rather than one that answered with an error.
bool Unreachable(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED ||
         code == grpc::StatusCode::CANCELLED || code == grpc::StatusCode::UNKNOWN;
}

constexpr double kFirstBackoffS = 0.1;

}  // namespace

RankChannel::RankChannel(const AgentOptions& options, const std::atomic<bool>& job_stopping,
                         std::unique_ptr<RingReader> reader, std::shared_ptr<grpc::Channel> channel)
    : options_(options), job_stopping_(job_stopping), reader_(std::move(reader)), channel_(std::move(channel)),
      stub_(v1::Collector::NewStub(channel_)), identity_(RankIdentityFromRing(reader_->identity())),
      local_(reader_->identity().host == ThisHostName()), outgoing_(options.limits),
      cursors_(reader_->identity().lane_count), created_ns_(MonotonicClockNs()) {
  sender_ = std::thread([this] { SendLoop(); });
}

void RankChannel::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    if (context_ != nullptr) context_->TryCancel();
  }
  wake_.notify_all();
  if (sender_.joinable()) sender_.join();
  if (stacks_taker_.joinable()) stacks_taker_.join();
}

void RankChannel::Poll() {
  const uint64_t now = MonotonicClockNs();
  std::unique_lock<std::mutex> lock(mutex_);
  if (failed_ || drained_) return;
  // Before the first read, give the collector a moment to say what it already has
  // (an agent restart then resends nothing).
  if (!resume_known_ && now - created_ns_ < 1'000'000'000ull) return;
  resume_known_ = true;

  const ring::WriterState state = reader_->writer_state();
  const bool alive = reader_->WriterProcessAlive();
  const v1::WriterStatus status =
      ProcessStatusToWire(StatusOfRing(state, alive, reader_->heartbeat_ns(), now, options_.silent_after_s));
  const bool writer_gone = state != ring::WriterState::kRunning || !alive;
  const bool status_changed = status != status_;
  if (status_changed) {
    if (options_.log && !job_stopping_ &&
        (status_ != v1::WRITER_STATUS_UNSPECIFIED || status != v1::WRITER_STATUS_RUNNING)) {
      if (status == v1::WRITER_STATUS_EXITED) {
        exit_unsaid_ = true;  // the agent says the exits of many processes in one line
      } else {
        LogLine(status == v1::WRITER_STATUS_RUNNING ? LogLevel::kInfo : LogLevel::kError, "collwatch agent")
            << WhoLocked() << " " << StatusWords(status) << " (ring " << identity_.ring_path() << ")";
      }
    }
    status_ = status;
  }
  const bool sample_changed = SampleProcessIfDue(now, status_changed);
  if (stacks_taken_) {
    outgoing_.AddStacks(*std::move(stacks_taken_));
    stacks_taken_.reset();
  }

  bool read_everything = true;
  if (!outgoing_.Full()) {
    ReadBatch batch;
    const size_t budget = static_cast<size_t>(options_.limits.max_unacked_events - outgoing_.unacked_events());
    for (uint32_t lane = 0; lane < cursors_.size(); ++lane) {
      reader_->ReadLane(lane, &cursors_[lane], budget, writer_gone, &batch);
    }
    lost_ += batch.lost;
    torn_ += batch.torn + batch.damaged;  // both a gap in what the ring kept
    events_read_ += batch.records.size();
    for (const IndexedRecord& item : batch.records) {
      const uint32_t region = item.record.region_id;
      if (region != 0 && !sent_regions_.count(region)) {
        v1::RegionName named = RegionNameFromRing(*reader_, region);
        if (!named.name().empty()) {
          outgoing_.AddRegion(std::move(named));
          sent_regions_.insert(region);
        }
      }
      const uint32_t path_id = item.record.call_path_id;
      if (path_id != 0 && !sent_call_paths_.count(path_id)) {
        if (std::optional<CallPath> path = reader_->ReadCallPath(path_id)) {
          outgoing_.AddCallPath(CallPathToWire(path_id, *path));
          sent_call_paths_.insert(path_id);
        }
      }
      NoteMembershipLocked(item.record);
      v1::Event event;
      EventFromRecord(item, &event);
      outgoing_.Add(std::move(event), now);
    }
  }
  for (uint32_t lane = 0; lane < cursors_.size(); ++lane) {
    const uint64_t end = reader_->write_index(lane);
    if (cursors_[lane].next < end) read_everything = false;
  }
  v1::StreamEventsRequest stamp;
  stamp.set_writer_status(status_);
  stamp.set_lost(lost_);
  stamp.set_torn(torn_);
  stamp.set_dropped(reader_->dropped());
  stamp.set_heartbeat_ns(reader_->heartbeat_ns());
  stamp.set_agent_time_ns(now);
  if (sample_.sampled_ns != 0) *stamp.mutable_process() = ProcessSampleToWire(sample_);
  if (const std::optional<int32_t> exit_code = reader_->exit_code()) {
    stamp.set_exit_recorded(true);
    stamp.set_exit_code(*exit_code);
  }
  const bool keepalive = now - last_seal_ns_ > 1'000'000'000ull;
  const bool final_batch = writer_gone && read_everything && !finished_reading_;
  if (outgoing_.SealIfDue(now, status_changed || sample_changed || keepalive || final_batch, stamp)) {
    last_seal_ns_ = now;
    lock.unlock();
    wake_.notify_all();
    lock.lock();
  }
  if (writer_gone && read_everything) finished_reading_ = true;
}

void RankChannel::TakeStacksLocked(const v1::StacksRequest& request) {
  if (!local_ || taking_stacks_ || stop_) return;
  if (stacks_taker_.joinable()) stacks_taker_.join();  // the previous one, finished
  taking_stacks_ = true;
  // One write per line: the channels' threads log at once.
  if (options_.log) LogLine(LogLevel::kInfo, "collwatch agent") << absl::StrCat("taking the stacks of ", WhoLocked(), " (", request.reason(), ")");
  stacks_taker_ = std::thread([this, pid = identity_.pid(), request_id = request.request_id()] {
    const uint64_t started = MonotonicClockNs();
    const stacks::ProcessStacks taken = stacks::TakeProcessStacks(pid);
    v1::ProcessStacks wire = StacksToWire(taken, request_id, static_cast<int64_t>(RealtimeNs()));
    std::lock_guard<std::mutex> lock(mutex_);
    if (options_.log) {
      LogLine(LogLevel::kInfo, "collwatch agent") << absl::StrCat("took the stacks of ", WhoLocked(), ": ", taken.threads.size(),
                                " threads in ", (MonotonicClockNs() - started) / 1'000'000, " ms, each held at most ",
                                taken.longest_pause_ns / 1'000, " us",
                                taken.problems.empty() ? "" : absl::StrCat(" (", taken.problems.front(), ")"), "");
    }
    stacks_taken_ = std::move(wire);
    taking_stacks_ = false;
  });
}

bool RankChannel::SampleProcessIfDue(uint64_t now, bool liveness_changed) {
  // Long enough for a busy process to gain several 10 ms clock ticks, so that "CPU not
  // advancing" means idle, not between ticks.
  constexpr uint64_t kSampleIntervalNs = 250'000'000;
  if (!local_ || sample_.state == ProcessState::kGone) return false;
  if (now < next_sample_ns_ && !liveness_changed) return false;
  next_sample_ns_ = now + kSampleIntervalNs;
  ProcessSample sample = SampleProcess(
      identity_.pid(), sample_.sampled_ns != 0 ? &sample_ : nullptr, static_cast<int64_t>(RealtimeNs()));
  const bool changed = sample.state != sample_.state || sample.cpu_advancing != sample_.cpu_advancing;
  if (options_.log && !job_stopping_ && sample.state == ProcessState::kStopped &&
      sample_.state != ProcessState::kStopped) {
    LogLine(LogLevel::kError, "collwatch agent") << WhoLocked() << " is stopped (SIGSTOP, Ctrl-Z or a debugger)";
  }
  sample_ = std::move(sample);
  return changed;
}

void RankChannel::NoteMembershipLocked(const ring::Record& record) {
  static constexpr size_t kMaxMemberships = 256;
  const std::optional<CommMembership> membership = MembershipOf(record);
  if (!membership || memberships_.size() >= kMaxMemberships ||
      std::find(memberships_.begin(), memberships_.end(), *membership) != memberships_.end()) {
    return;
  }
  memberships_.push_back(*membership);
}

std::optional<std::vector<int32_t>> RankChannel::TakeUnsaidExit() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!exit_unsaid_) return std::nullopt;
  exit_unsaid_ = false;
  return JobRanksOf(identity_.rank(), memberships_, WorldCommId(memberships_));
}

std::string RankChannel::WhoLocked() const {
  const std::vector<int32_t> ranks =
      JobRanksOf(identity_.rank(), memberships_, WorldCommId(memberships_));
  return ProcessLabel(ranks, identity_.host(), identity_.pid());
}

void RankChannel::SendLoop() {
  double backoff = kFirstBackoffS;
  std::mt19937 jitter(static_cast<uint32_t>(MonotonicClockNs()));
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_ || drained_ || failed_) return;
    }
    const grpc::Status status = RunConnection(&backoff);
    std::unique_lock<std::mutex> lock(mutex_);
    context_ = nullptr;
    if (stop_ || drained_) return;
    if (Permanent(status.error_code())) {
      failed_ = true;
      if (options_.log) {
        LogLine(LogLevel::kError, "collwatch agent") << "the collector refused " << WhoLocked() << ": " << status.error_message();
      }
      return;
    }
    if (!status.ok()) {
      last_problem_ = absl::StrCat(Unreachable(status.error_code()) ? "was unreachable: " : "ended every stream: ",
                                   status.error_message());
    }
    // Said once per outage, and again only when the reason changes (a collector that takes
    // the stream and ends it at once would otherwise log two lines per try).
    if (options_.log && !status.ok() && (!warned_down_ || status.error_code() != warned_code_)) {
      if (Unreachable(status.error_code())) {
        LogLine(LogLevel::kError, "collwatch agent") << "collector " << options_.collector << " unreachable ("
                  << status.error_message() << "); retrying with backoff, ring reading goes on";
      } else {
        LogLine(LogLevel::kError, "collwatch agent") << "the collector " << options_.collector << " ended the stream of " << WhoLocked()
                  << ": " << status.error_message() << "; retrying with backoff, ring reading goes on";
      }
      warned_down_ = true;
      warned_code_ = status.error_code();
    }
    const double wait = backoff * (0.75 + 0.5 * std::uniform_real_distribution<double>(0, 1)(jitter));
    wake_.wait_for(lock, std::chrono::duration<double>(wait), [this] { return stop_; });
    backoff = std::min(backoff * 2, options_.max_backoff_s);
  }
}

grpc::Status RankChannel::RunConnection(double* backoff) {
  grpc::ClientContext context;
  if (!options_.token.empty()) context.AddMetadata(kTokenMetadataKey, options_.token);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_) return grpc::Status::CANCELLED;
    context_ = &context;
  }
  auto stream = stub_->StreamEvents(&context);
  v1::StreamEventsRequest hello;
  *hello.mutable_rank() = identity_;
  v1::StreamEventsResponse answer;
  if (!stream->Write(hello) || !stream->Read(&answer)) {
    stream->WritesDone();
    return stream->Finish();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++connects_;
    // An answered hello is no progress: a collector that cannot store ends the stream at
    // the first batch. The backoff and the outage end with the first acknowledgement.
    outgoing_.NewConnection();
    outgoing_.ApplyResume(answer);
    if (!resume_known_) {
      // Nothing read yet: start each lane where the collector's copy ends.
      for (const v1::LaneResume& resume : answer.resume()) {
        if (resume.lane() < cursors_.size()) cursors_[resume.lane()] = CursorAt(resume.next_position());
      }
      resume_known_ = true;
    }
    broken_ = false;
  }
  wake_.notify_all();
  std::thread acks([&] {
    v1::StreamEventsResponse ack;
    while (stream->Read(&ack)) {
      std::lock_guard<std::mutex> lock(mutex_);
      last_progress_ns_ = MonotonicClockNs();
      *backoff = kFirstBackoffS;
      if (warned_down_ && options_.log) {
        LogLine(LogLevel::kInfo, "collwatch agent") << absl::StrCat("reconnected ", WhoLocked(), " to ", options_.collector,
                                  ": it stores the records again");
      }
      warned_down_ = false;
      outgoing_.Acked(ack.acked_batch_seq());
      if (ack.has_take_stacks()) TakeStacksLocked(ack.take_stacks());
      if (finished_reading_ && outgoing_.Empty()) drained_ = true;
      wake_.notify_all();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    broken_ = true;
    wake_.notify_all();
  });
  bool closed_cleanly = false;
  bool collector_ended = false;  // the collector finished the stream: its status says why
  while (true) {
    std::shared_ptr<const v1::StreamEventsRequest> next;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_for(lock, std::chrono::milliseconds(100), [&] {
        return stop_ || broken_ || drained_ || (next = outgoing_.NextToSend()) != nullptr;
      });
      if (finished_reading_ && outgoing_.Empty()) drained_ = true;
      if (stop_ || broken_) {
        collector_ended = broken_ && !stop_;
        break;
      }
      if (drained_) {
        closed_cleanly = true;
        break;
      }
    }
    if (next != nullptr && !stream->Write(*next)) break;
  }
  // Cancelling would replace the collector's reason with CANCELLED; it is only needed to
  // stop the ack reader, which has already stopped when the collector ended the stream.
  if (closed_cleanly || collector_ended) {
    stream->WritesDone();
  } else {
    context.TryCancel();
  }
  acks.join();
  grpc::Status status = stream->Finish();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    context_ = nullptr;
  }
  return status;
}

}  // namespace collwatch
