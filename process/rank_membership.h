// Which of the job's ranks each process holds: the one rule that every display and count
// of ranks per process uses (status line, dashboard, reports, exports, dump, agent logs).
// A launcher that starts one process per rank sets RANK, which the ring header carries; a
// process driving several devices (ncclCommInitAll, ranks initialised in one group as
// nccl-tests -g or single-process multi-GPU JAX do) has no RANK and holds the ranks its
// records name in the job's world communicator. analyzer/process_ranks.h applies the rule
// to the analyzer's model. Threading: pure functions.
#ifndef COLLWATCH_PROCESS_RANK_MEMBERSHIP_H_
#define COLLWATCH_PROCESS_RANK_MEMBERSHIP_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ring/ring_format.h"

namespace collwatch {

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

// How many ranks a process counts for: its ranks, or one while they are not known (it
// holds at least one).
int HeldRankCount(const std::vector<int32_t>& ranks);

// "rank 3", "ranks 0-1", "rank unknown".
std::string ProcessRanksText(const std::vector<int32_t>& ranks);
// "ranks 0-1 (node0, pid 4242)"; "process (node0, pid 4242)" while its ranks are unknown.
std::string ProcessLabel(const std::vector<int32_t>& ranks, std::string_view host, int32_t pid);

// "0-3", "0,2,4", "0-4094/2" (every second rank), shortened past `max_parts` parts.
// Given the communicator size, a long list whose complement is short reads
// "all but 1-4093/4".
std::string RankListText(const std::vector<int32_t>& ranks, size_t max_parts = 8, int32_t nranks = 0);

// What a person types for ranks: "0-3,8", spaces allowed, each range at most 2^20 ranks.
// Ascending and once each; nullopt when it does not parse or names none.
std::optional<std::vector<int32_t>> ParseRankList(std::string_view text);

}  // namespace collwatch

#endif  // COLLWATCH_PROCESS_RANK_MEMBERSHIP_H_
