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
// newest seq so far (none: 0), not compared within one group. False where a communicator's
// seqs do not rise: an array by seq cannot say what reading them in call order does.
bool MakePairOrders(const std::vector<std::pair<CommIndex, int32_t>>& memberships, ListedOrder* listed) {
  const size_t count = memberships.size();
  std::vector<uint64_t> latest_seq(count, 0), latest_group(count, 0);
  listed->pairs.clear();
  for (size_t comm = 0; comm < count; ++comm) {
    for (size_t other = 0; other < count; ++other) {
      if (other != comm) listed->pairs.push_back(PairOrder{memberships[comm].first, memberships[other].first});
    }
  }
  const uint64_t most_seq_gap = listed->collectives.size() + kMostSeqGap;
  for (const OrderedCollective& call : listed->collectives) {
    const auto own = std::find_if(memberships.begin(), memberships.end(),
                                  [&](const auto& membership) { return membership.first == call.comm; });
    if (own == memberships.end()) return false;
    const auto comm = static_cast<size_t>(own - memberships.begin());
    if (call.seq <= latest_seq[comm]) return false;
    for (size_t other = 0; other < count; ++other) {
      if (other == comm) continue;
      PairOrder& pair = listed->pairs[comm * (count - 1) + (other < comm ? other : other - 1)];
      if (pair.other_seqs.empty()) {
        pair.first_seq = call.seq;
        pair.other_seqs.reserve(listed->collectives.size());
      }
      if (call.seq - pair.first_seq != pair.other_seqs.size()) {  // a gap: none issued there
        if (call.seq - pair.first_seq > pair.other_seqs.size() + most_seq_gap) return false;
        pair.other_seqs.resize(call.seq - pair.first_seq, PairOrder::kNotCompared);
      }
      const bool one_group = call.group_id != 0 && latest_group[other] == call.group_id;
      pair.other_seqs.push_back(one_group ? PairOrder::kNotCompared : latest_seq[other]);
    }
    latest_seq[comm] = call.seq;
    latest_group[comm] = call.group_id;
  }
  return true;
}

}  // namespace

void JobModel::ListOrder(Process& process) {
  ListedOrder& listed = process.listed_order.emplace();
  // By communicator, the rank its last call named, looked up once (a process has a few).
  struct Placed {
    int32_t rank = ring::kUnset;
    const CommRank* on = nullptr;
  };
  std::vector<Placed> placed(comms_.size());
  listed.collectives.reserve(process.calls.size());
  for (const Call& call : process.calls) {  // all of them: nothing was dropped yet
    if (call.comm >= comms_.size()) continue;
    Placed& at = placed[call.comm];
    if (at.on == nullptr || at.rank != call.rank) at = Placed{call.rank, FindRank(comms_[call.comm], call.rank)};
    if (!CountsInOrder(call, at.on, 0)) continue;
    listed.collectives.push_back(OrderedCollective{call.comm, call.seq, call.group_id});
  }
  for (const OrderedCollective& call : listed.collectives) {
    auto own = std::find_if(listed.latest.begin(), listed.latest.end(),
                            [&](const OrderedCollective& latest) { return latest.comm == call.comm; });
    if (own == listed.latest.end()) {
      listed.latest.push_back(call);
    } else {
      own->seq = std::max(own->seq, call.seq);
      own->group_id = call.group_id;
    }
  }
  // On one communicator, or several ranks of one, nothing is compared: `latest` is all.
  const bool compared = process.memberships.size() > 1 && OneRankPerComm(process);
  listed.by_pairs = !compared || MakePairOrders(process.memberships, &listed);
  if (!listed.by_pairs) listed.pairs.clear();
  if (!compared) listed.collectives = {};
}

std::optional<ListedOrder> JobModel::TakeListedOrder(ProcessId process_id) {
  if (process_id >= processes_.size()) return std::nullopt;
  return std::exchange(ProcessAt(process_id).listed_order, std::nullopt);
}

}  // namespace collwatch::analyzer
