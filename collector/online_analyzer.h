// The analyzer run online inside the collector. gRPC threads hand it each accepted
// batch (Enqueue: what the batch says, with only the events the store took as new); the collector's analysis thread feeds them to the model and analyses (Tick),
// so ingest never waits for analysis. The queue is bounded: past it, records are dropped
// and counted, and the analysis says it is incomplete.
// Threading: thread-safe. Enqueue from any thread; Tick, Freeze and the readers from
// any thread (one mutex for the queue, one for the model).
#ifndef COLLWATCH_COLLECTOR_ONLINE_ANALYZER_H_
#define COLLWATCH_COLLECTOR_ONLINE_ANALYZER_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/analyzer.h"
#include "analyzer/report.h"
#include "process/process_update.h"
#include "proto/collwatch.pb.h"
#include "ring/ring_leftovers.h"

namespace collwatch {

class OnlineAnalyzer {
 public:
  static constexpr size_t kMaxQueuedRecords = 1 << 21;  // ~300 MiB of records

  // The collector runs for the whole job: its model forgets settled history.
  explicit OnlineAnalyzer(analyzer::AnalyzerOptions options) : analyzer_(Bounded(options)) {}

  // What an accepted batch of the stream `key` (its hello's identity) says
  // (ProcessUpdateFromBatch).
  void Enqueue(const std::string& key, const v1::RankIdentity& identity, ProcessUpdate update);
  // A process seen from outside (`collwatch run` walks its command's process tree), e.g.
  // a rank stopped before its first NCCL call, which has no ring to stream: queued like
  // a batch; in the model it is a process with no calls (JobModel::ObserveProcess), the
  // same entry its ring's stream takes over later, matched by host and pid.
  void ObserveProcess(const ProcessInfo& info, const ProcessSample& sample);
  // A process the preload made no ring for, as its note in the ring folder says
  // (ring/ring_leftovers.h): queued like ObserveProcess, and the same process in the model
  // (JobModel::NoteNoRing), whose report gives the note's reason instead of "gone".
  void NoteNoRing(NoRingNoteRead note);
  // The stacks of the stream `key`'s process, taken at `taken_ns` (its agent's answer to
  // a StacksRequest): queued like a batch.
  void EnqueueStacks(const std::string& key, stacks::ProcessStacks stacks, int64_t taken_ns);
  // Feeds what is queued, then analyses up to `now_ns` (CLOCK_REALTIME); returns the
  // findings that are new.
  std::vector<analyzer::Finding> Tick(int64_t now_ns, bool final_pass = false);
  // Stops analysing: what happens next (e.g. `collwatch run` killing a hung job) is
  // not the job's doing and must not become findings.
  void Freeze();

  std::vector<analyzer::Finding> Findings();
  // The findings whose stacks arrived (Analyzer::AttachStacks) or that resolved
  // (Analyzer::TakeResolved: stragglers) in the Ticks since the last call, each with its
  // index in Findings().
  std::vector<std::pair<size_t, analyzer::Finding>> TakeUpdatedFindings();
  // Analyzer::LateRanksAtWork as of the last Tick (--kill-on-hang's rule).
  bool LateRanksAtWork(const analyzer::Finding& finding, int64_t now_ns);
  // The streams of the processes `finding` names (Analyzer::ProcessesNamedBy), by key.
  std::vector<std::string> StreamsNamedBy(const analyzer::Finding& finding);
  // The processes `finding` names that stream no ring (seen only from outside, by
  // `collwatch run`'s process walk: no agent can be asked for their stacks), and the
  // stacks of one of them, taken by the caller: queued like a batch.
  std::vector<ProcessInfo> UnstreamedProcessesNamedBy(const analyzer::Finding& finding);
  void AddStacksOf(const ProcessInfo& info, stacks::ProcessStacks stacks, int64_t taken_ns);
  // Each communicator's oldest collective in flight, as of the last Tick.
  std::vector<analyzer::InflightCollective> Inflight();
  analyzer::ReportInfo Info(const std::string& job);
  uint64_t dropped_records();
  // A stream the collector refused because it came as another job: the findings that
  // name its rank say so, and the report counts it as a gap (at most kMaxRefusedStreams).
  void NoteRefusedStream(const analyzer::RefusedStream& stream);
  static constexpr size_t kMaxRefusedStreams = 64;

 private:
  // One batch's worth of work for the model, or one observation of a process.
  struct Item {
    std::string key;
    ProcessUpdate update;
    std::optional<ProcessInfo> observed;  // set: an ObserveProcess (or AddStacksOf), not a batch
    std::optional<NoRingNoteRead> no_ring;  // set: a NoteNoRing, not a batch
    std::optional<stacks::ProcessStacks> stacks;  // set: EnqueueStacks / AddStacksOf, taken at stacks_taken_ns
    int64_t stacks_taken_ns = 0;
  };
  struct Stream {
    v1::RankIdentity identity;
    bool in_model = false;
    analyzer::ProcessId process = 0;
  };
  void FeedLocked(Item& item);
  // `finding` with the refused streams of the ranks it names, its words made again.
  analyzer::Finding WithRefusedStreamsLocked(analyzer::Finding finding) const;
  // Queues `item` (whose stream key or observed process says whose) with its stacks.
  void QueueStacks(Item item, stacks::ProcessStacks stacks, int64_t taken_ns);
  static analyzer::AnalyzerOptions Bounded(analyzer::AnalyzerOptions options) {
    options.bounded_history = true;
    return options;
  }

  std::mutex queue_mutex_;  // guards queue_, streams_ (the map, identities, positions), queued_records_, dropped_
  std::vector<Item> queue_;
  std::map<std::string, Stream> streams_;
  size_t queued_records_ = 0;
  uint64_t dropped_ = 0;

  // Guards analyzer_, frozen_ and the Stream fields the model side owns (in_model,
  // process). queue_mutex_ may be taken while it is held, never the
  // other way round.
  std::mutex model_mutex_;
  analyzer::Analyzer analyzer_;
  bool frozen_ = false;
  std::vector<analyzer::RefusedStream> refused_;
  std::set<size_t> updated_;  // indexes of findings whose stacks changed, not taken yet
};

}  // namespace collwatch

#endif  // COLLWATCH_COLLECTOR_ONLINE_ANALYZER_H_
