// Ranks per process. Threading: see process_ranks.h.
#include "analyzer/process_ranks.h"

#include <algorithm>
#include <set>
#include <utility>

namespace collwatch::analyzer {
namespace {

std::vector<CommMembership> MembershipsOf(const JobModel& model, ProcessId process) {
  std::vector<CommMembership> memberships;
  for (const auto& [comm_index, rank] : model.process(process).memberships) {
    const Comm& comm = model.comms()[comm_index];
    memberships.push_back(CommMembership{comm.id, comm.nranks, rank});
  }
  return memberships;
}

std::vector<int32_t> RanksIn(const JobModel& model, ProcessId process, uint64_t world_comm_id) {
  return JobRanksOf(model.process(process).info.global_rank, MembershipsOf(model, process), world_comm_id);
}

}  // namespace

uint64_t WorldCommId(const JobModel& model) {
  std::vector<CommMembership> comms;
  comms.reserve(model.comms().size());
  for (const Comm& comm : model.comms()) comms.push_back(CommMembership{comm.id, comm.nranks, 0});
  return WorldCommId(comms);
}

std::vector<int32_t> RanksOfProcess(const JobModel& model, ProcessId process) {
  if (process >= model.process_count()) return {};
  return RanksIn(model, process, WorldCommId(model));
}

std::vector<std::vector<int32_t>> RanksOfProcesses(const JobModel& model) {
  const uint64_t world = WorldCommId(model);
  std::vector<std::vector<int32_t>> ranks;
  ranks.reserve(model.process_count());
  for (ProcessId process = 0; process < model.process_count(); ++process) {
    ranks.push_back(RanksIn(model, process, world));
  }
  return ranks;
}

int32_t JobWorldSize(const JobModel& model) {
  const uint64_t world = WorldCommId(model);
  int32_t world_size = 0;
  for (const Comm& comm : model.comms()) {
    if (comm.id == world) world_size = comm.nranks;
  }
  for (ProcessId process = 0; process < model.process_count() && world_size <= 0; ++process) {
    world_size = std::max(world_size, model.process(process).info.world_size);
  }
  return std::max(world_size, 0);
}

std::vector<int32_t> MissingJobRanks(const JobModel& model) {
  const int32_t world_size = JobWorldSize(model);
  constexpr int32_t kMaxWorldSize = 1 << 24;  // as the collector accepts
  if (world_size <= 0 || world_size > kMaxWorldSize) return {};
  // Held by a process with records: one only seen in the process tree (run.json) left
  // no trace, whether it lost it or never called NCCL.
  std::vector<bool> held(static_cast<size_t>(world_size), false);
  const std::vector<std::vector<int32_t>> ranks_of = RanksOfProcesses(model);
  for (ProcessId process = 0; process < model.process_count(); ++process) {
    if (model.process(process).calls.empty()) continue;
    for (const int32_t rank : ranks_of[process]) {
      if (rank >= 0 && rank < world_size) held[static_cast<size_t>(rank)] = true;
    }
  }
  std::vector<int32_t> missing;
  for (int32_t rank = 0; rank < world_size; ++rank) {
    if (!held[static_cast<size_t>(rank)]) missing.push_back(rank);
  }
  return missing;
}

std::optional<int32_t> JobRankOfCommRank(const JobModel& model, const Comm& comm, int32_t rank) {
  if (rank < 0 || static_cast<size_t>(rank) >= comm.ranks.size()) return std::nullopt;
  const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
  if (!entry.present) return std::nullopt;
  const uint64_t world = WorldCommId(model);
  const std::vector<int32_t> held = RanksIn(model, entry.process, world);
  // A process of one rank: that rank, whatever the communicator (RANK wins over the order
  // of a same-sized split).
  if (held.size() == 1) return held.front();
  if (comm.id == world && !held.empty()) return rank;
  return std::nullopt;
}

JobPlace JobPlaceOf(const JobModel& model, const Comm& comm, const std::vector<int32_t>& ranks) {
  const uint64_t world = WorldCommId(model);
  std::vector<int32_t> global;
  bool differs = false;
  std::set<ProcessId> shared;  // processes of several ranks, none of which we can pin down
  for (const int32_t rank : ranks) {
    if (rank < 0 || static_cast<size_t>(rank) >= comm.ranks.size()) continue;
    const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
    if (!entry.present) continue;
    const std::vector<int32_t> held = RanksIn(model, entry.process, world);
    if (held.empty()) return {};
    if (held.size() == 1 || comm.id == world) {
      const int32_t job_rank = held.size() == 1 ? held.front() : rank;
      differs = differs || job_rank != rank;
      global.push_back(job_rank);
    } else {
      shared.insert(entry.process);
    }
  }
  JobPlace place;
  if (differs) place.global = std::move(global);
  for (const ProcessId process : shared) {
    const ProcessInfo& info = model.process(process).info;
    place.shared.push_back(JobPlace::SharedProcess{RanksIn(model, process, world), info.host, info.pid});
  }
  return place;
}

}  // namespace collwatch::analyzer
