// Watch deltas. Threading: see watch_delta.h.
#include "collector/watch_delta.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "google/protobuf/util/message_differencer.h"

namespace collwatch {
namespace {

using google::protobuf::util::MessageDifferencer;

// The communicator's own fields, without its rank entries.
v1::CommState CommScalars(const v1::CommState& comm) {
  v1::CommState scalars = comm;
  scalars.clear_ranks();
  return scalars;
}

// Merges `changed` rank entries into `comm`, keeping them ordered by rank.
void MergeRanks(const v1::CommState& changed, v1::CommState* comm) {
  std::map<int32_t, v1::RankProgress> ranks;
  for (const v1::RankProgress& rank : comm->ranks()) ranks[rank.rank()] = rank;
  for (const v1::RankProgress& rank : changed.ranks()) ranks[rank.rank()] = rank;
  *comm = CommScalars(changed);
  for (auto& [number, rank] : ranks) *comm->add_ranks() = std::move(rank);
}

}  // namespace

v1::WatchResponse MakeWatchDelta(const v1::ClusterState& previous, const v1::ClusterState& current) {
  v1::WatchResponse response;
  response.set_full(false);
  v1::ClusterState& delta = *response.mutable_state();
  if (current.job() != previous.job()) delta.set_job(current.job());

  // New processes first (identity and status, in `ranks` and the first entries of
  // `rank_status`), then the changed ones (status only: an identity never changes).
  std::map<std::string, int> previous_process;
  for (int i = 0; i < previous.rank_status_size(); ++i) previous_process[previous.rank_status(i).process()] = i;
  std::vector<int> changed_processes;
  for (int i = 0; i < current.rank_status_size() && i < current.ranks_size(); ++i) {
    auto found = previous_process.find(current.rank_status(i).process());
    if (found == previous_process.end() || found->second >= previous.ranks_size()) {
      *delta.add_ranks() = current.ranks(i);
      *delta.add_rank_status() = current.rank_status(i);
    } else if (!MessageDifferencer::Equals(previous.rank_status(found->second), current.rank_status(i))) {
      changed_processes.push_back(i);
    }
  }
  for (int i : changed_processes) *delta.add_rank_status() = current.rank_status(i);

  std::map<uint64_t, const v1::CommState*> previous_comm;
  for (const v1::CommState& comm : previous.comms()) previous_comm[comm.comm_id()] = &comm;
  for (const v1::CommState& comm : current.comms()) {
    auto found = previous_comm.find(comm.comm_id());
    if (found == previous_comm.end()) {
      *delta.add_comms() = comm;
      continue;
    }
    std::map<int32_t, const v1::RankProgress*> before;
    for (const v1::RankProgress& rank : found->second->ranks()) before[rank.rank()] = &rank;
    v1::CommState changed = CommScalars(comm);
    for (const v1::RankProgress& rank : comm.ranks()) {
      auto old = before.find(rank.rank());
      if (old == before.end() || !MessageDifferencer::Equals(*old->second, rank)) *changed.add_ranks() = rank;
    }
    if (changed.ranks_size() > 0 || !MessageDifferencer::Equals(CommScalars(*found->second), CommScalars(comm))) {
      *delta.add_comms() = std::move(changed);
    }
  }

  // Findings are appended, and change only when their stacks come in: from the first
  // that is new or changed on.
  int from = 0;
  while (from < previous.findings_size() && from < current.findings_size() &&
         MessageDifferencer::Equals(previous.findings(from), current.findings(from))) {
    ++from;
  }
  response.set_findings_from(static_cast<uint32_t>(from));
  for (int i = from; i < current.findings_size(); ++i) *delta.add_findings() = current.findings(i);
  if (!MessageDifferencer::Equals(previous.stacks(), current.stacks())) *delta.mutable_stacks() = current.stacks();
  // The refused streams only grow: all of them when one was added.
  if (current.refused_streams_size() != previous.refused_streams_size()) {
    *delta.mutable_refused_streams() = current.refused_streams();
  }
  return response;
}

void ApplyWatchResponse(const v1::WatchResponse& response, v1::ClusterState* state) {
  const v1::ClusterState& update = response.state();
  if (response.full()) {
    *state = update;
    return;
  }
  if (!update.job().empty()) state->set_job(update.job());

  // Processes by key and communicators by id, in the collector's order.
  if (update.rank_status_size() > 0) {
    std::map<std::string, std::pair<v1::RankIdentity, v1::RankStatus>> processes;
    for (int i = 0; i < state->rank_status_size() && i < state->ranks_size(); ++i) {
      processes[state->rank_status(i).process()] = {state->ranks(i), state->rank_status(i)};
    }
    for (int i = 0; i < update.rank_status_size(); ++i) {
      auto& process = processes[update.rank_status(i).process()];
      if (i < update.ranks_size()) process.first = update.ranks(i);  // a new process
      process.second = update.rank_status(i);
    }
    state->clear_ranks();
    state->clear_rank_status();
    for (auto& [key, process] : processes) {
      *state->add_ranks() = std::move(process.first);
      *state->add_rank_status() = std::move(process.second);
    }
  }
  if (update.comms_size() > 0) {
    std::map<uint64_t, v1::CommState> comms;
    for (v1::CommState& comm : *state->mutable_comms()) comms[comm.comm_id()] = std::move(comm);
    for (const v1::CommState& comm : update.comms()) {
      auto found = comms.find(comm.comm_id());
      if (found == comms.end()) {
        comms[comm.comm_id()] = comm;
      } else {
        MergeRanks(comm, &found->second);
      }
    }
    state->clear_comms();
    for (auto& [id, comm] : comms) *state->add_comms() = std::move(comm);
  }
  if (update.findings_size() > 0) {
    const int from = std::min(static_cast<int>(response.findings_from()), state->findings_size());
    state->mutable_findings()->DeleteSubrange(from, state->findings_size() - from);
    for (const v1::Finding& finding : update.findings()) *state->add_findings() = finding;
  }
  if (update.has_stacks()) *state->mutable_stacks() = update.stacks();
  if (update.refused_streams_size() > 0) *state->mutable_refused_streams() = update.refused_streams();
}

}  // namespace collwatch
