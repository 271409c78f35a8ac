// Ranks per process. Threading: see process_ranks.h.
#include "analyzer/process_ranks.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analyzer/finding.h"

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

std::optional<CommMembership> MembershipOf(const ring::Record& record) {
  if (record.comm_id == 0 || record.rank < 0 || record.nranks <= 0 || record.rank >= record.nranks ||
      record.nranks > kMaxRanks) {
    return std::nullopt;
  }
  return CommMembership{record.comm_id, record.nranks, record.rank};
}

uint64_t WorldCommId(const std::vector<CommMembership>& memberships) {
  const CommMembership* world = nullptr;
  for (const CommMembership& membership : memberships) {
    if (membership.comm_id == 0) continue;
    if (world == nullptr || membership.comm_size > world->comm_size ||
        (membership.comm_size == world->comm_size && membership.comm_id < world->comm_id)) {
      world = &membership;
    }
  }
  return world == nullptr ? 0 : world->comm_id;
}

std::vector<int32_t> JobRanksOf(int32_t identity_rank, const std::vector<CommMembership>& memberships,
                                uint64_t world_comm_id) {
  std::vector<int32_t> world_ranks;
  for (const CommMembership& membership : memberships) {
    if (world_comm_id != 0 && membership.comm_id == world_comm_id && membership.rank >= 0) {
      world_ranks.push_back(membership.rank);
    }
  }
  std::sort(world_ranks.begin(), world_ranks.end());
  world_ranks.erase(std::unique(world_ranks.begin(), world_ranks.end()), world_ranks.end());
  if (world_ranks.size() >= 2 || identity_rank < 0) return world_ranks;
  return {identity_rank};
}

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

int HeldRankCount(const std::vector<int32_t>& ranks) { return std::max<int>(1, static_cast<int>(ranks.size())); }

std::string ProcessRanksText(const std::vector<int32_t>& ranks) {
  if (ranks.empty()) return "rank unknown";
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", RankListText(ranks));
}

std::string ProcessLabel(const std::vector<int32_t>& ranks, std::string_view host, int32_t pid) {
  const std::string where = absl::StrCat(host.empty() ? std::string("unknown host") : std::string(host), ", pid ", pid);
  return absl::StrCat(ranks.empty() ? std::string("process") : ProcessRanksText(ranks), " (", where, ")");
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

std::string JobRanksNote(const JobModel& model, const Comm& comm, const std::vector<int32_t>& ranks) {
  const uint64_t world = WorldCommId(model);
  std::vector<int32_t> global;
  bool differs = false;
  std::set<ProcessId> shared;  // processes of several ranks, none of which we can pin down
  for (const int32_t rank : ranks) {
    if (rank < 0 || static_cast<size_t>(rank) >= comm.ranks.size()) continue;
    const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
    if (!entry.present) continue;
    const std::vector<int32_t> held = RanksIn(model, entry.process, world);
    if (held.empty()) return "";
    if (held.size() == 1 || comm.id == world) {
      const int32_t job_rank = held.size() == 1 ? held.front() : rank;
      differs = differs || job_rank != rank;
      global.push_back(job_rank);
    } else {
      shared.insert(entry.process);
    }
  }
  std::vector<std::string> parts;
  if (differs) parts.push_back(absl::StrCat("global ", global.size() == 1 ? "rank " : "ranks ", RankListText(global)));
  for (const ProcessId process : shared) {
    const ProcessInfo& info = model.process(process).info;
    parts.push_back(absl::StrCat("in the process of ", ProcessLabel(RanksIn(model, process, world), info.host, info.pid)));
  }
  return parts.empty() ? "" : absl::StrCat(" (", absl::StrJoin(parts, "; "), ")");
}

}  // namespace collwatch::analyzer
