// Which of the job's ranks each process holds: the one rule that every display and count
// of ranks per process uses (status line, dashboard, reports, exports, dump, agent logs).
// A launcher that starts one process per rank sets RANK, which the ring header carries; a
// process driving several devices (ncclCommInitAll, ranks initialised in one group as
// nccl-tests -g or single-process multi-GPU JAX do) has no RANK and holds the ranks its
// records name in the job's world communicator. Threading: pure functions.
#ifndef COLLWATCH_ANALYZER_PROCESS_RANKS_H_
#define COLLWATCH_ANALYZER_PROCESS_RANKS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/job_model.h"
#include "interposer/ring_format.h"

namespace collwatch::analyzer {

// One communicator rank a process holds, as its records name it.
struct CommMembership {
  uint64_t comm_id = 0;
  int32_t comm_size = 0;
  int32_t rank = ring::kUnset;
  bool operator==(const CommMembership&) const = default;
};

// The membership a ring record names: a communicator id and 0 <= rank < size <= kMaxRanks
// (nullopt for records of no communicator, or damaged ones).
std::optional<CommMembership> MembershipOf(const ring::Record& record);

// The job's world communicator among `memberships` (of any processes, repeats allowed):
// the largest, as no communicator has more ranks than the job; the lowest id among
// equals, so that every consumer picks the same one. 0: no communicator seen yet.
uint64_t WorldCommId(const std::vector<CommMembership>& memberships);

// The job ranks a process holds, ascending. `identity_rank` is RANK from its ring header
// (ring::kUnset: not set). Several ranks in the world communicator win over RANK (a
// launcher's RANK then numbers processes, not ranks); else RANK when set; else its one
// world rank. Empty: not known yet (no RANK, no record on the world communicator).
std::vector<int32_t> JobRanksOf(int32_t identity_rank, const std::vector<CommMembership>& memberships,
                                uint64_t world_comm_id);

// The same rule over a JobModel.
uint64_t WorldCommId(const JobModel& model);
std::vector<int32_t> RanksOfProcess(const JobModel& model, ProcessId process);
// Every process's ranks, by ProcessId (one pass: for loops over all processes).
std::vector<std::vector<int32_t>> RanksOfProcesses(const JobModel& model);

// How many ranks a process counts for: its ranks, or one while they are not known (it
// holds at least one).
int HeldRankCount(const std::vector<int32_t>& ranks);

// "rank 3", "ranks 0-1", "rank unknown".
std::string ProcessRanksText(const std::vector<int32_t>& ranks);
// "ranks 0-1 (node0, pid 4242)"; "process (node0, pid 4242)" while its ranks are unknown.
std::string ProcessLabel(const std::vector<int32_t>& ranks, std::string_view host, int32_t pid);

// The job rank behind `rank` of `comm`: itself on the world communicator, else the one
// rank its process holds. nullopt when that process holds several (records do not say
// which device a rank of a smaller communicator drives) or none is known.
std::optional<int32_t> JobRankOfCommRank(const JobModel& model, const Comm& comm, int32_t rank);

// What a finding appends to communicator ranks so that people find them in the job:
// " (global ranks 4,6)" where those differ from the communicator's ranks; for ranks of a
// process holding several, " (in the process of ranks 0-1, node0 pid 4242)". Empty when
// the communicator's ranks are the job's, or when some rank's process is not known.
std::string JobRanksNote(const JobModel& model, const Comm& comm, const std::vector<int32_t>& ranks);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_PROCESS_RANKS_H_
