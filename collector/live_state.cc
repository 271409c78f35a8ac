// Live cluster state. Threading: see live_state.h.
#include "collector/live_state.h"

#include <time.h>

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

#include "analyzer/process_ranks.h"
#include "analyzer/stack_classes.h"
#include "collector/finding_codec.h"
#include "collector/online_analyzer.h"
#include "ring/clocks.h"
#include "ring/ring_format.h"
#include "store/event_codec.h"

namespace collwatch {
namespace {

bool IsCollectiveEvent(const v1::Event& event) {
  return ring::IsCollective(static_cast<ring::ApiFn>(event.fn())) && event.comm_id() != 0 && event.seq() > 0;
}

// The event says its call's work is done (or that nothing will ever say so).
bool Completes(const v1::Event& event) {
  if (event.kind() == v1::EVENT_KIND_COMPLETE) return true;
  return event.kind() == v1::EVENT_KIND_RETURN &&
         (event.flags() & (ring::kFlagCompletesAtReturn | ring::kFlagNoCompletion)) != 0;
}

// "exited" for WRITER_STATUS_EXITED: the proto's own names, as the event log writes them.
std::string WriterStatusName(v1::WriterStatus status) {
  std::string name = absl::AsciiStrToLower(v1::WriterStatus_Name(status));
  return absl::StartsWith(name, "writer_status_") ? name.substr(14) : name;
}

}  // namespace

void LiveState::StreamOpened(const std::string& key, const v1::RankIdentity& identity) {
  std::lock_guard<std::mutex> lock(mutex_);
  Process& process = processes_[key];
  process.identity = identity;
  process.status.set_process(key);
  process.status.set_connected(true);
  process.status.set_last_activity_ns(RealtimeNs());
  NoteChangeLocked(process, "connected");
}

void LiveState::StreamClosed(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = processes_.find(key);
  if (found == processes_.end()) return;
  found->second.status.set_connected(false);
  NoteChangeLocked(found->second, "disconnected");
}

void LiveState::NoteChangeLocked(const Process& process, std::string state) {
  if (!keep_changes_) return;
  if (changes_.size() >= kMaxKeptChanges) {
    ++changes_dropped_;
    return;
  }
  changes_.push_back(ProcessChange{
      .time_ns = static_cast<int64_t>(RealtimeNs()), .identity = process.identity, .state = std::move(state)});
}

std::vector<ProcessChange> LiveState::TakeProcessChanges(uint64_t* dropped) {
  std::lock_guard<std::mutex> lock(mutex_);
  *dropped = changes_dropped_;
  changes_dropped_ = 0;
  return std::exchange(changes_, {});
}

void LiveState::StreamRefused(const analyzer::RefusedStream& stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const v1::RefusedStream& known : refused_) {
    if (known.host() == stream.host && known.pid() == stream.pid && known.job() == stream.job) return;
  }
  if (refused_.size() >= OnlineAnalyzer::kMaxRefusedStreams) return;
  RefusedStreamToProto(stream, &refused_.emplace_back());
}

void LiveState::BatchAccepted(const std::string& key, const v1::StreamEventsRequest& batch, uint64_t stored) {
  const uint64_t now = RealtimeNs();
  std::lock_guard<std::mutex> lock(mutex_);
  Process& process = processes_[key];
  v1::RankStatus& status = process.status;
  if (batch.writer_status() != v1::WRITER_STATUS_UNSPECIFIED && batch.writer_status() != status.writer_status()) {
    status.set_writer_status(batch.writer_status());
    NoteChangeLocked(process, WriterStatusName(batch.writer_status()));
  }
  status.set_events(status.events() + stored);
  status.set_lost(batch.lost());
  status.set_torn(batch.torn());
  status.set_last_activity_ns(now);
  if (batch.has_stacks() && batch.stacks().request_id() != process.stacks.request_id()) {
    process.stacks = batch.stacks();
    MergeStacksLocked();
  }
  for (const v1::Event& event : batch.events()) {
    if (!IsCollectiveEvent(event)) continue;
    Comm& comm = comms_[event.comm_id()];
    if (event.nranks() > 0) comm.nranks = event.nranks();
    Progress& progress = comm.ranks[event.rank()];
    progress.process_key = key;
    progress.last_activity_ns = now;
    if (event.kind() == v1::EVENT_KIND_ENTER && event.seq() > progress.frontier.entered()) {
      progress.frontier.Entered(event.seq());
      if (event.seq() > comm.max_entered) comm.max_entered = event.seq();
      // Only the oldest entry is ever shown; a communicator whose completions never come
      // (a rank that never reports) must not grow this without bound.
      if (comm.first_enter_ns.size() < kMaxTrackedInflight) comm.first_enter_ns.try_emplace(event.seq(), now);
      // Grouped (a process driving several ranks must group): done when its group is.
      if (event.group_id() != 0) {
        process.open_groups.Add(event.group_id(), event.stream(), {event.comm_id(), event.rank(), event.seq()});
      }
    }
    if (Completes(event)) progress.frontier.Completed(event.seq());
  }
  // After the enters: a completion (from the watcher thread's lane) may come first in the batch.
  for (const v1::Event& event : batch.events()) {
    if (static_cast<ring::ApiFn>(event.fn()) == ring::ApiFn::kGroupEnd && event.group_id() != 0 && Completes(event)) {
      CompleteGroup(process, event);
    }
  }
  // Forget the entry times of collectives every known rank completed.
  for (auto& [id, comm] : comms_) {
    const uint64_t done = MinCompleted(comm);
    comm.first_enter_ns.erase(comm.first_enter_ns.begin(), comm.first_enter_ns.upper_bound(done));
  }
}

void LiveState::CompleteGroup(Process& process, const v1::Event& group_end) {
  // A device completion covers the group's work on its stream; a return that completes
  // covers all of it.
  const uint64_t stream = group_end.stream();
  const bool one_stream = group_end.kind() == v1::EVENT_KIND_COMPLETE;
  process.open_groups.Complete(group_end.group_id(), one_stream ? &stream : nullptr,
                               [&](const GroupedCollective& member) {
                                 auto comm = comms_.find(member.comm_id);
                                 if (comm != comms_.end()) comm->second.ranks[member.rank].frontier.Completed(member.seq);
                               });
}

// Every rank of the communicator exited normally: nothing of it is in flight any more
// (ops whose completion was not recorded, e.g. in a group, would otherwise look stuck).
bool LiveState::AllExited(const Comm& comm) const {
  for (const auto& [rank, progress] : comm.ranks) {
    auto process = processes_.find(progress.process_key);
    if (process == processes_.end() || process->second.status.writer_status() != v1::WRITER_STATUS_EXITED) {
      return false;
    }
  }
  return !comm.ranks.empty();
}

uint64_t LiveState::MinCompleted(const Comm& comm) const {
  if (comm.ranks.empty()) return 0;
  // Ranks that never reported have completed nothing.
  if (comm.nranks > 0 && static_cast<int32_t>(comm.ranks.size()) < comm.nranks) return 0;
  uint64_t lowest = UINT64_MAX;
  for (const auto& [rank, progress] : comm.ranks) lowest = std::min(lowest, progress.frontier.completed());
  return lowest;
}

void LiveState::UpdateRates(uint64_t now_ns) {
  for (auto& [id, comm] : comms_) {
    if (comm.rate_base_ns == 0) {
      comm.rate_base_ns = now_ns;
      comm.rate_base_seq = comm.max_entered;
      continue;
    }
    const double elapsed = static_cast<double>(now_ns - comm.rate_base_ns) / 1e9;
    if (elapsed < 0.5) continue;
    comm.rate = static_cast<double>(comm.max_entered - comm.rate_base_seq) / elapsed;
    comm.rate_base_ns = now_ns;
    comm.rate_base_seq = comm.max_entered;
  }
}

std::vector<std::string> LiveState::ConnectedStreams() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> keys;
  for (const auto& [key, process] : processes_) {
    if (process.status.connected()) keys.push_back(key);
  }
  return keys;
}

void LiveState::MergeStacksLocked() {
  const std::map<std::string, std::vector<int32_t>> ranks = RanksByProcess();
  std::vector<analyzer::RankStacks> taken;
  int64_t latest = 0;
  for (const auto& [key, process] : processes_) {
    if (process.stacks.request_id() == 0) continue;
    latest = std::max(latest, process.stacks.taken_ns());
    taken.push_back({ranks.at(key), StacksFromWire(process.stacks)});
  }
  stacks_.Clear();
  FindingStacksToProto(analyzer::FindingStacks{latest, analyzer::MergeStacks(taken), true}, &stacks_);
}

std::map<std::string, std::vector<int32_t>> LiveState::RanksByProcess() const {
  std::map<std::string, std::vector<CommMembership>> memberships;
  std::vector<CommMembership> all;
  for (const auto& [id, comm] : comms_) {
    for (const auto& [rank, progress] : comm.ranks) {
      if (rank < 0) continue;
      const CommMembership membership{id, comm.nranks, rank};
      memberships[progress.process_key].push_back(membership);
      all.push_back(membership);
    }
  }
  const uint64_t world = WorldCommId(all);
  std::map<std::string, std::vector<int32_t>> ranks;
  for (const auto& [key, process] : processes_) {
    ranks[key] = JobRanksOf(process.identity.rank(), memberships[key], world);
  }
  return ranks;
}

LiveSummary LiveState::Summary() {
  const uint64_t now = RealtimeNs();
  std::lock_guard<std::mutex> lock(mutex_);
  UpdateRates(now);
  LiveSummary summary;
  const std::map<std::string, std::vector<int32_t>> ranks = RanksByProcess();
  for (const auto& [key, process] : processes_) {
    const int held = HeldRankCount(ranks.at(key));
    ++summary.processes_known;
    summary.ranks_known += held;
    if (process.status.connected()) summary.ranks_reporting += held;
    if (WireStatusLostWithoutExit(process.status.writer_status())) summary.ranks_lost += held;
    summary.events += process.status.events();
    summary.records_lost += process.status.lost();
    summary.records_torn += process.status.torn();
  }
  for (const auto& [id, comm] : comms_) {
    summary.collectives_per_second += comm.rate;
    if (comm.first_enter_ns.empty() || AllExited(comm)) continue;
    const auto& [seq, since] = *comm.first_enter_ns.begin();
    const double age = static_cast<double>(now - since) / 1e9;
    if (age > summary.oldest_inflight_age_s) {
      summary.oldest_inflight_age_s = age;
      summary.oldest_inflight_comm = id;
      summary.oldest_inflight_seq = seq;
    }
  }
  return summary;
}

void LiveState::AddFinding(const v1::Finding& finding) {
  std::lock_guard<std::mutex> lock(mutex_);
  findings_.push_back(finding);
}

void LiveState::ReplaceFinding(size_t index, const v1::Finding& finding) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (index < findings_.size()) findings_[index] = finding;
}

void LiveState::SetInflight(std::vector<analyzer::InflightCollective> inflight) {
  std::lock_guard<std::mutex> lock(mutex_);
  inflight_.clear();
  for (analyzer::InflightCollective& item : inflight) inflight_[item.comm_id] = std::move(item);
}

v1::ClusterState LiveState::Snapshot(const std::string& job) {
  const uint64_t now = RealtimeNs();
  std::lock_guard<std::mutex> lock(mutex_);
  UpdateRates(now);
  v1::ClusterState state;
  state.set_job(job);
  if (stacks_.taken_ns() != 0) *state.mutable_stacks() = stacks_;
  for (const v1::RefusedStream& stream : refused_) *state.add_refused_streams() = stream;
  const std::map<std::string, std::vector<int32_t>> ranks = RanksByProcess();
  for (const auto& [key, process] : processes_) {
    *state.add_ranks() = process.identity;
    v1::RankStatus* status = state.add_rank_status();
    *status = process.status;
    for (const int32_t rank : ranks.at(key)) status->add_ranks(rank);
  }
  for (const auto& [id, comm] : comms_) {
    v1::CommState* out = state.add_comms();
    out->set_comm_id(id);
    out->set_nranks(comm.nranks);
    out->set_parent_id(comm.parent_id);
    out->set_collectives_per_second(comm.rate);
    for (const auto& [rank, progress] : comm.ranks) {
      v1::RankProgress* item = out->add_ranks();
      item->set_rank(rank);
      item->set_entered_seq(progress.frontier.entered());
      item->set_completed_seq(progress.frontier.completed());
      item->set_last_activity_ns(progress.last_activity_ns);
      auto process = processes_.find(progress.process_key);
      if (process != processes_.end()) item->set_status(process->second.status.writer_status());
    }
    if (comm.first_enter_ns.empty() || AllExited(comm)) continue;
    // The analyzer's view when it has one (it knows the op and its expected time), else
    // the collector's own from arrival times.
    if (auto analyzed = inflight_.find(id); analyzed != inflight_.end()) {
      const analyzer::InflightCollective& item = analyzed->second;
      out->set_oldest_inflight_seq(item.seq);
      out->set_oldest_inflight_age_s(std::max(0.0, static_cast<double>(static_cast<int64_t>(now) - item.since_ns) / 1e9));
      out->set_oldest_inflight_op(item.description);
      out->set_oldest_inflight_expected_s(item.expected_s);
      out->set_stall_threshold_s(item.threshold_s);
      out->set_waiting_for_ranks(item.waiting_for_ranks);
    } else {
      const auto& [seq, since] = *comm.first_enter_ns.begin();
      out->set_oldest_inflight_seq(seq);
      out->set_oldest_inflight_age_s(static_cast<double>(now - since) / 1e9);
      bool waiting = comm.nranks > 0 && static_cast<int32_t>(comm.ranks.size()) < comm.nranks;
      for (const auto& [rank, progress] : comm.ranks) waiting = waiting || progress.frontier.entered() < seq;
      out->set_waiting_for_ranks(waiting);
    }
  }
  for (const v1::Finding& finding : findings_) *state.add_findings() = finding;
  return state;
}

}  // namespace collwatch
