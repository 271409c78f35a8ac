// The node agent. Threading: see agent.h. A RankChannel's state (cursors, send queue,
// status) is guarded by its mutex; the tail thread fills the queue, the sender thread
// drains it over the current stream, the ack reader trims it.
#include "agent/agent.h"

#include <limits.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "process/process_info.h"
#include "process/process_sample.h"
#include "process/rank_membership.h"
#include "proto/collector_channel.h"
#include "proto/collwatch.grpc.pb.h"
#include "ring/clocks.h"
#include "ring/ring_directory.h"
#include "ring/ring_reader.h"
#include "ring/settings.h"
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

}  // namespace

std::string DefaultRingDir() {
  char dir[PATH_MAX];
  RingDirSetting(dir, sizeof dir);
  return dir;
}

// One ring and its stream to the collector.
class RankChannel {
 public:
  RankChannel(const AgentOptions& options, const std::atomic<bool>& job_stopping, std::unique_ptr<RingReader> reader,
              std::shared_ptr<grpc::Channel> channel)
      : options_(options), job_stopping_(job_stopping), reader_(std::move(reader)), channel_(std::move(channel)),
        stub_(v1::Collector::NewStub(channel_)), identity_(RankIdentityFromRing(reader_->identity())),
        local_(reader_->identity().host == ThisHostName()), outgoing_(options.limits),
        cursors_(reader_->identity().lane_count), created_ns_(MonotonicClockNs()) {
    sender_ = std::thread([this] { SendLoop(); });
  }

  ~RankChannel() { Stop(); }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      if (context_ != nullptr) context_->TryCancel();
    }
    wake_.notify_all();
    if (sender_.joinable()) sender_.join();
  }

  // Tail thread: reads what is new, seals due batches, tracks the writer's liveness.
  void Poll() {
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
        std::cerr << "collwatch agent: " << WhoLocked() << " " << StatusWords(status) << " (ring "
                  << identity_.ring_path() << ")\n";
      }
      status_ = status;
    }
    const bool sample_changed = SampleProcessIfDue(now, status_changed);

    bool read_everything = true;
    if (!outgoing_.Full()) {
      ReadBatch batch;
      const size_t budget = static_cast<size_t>(options_.limits.max_unacked_events - outgoing_.unacked_events());
      for (uint32_t lane = 0; lane < cursors_.size(); ++lane) {
        reader_->ReadLane(lane, &cursors_[lane], budget, writer_gone, &batch);
      }
      lost_ += batch.lost;
      torn_ += batch.torn;
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

  bool drained() {
    std::lock_guard<std::mutex> lock(mutex_);
    return drained_;
  }
  bool failed() {
    std::lock_guard<std::mutex> lock(mutex_);
    return failed_;
  }
  bool live() {
    std::lock_guard<std::mutex> lock(mutex_);
    return !drained_ && !failed_;
  }
  // Its writer is gone and everything is read, but the collector has not been heard from
  // for `seconds`: what is left can only wait in the ring.
  bool StrandedFor(uint64_t now, double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    return finished_reading_ && !drained_ && !failed_ && now > last_contact_ns_ &&
           static_cast<double>(now - last_contact_ns_) / 1e9 > seconds;
  }
  const v1::RankIdentity& identity() const { return identity_; }
  // "rank 3 (node0, pid 4242)", "ranks 0-1 (node0, pid 4242)": for log lines.
  std::string Who() {
    std::lock_guard<std::mutex> lock(mutex_);
    return WhoLocked();
  }
  void AddTo(AgentStats* stats) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats->rings;
    if (drained_) ++stats->drained;
    if (failed_) ++stats->failed;
    stats->events_read += events_read_;
    stats->lost += lost_;
    stats->connects += connects_;
  }

 private:
  // Looks at the writer's process through /proc (rings of this host only), every
  // kSampleIntervalNs and at once when its liveness changed; never again once it is gone,
  // since its pid may soon name another process. True when what the look saw changed.
  // Called with mutex_ held.
  bool SampleProcessIfDue(uint64_t now, bool liveness_changed) {
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
      std::cerr << "collwatch agent: " << WhoLocked() << " is stopped (SIGSTOP, Ctrl-Z or a debugger)\n";
    }
    sample_ = std::move(sample);
    return changed;
  }

  // Communicator ranks the records name: a process without RANK is shown as its ranks.
  // Bounded: a damaged ring must not grow it.
  void NoteMembershipLocked(const ring::Record& record) {
    static constexpr size_t kMaxMemberships = 256;
    const std::optional<CommMembership> membership = MembershipOf(record);
    if (!membership || memberships_.size() >= kMaxMemberships ||
        std::find(memberships_.begin(), memberships_.end(), *membership) != memberships_.end()) {
      return;
    }
    memberships_.push_back(*membership);
  }
  std::string WhoLocked() const {
    const std::vector<int32_t> ranks =
        JobRanksOf(identity_.rank(), memberships_, WorldCommId(memberships_));
    return ProcessLabel(ranks, identity_.host(), identity_.pid());
  }

  void SendLoop() {
    double backoff = 0.1;
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
          std::cerr << "collwatch agent: the collector refused " << WhoLocked() << ": " << status.error_message()
                    << "\n";
        }
        return;
      }
      if (options_.log && !status.ok() && !warned_down_) {
        std::cerr << "collwatch agent: collector " << options_.collector << " unreachable ("
                  << status.error_message() << "); retrying with backoff, ring reading goes on\n";
        warned_down_ = true;
      }
      const double wait = backoff * (0.75 + 0.5 * std::uniform_real_distribution<double>(0, 1)(jitter));
      wake_.wait_for(lock, std::chrono::duration<double>(wait), [this] { return stop_; });
      backoff = std::min(backoff * 2, options_.max_backoff_s);
    }
  }

  // One stream: hello, resume, then batches out and acks in until it breaks.
  grpc::Status RunConnection(double* backoff) {
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
      last_contact_ns_ = MonotonicClockNs();
      *backoff = 0.1;
      if (warned_down_ && options_.log) {
        std::cerr << "collwatch agent: reconnected " << WhoLocked() << " to " << options_.collector << "\n";
      }
      warned_down_ = false;
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
        last_contact_ns_ = MonotonicClockNs();
        outgoing_.Acked(ack.acked_batch_seq());
        if (finished_reading_ && outgoing_.Empty()) drained_ = true;
        wake_.notify_all();
      }
      std::lock_guard<std::mutex> lock(mutex_);
      broken_ = true;
      wake_.notify_all();
    });
    bool closed_cleanly = false;
    while (true) {
      std::shared_ptr<const v1::StreamEventsRequest> next;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait_for(lock, std::chrono::milliseconds(100), [&] {
          return stop_ || broken_ || drained_ || (next = outgoing_.NextToSend()) != nullptr;
        });
        if (finished_reading_ && outgoing_.Empty()) drained_ = true;
        if (stop_ || broken_) break;
        if (drained_) {
          closed_cleanly = true;
          break;
        }
      }
      if (next != nullptr && !stream->Write(*next)) break;
    }
    if (closed_cleanly) {
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

  const AgentOptions& options_;
  const std::atomic<bool>& job_stopping_;  // Agent::NoteJobStopping
  std::unique_ptr<RingReader> reader_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Collector::Stub> stub_;
  v1::RankIdentity identity_;
  const bool local_;  // the ring's process runs on this host: /proc can show it

  std::mutex mutex_;
  std::condition_variable wake_;
  OutgoingBatches outgoing_;
  std::vector<LaneCursor> cursors_;
  std::set<uint32_t> sent_regions_;
  std::vector<CommMembership> memberships_;
  v1::WriterStatus status_ = v1::WRITER_STATUS_UNSPECIFIED;
  ProcessSample sample_;  // the latest look at the process (sampled_ns 0: none)
  uint64_t next_sample_ns_ = 0;
  uint64_t created_ns_;
  uint64_t last_seal_ns_ = 0;
  uint64_t lost_ = 0;
  uint64_t torn_ = 0;
  uint64_t events_read_ = 0;
  uint64_t connects_ = 0;
  uint64_t last_contact_ns_ = created_ns_;  // last hello answered or batch acknowledged
  bool resume_known_ = false;
  bool finished_reading_ = false;
  bool drained_ = false;
  bool failed_ = false;
  bool broken_ = false;
  bool stop_ = false;
  bool warned_down_ = false;
  grpc::ClientContext* context_ = nullptr;
  std::thread sender_;
};

absl::StatusOr<std::unique_ptr<Agent>> Agent::Start(const AgentOptions& options) {
  std::unique_ptr<Agent> agent(new Agent(options));
  if (agent->options_.ring_dir.empty()) agent->options_.ring_dir = DefaultRingDir();
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  arguments.SetMaxSendMessageSize(64 << 20);
  agent->channel_ = CollectorChannel(options.collector, options.tls_ca_pem, arguments);
  agent->tail_thread_ = std::thread([raw = agent.get()] { raw->TailLoop(); });
  return agent;
}

Agent::Agent(AgentOptions options) : options_(std::move(options)) {}

Agent::~Agent() { Stop(); }

void Agent::Stop() {
  stop_ = true;
  if (tail_thread_.joinable()) tail_thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [path, rank] : ranks_) rank->Stop();
}

void Agent::Rescan() {
  // Rings in a folder another user could write into are not this user's to ship.
  const RingDirCheck dir = OpenPrivateRingDir(options_.ring_dir.c_str(), /*create=*/false);
  if (dir.fd >= 0) close(dir.fd);
  if (dir.verdict != RingDirVerdict::kPrivate) {
    if (dir.verdict == RingDirVerdict::kUnusable && dir.error == ENOENT) return;  // the folder appears with the first ring
    char why[256];
    DescribeRingDirCheck(dir, why, sizeof why);
    std::string& logged = unreadable_[options_.ring_dir];
    if (options_.log && logged != why) std::cerr << "collwatch agent: not reading ring folder " << options_.ring_dir << ": " << why << "\n";
    logged = why;
    return;
  }
  absl::StatusOr<std::vector<std::string>> paths = ListRingFiles(options_.ring_dir);
  if (!paths.ok()) return;  // the folder appears with the first ring
  for (const std::string& path : *paths) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (ranks_.count(path)) continue;
    }
    absl::StatusOr<std::unique_ptr<RingReader>> reader = RingReader::Open(path);
    if (!reader.ok()) {
      // A ring still being created is retried on the next scan; log each new reason once.
      std::string& logged = unreadable_[path];
      const std::string why(reader.status().message());
      if (options_.log && logged != why && why.find("not written yet") == std::string::npos) {
        std::cerr << "collwatch agent: skipping " << why << "\n";
      }
      logged = why;
      continue;
    }
    if (!options_.job.empty() && (*reader)->identity().job != options_.job) continue;
    unreadable_.erase(path);
    auto channel = std::static_pointer_cast<grpc::Channel>(channel_);
    auto rank = std::make_unique<RankChannel>(options_, job_stopping_, *std::move(reader), channel);
    std::lock_guard<std::mutex> lock(mutex_);
    ranks_[path] = std::move(rank);
  }
}

void Agent::TailLoop() {
  uint64_t last_scan = 0;
  uint64_t last_live = MonotonicClockNs();
  while (!stop_) {
    const uint64_t now = MonotonicClockNs();
    if (static_cast<double>(now - last_scan) / 1e9 >= options_.rescan_interval_s) {
      Rescan();
      last_scan = now;
    }
    std::vector<RankChannel*> ranks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& [path, rank] : ranks_) ranks.push_back(rank.get());
    }
    bool any_live = false;
    for (RankChannel* rank : ranks) {
      rank->Poll();
      const bool stranded = options_.give_up_after_s > 0 && rank->StrandedFor(now, options_.give_up_after_s);
      if (stranded && options_.log && given_up_.insert(rank->identity().ring_path()).second) {
        std::cerr << "collwatch agent: giving up on " << rank->Who() << ": its writer ended and collector "
                  << options_.collector
                  << " was unreachable for " << options_.give_up_after_s << " s; its unshipped records stay in "
                  << rank->identity().ring_path() << " (collwatch dump)\n";
      }
      any_live = any_live || (rank->live() && !stranded);
    }
    if (any_live) last_live = now;
    if (options_.idle_exit_s > 0 && static_cast<double>(now - last_live) / 1e9 > options_.idle_exit_s) {
      idle_expired_ = true;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(options_.poll_interval_s));
  }
}

bool Agent::Drain(double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    bool done = true;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& [path, rank] : ranks_) done = done && !rank->live();
    }
    if (done) {
      // A ring created at the last moment is found by one more scan.
      Rescan();
      std::lock_guard<std::mutex> lock(mutex_);
      bool still = true;
      for (auto& [path, rank] : ranks_) still = still && !rank->live();
      if (still) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

AgentStats Agent::Stats() {
  AgentStats stats;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [path, rank] : ranks_) rank->AddTo(&stats);
  return stats;
}

}  // namespace collwatch
