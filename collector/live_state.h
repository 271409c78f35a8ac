// Live cluster state built from the event streams as they arrive: per communicator and
// rank the entered and completed frontiers, last activity and liveness, for the online
// analyzer, the Watch stream and `collwatch run`'s status line.
// Threading: thread-safe (one mutex); updated once per accepted batch, not per event.
#ifndef COLLWATCH_COLLECTOR_LIVE_STATE_H_
#define COLLWATCH_COLLECTOR_LIVE_STATE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "analyzer/analyzer.h"
#include "analyzer/progress_frontier.h"
#include "proto/collwatch.pb.h"

namespace collwatch {

// One line's worth of figures for a status display.
// Ranks count as their processes hold them: a process may hold several
// (analyzer/process_ranks.h).
struct LiveSummary {
  int ranks_reporting = 0;     // ranks of the processes whose stream is open now
  int ranks_known = 0;         // ranks of the processes that ever reported
  int ranks_lost = 0;          // ranks of dead or silent processes
  int processes_known = 0;     // processes that ever reported
  uint64_t events = 0;         // events stored
  double collectives_per_second = 0;  // collectives entered per second, summed over comms
  uint64_t oldest_inflight_comm = 0;  // 0: nothing in flight
  uint64_t oldest_inflight_seq = 0;
  double oldest_inflight_age_s = 0;
  uint64_t records_lost = 0;   // overwritten in the rings before the agents read them
  uint64_t records_torn = 0;   // never completed by writers that died
};

// A process's stream opened or closed, or its writer's state changed (the event log's
// "process" lines).
struct ProcessChange {
  int64_t time_ns = 0;  // CLOCK_REALTIME, as the collector saw it
  v1::RankIdentity identity;
  std::string state;  // "connected", "disconnected", or the writer's: "running", "exited", "dead", ...
};

class LiveState {
 public:
  // A stream said hello (`key` names its process).
  void StreamOpened(const std::string& key, const v1::RankIdentity& identity);
  void StreamClosed(const std::string& key);
  // A stream refused as another job's (at most OnlineAnalyzer::kMaxRefusedStreams kept).
  void StreamRefused(const analyzer::RefusedStream& stream);
  // An accepted batch; `stored` of its events were new.
  void BatchAccepted(const std::string& key, const v1::StreamEventsRequest& batch, uint64_t stored);
  // The streams open now, by key (whom `collwatch top` asks for stacks).
  std::vector<std::string> ConnectedStreams();

  // A finding of the online analyzer, served with the state.
  void AddFinding(const v1::Finding& finding);
  // The finding added `index`-th, as it reads now (its stacks came in).
  void ReplaceFinding(size_t index, const v1::Finding& finding);
  // The online analyzer's view of what is in flight (replaces the previous one): names
  // the op, its expected time and its stall threshold for the dashboards.
  void SetInflight(std::vector<analyzer::InflightCollective> inflight);

  v1::ClusterState Snapshot(const std::string& job);
  LiveSummary Summary();

  // Keeps the process changes from now on, for TakeProcessChanges (off: none are kept).
  void KeepProcessChanges() { keep_changes_ = true; }
  // The changes since the last call, oldest first; past kMaxKeptChanges they are dropped
  // and counted in `dropped`.
  std::vector<ProcessChange> TakeProcessChanges(uint64_t* dropped);
  static constexpr size_t kMaxKeptChanges = 1 << 16;

 private:
  struct Progress {
    analyzer::ProgressFrontier frontier;
    uint64_t last_activity_ns = 0;
    std::string process_key;
  };
  struct Comm {
    int32_t nranks = 0;
    uint64_t parent_id = 0;
    std::map<int32_t, Progress> ranks;
    std::map<uint64_t, uint64_t> first_enter_ns;  // seq -> collector time, not yet completed by all
                                                  // (at most kMaxTrackedInflight)
    uint64_t max_entered = 0;
    uint64_t rate_base_seq = 0;
    uint64_t rate_base_ns = 0;
    double rate = 0;
  };
  // A collective issued inside a group: it completes with the group's GroupEnd.
  struct GroupedCollective {
    uint64_t comm_id = 0;
    int32_t rank = 0;
    uint64_t seq = 0;
  };
  struct Process {
    v1::RankIdentity identity;
    v1::RankStatus status;
    v1::ProcessStacks stacks;  // the latest taken (request_id 0: none)
    analyzer::GroupedCollectives<GroupedCollective> open_groups;
  };
  static constexpr size_t kMaxTrackedInflight = 4096;
  // The grouped collectives of `process` that `group_end` (a GroupEnd event) completes.
  void CompleteGroup(Process& process, const v1::Event& group_end);
  // The job ranks each process holds, by process key, from the communicator ranks its
  // events named.
  std::map<std::string, std::vector<int32_t>> RanksByProcess() const;
  // stacks_ from every process's latest stacks.
  void MergeStacksLocked();
  void UpdateRates(uint64_t now_ns);
  void NoteChangeLocked(const Process& process, std::string state);
  uint64_t MinCompleted(const Comm& comm) const;
  bool AllExited(const Comm& comm) const;

  std::mutex mutex_;
  std::map<std::string, Process> processes_;
  std::map<uint64_t, Comm> comms_;
  std::vector<v1::Finding> findings_;
  std::map<uint64_t, analyzer::InflightCollective> inflight_;  // by comm id
  v1::FindingStacks stacks_;  // every process's latest stacks, merged (taken_ns 0: none)
  std::vector<v1::RefusedStream> refused_;  // oldest first
  std::atomic<bool> keep_changes_{false};
  std::vector<ProcessChange> changes_;
  uint64_t changes_dropped_ = 0;
};

}  // namespace collwatch

#endif  // COLLWATCH_COLLECTOR_LIVE_STATE_H_
