// One ring of the node and its stream to the collector: the agent's unit of work.
// The tail thread polls it (reads what is new, seals due batches, tracks the writer's
// liveness and its process through /proc); its sender thread keeps one gRPC stream with
// hello, resume, batches out and acks in, reconnecting with backoff.
// Threading: the tail thread calls Poll; the sender and ack reader threads are its own;
// every member below mutex_ is guarded by it. Internal to the agent (agent.cc).
#ifndef COLLWATCH_AGENT_RANK_CHANNEL_H_
#define COLLWATCH_AGENT_RANK_CHANNEL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "agent/outgoing_batches.h"
#include "grpcpp/grpcpp.h"
#include "process/process_info.h"
#include "process/process_sample.h"
#include "process/rank_membership.h"
#include "proto/collwatch.grpc.pb.h"
#include "ring/ring_leftovers.h"
#include "ring/ring_reader.h"

namespace collwatch {

// One ring and its stream to the collector.
class RankChannel {
 public:
  RankChannel(const AgentOptions& options, const std::atomic<bool>& job_stopping, std::unique_ptr<RingReader> reader,
              std::shared_ptr<grpc::Channel> channel);

  ~RankChannel() { Stop(); }

  void Stop();

  // Tail thread: reads what is new, seals due batches, tracks the writer's liveness.
  void Poll();

  bool drained() {
    std::lock_guard<std::mutex> lock(mutex_);
    return drained_;
  }
  bool failed() {
    std::lock_guard<std::mutex> lock(mutex_);
    return failed_;
  }
  // Every record is stored and the writing process has ended (not merely exited its
  // recording: late destructors may still write until the process is gone).
  bool ShippedAndEnded() {
    std::lock_guard<std::mutex> lock(mutex_);
    return drained_ && RingWriterEnded(*reader_);
  }
  uint64_t events_read() {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_read_;
  }
  bool live() {
    std::lock_guard<std::mutex> lock(mutex_);
    return !drained_ && !failed_;
  }
  // Its writer is gone and everything is read, but the collector has acknowledged nothing
  // for `seconds`, whatever the reason (unreachable, or taking the stream and ending it
  // each time): what is left can only wait in the ring.
  bool StrandedFor(uint64_t now, double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    return finished_reading_ && !drained_ && !failed_ && now > last_progress_ns_ &&
           static_cast<double>(now - last_progress_ns_) / 1e9 > seconds;
  }
  // Why the last stream ended, in words ("" while none has failed): for the give-up line.
  std::string LastProblem() {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_problem_;
  }
  const v1::RankIdentity& identity() const { return identity_; }
  const RingIdentity& ring_identity() const { return reader_->identity(); }  // fixed at open
  // The process's job ranks, once after its writer exited normally (empty: not known);
  // nullopt otherwise. The agent sums such exits up instead of a line each.
  std::optional<std::vector<int32_t>> TakeUnsaidExit();
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
  bool SampleProcessIfDue(uint64_t now, bool liveness_changed);

  // Communicator ranks the records name: a process without RANK is shown as its ranks.
  // Bounded: a damaged ring must not grow it.
  void NoteMembershipLocked(const ring::Record& record);
  std::string WhoLocked() const;

  void SendLoop();

  // One stream: hello, resume, then batches out and acks in until it breaks.
  grpc::Status RunConnection(double* backoff);

  // A StacksRequest from the collector: takes the process's stacks on a thread of its own
  // (it takes milliseconds to seconds), for the next batch. One at a time; a request while
  // one is being taken, or for another host's process, is answered by none. Called with
  // mutex_ held.
  void TakeStacksLocked(const v1::StacksRequest& request);

  const AgentOptions& options_;
  const std::atomic<bool>& job_stopping_;  // Agent::NoteJobStopping
  std::unique_ptr<RingReader> reader_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Collector::Stub> stub_;
  v1::RankIdentity identity_;
  const bool local_;  // the ring's process runs on this host: /proc can show it

  std::mutex mutex_;
  std::condition_variable wake_;
  bool exit_unsaid_ = false;  // its writer exited normally; not said yet (TakeUnsaidExit)
  OutgoingBatches outgoing_;
  std::vector<LaneCursor> cursors_;
  std::set<uint32_t> sent_regions_;
  std::set<uint32_t> sent_call_paths_;
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
  uint64_t last_progress_ns_ = created_ns_;  // last batch acknowledged (an answered hello is none)
  bool resume_known_ = false;
  bool finished_reading_ = false;
  bool drained_ = false;
  bool failed_ = false;
  bool broken_ = false;
  bool stop_ = false;
  bool warned_down_ = false;               // an outage was logged; ends with the next acknowledgement
  grpc::StatusCode warned_code_ = grpc::StatusCode::OK;  // the reason it was logged with
  std::string last_problem_;
  grpc::ClientContext* context_ = nullptr;
  std::thread sender_;
  std::thread stacks_taker_;
  bool taking_stacks_ = false;
  std::optional<v1::ProcessStacks> stacks_taken_;  // for the next batch
};

}  // namespace collwatch

#endif  // COLLWATCH_AGENT_RANK_CHANNEL_H_
