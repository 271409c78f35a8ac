// A process folded apart, listed for the order check (JobModel::ListOrder) on the worker that
// built it, while every call is there: the check (CommOrderTracker) then reads no call, and
// compares a pair of communicators as one array rather than a collective at a time.
#include <algorithm>
#include <utility>
#include <vector>

#include "analyzer/job_model.h"

namespace collwatch::analyzer {
namespace {

// A pair's entries grow by seq: a jump further than this past the collectives listed is
// damage, left to the check's reading one by one rather than an array of gigabytes.
constexpr uint64_t kMostSeqGap = 1024;

// `listed->pairs` from its collectives in call order, as CommOrderTracker::ObserveCollective
// reads them for a process it has seen nothing of: against each other communicator, its
// newest seq so far (none: 0), not compared within one group. `slot_of`: each communicator's
// place in `memberships` (SIZE_MAX: none). False where a communicator's seqs do not rise:
// an array by seq cannot say what reading them in call order does.
bool MakePairOrders(const std::vector<std::pair<CommIndex, int32_t>>& memberships, const std::vector<size_t>& slot_of,
                    ListedOrder* listed) {
  // Per membership: its first and last seq (its arrays are made at their size at once), and
  // its newest seq and group so far as the calls are read in order.
  struct Seen {
    uint64_t first_seq = 0, last_seq = 0;
    uint64_t latest_seq = 0, latest_group = 0;
  };
  const size_t count = memberships.size();
  std::vector<Seen> seen(count);
  for (const OrderedCollective& call : listed->collectives) {
    const size_t slot = slot_of[call.comm];
    if (slot == SIZE_MAX || call.seq <= seen[slot].last_seq) return false;
    if (seen[slot].first_seq == 0) seen[slot].first_seq = call.seq;
    seen[slot].last_seq = call.seq;
  }
  listed->pairs.clear();
  for (size_t comm = 0; comm < count; ++comm) {
    const uint64_t length = seen[comm].first_seq == 0 ? 0 : seen[comm].last_seq - seen[comm].first_seq + 1;
    if (length > listed->collectives.size() + kMostSeqGap) return false;
    for (size_t other = 0; other < count; ++other) {
      if (other == comm) continue;
      listed->pairs.push_back(PairOrder{memberships[comm].first, memberships[other].first, seen[comm].first_seq,
                                        std::vector<uint64_t>(length, PairOrder::kNotCompared)});
    }
  }
  for (const OrderedCollective& call : listed->collectives) {
    const size_t comm = slot_of[call.comm];
    for (size_t other = 0; other < count; ++other) {
      if (other == comm) continue;
      PairOrder& pair = listed->pairs[comm * (count - 1) + (other < comm ? other : other - 1)];
      const bool one_group = call.group_id != 0 && seen[other].latest_group == call.group_id;
      pair.other_seqs[call.seq - pair.first_seq] = one_group ? PairOrder::kNotCompared : seen[other].latest_seq;
    }
    seen[comm].latest_seq = call.seq;
    seen[comm].latest_group = call.group_id;
  }
  return true;
}

}  // namespace

void JobModel::ListOrder(Process& process) {
  ListedOrder& listed = process.listed_order.emplace();
  // By communicator: its place among the process's memberships and in `listed.latest`, and
  // the rank its last call named, looked up once (a process has a few).
  struct PerComm {
    size_t slot = SIZE_MAX;
    size_t latest = SIZE_MAX;
    int32_t rank = ring::kUnset;
    const CommRank* placed_on = nullptr;
  };
  std::vector<PerComm> per_comm(comms_.size());
  for (size_t slot = 0; slot < process.memberships.size(); ++slot) {
    per_comm[process.memberships[slot].first].slot = slot;
  }
  // On one communicator, or several ranks of one, nothing is compared: `latest` is all.
  const bool compared = process.memberships.size() > 1 && OneRankPerComm(process);
  if (compared) listed.collectives.reserve(process.calls.size());
  for (const Call& call : process.calls) {  // all of them: nothing was dropped yet
    if (call.comm >= comms_.size()) continue;
    PerComm& at = per_comm[call.comm];
    if (at.placed_on == nullptr || at.rank != call.rank) {
      at.rank = call.rank;
      at.placed_on = FindRank(comms_[call.comm], call.rank);
    }
    if (!CountsInOrder(call, at.placed_on, 0)) continue;
    const OrderedCollective listed_call{call.comm, call.seq, call.group_id};
    if (compared) listed.collectives.push_back(listed_call);
    if (at.latest == SIZE_MAX) {
      at.latest = listed.latest.size();
      listed.latest.push_back(listed_call);
    } else {
      OrderedCollective& latest = listed.latest[at.latest];
      latest.seq = std::max(latest.seq, call.seq);
      latest.group_id = call.group_id;
    }
  }
  listed.by_pairs = true;
  if (compared) {
    std::vector<size_t> slot_of(comms_.size());
    for (size_t comm = 0; comm < comms_.size(); ++comm) slot_of[comm] = per_comm[comm].slot;
    listed.by_pairs = MakePairOrders(process.memberships, slot_of, &listed);
    if (!listed.by_pairs) listed.pairs.clear();
  }
}

std::optional<ListedOrder> JobModel::TakeListedOrder(ProcessId process_id) {
  if (process_id >= processes_.size()) return std::nullopt;
  return std::exchange(ProcessAt(process_id).listed_order, std::nullopt);
}

}  // namespace collwatch::analyzer
