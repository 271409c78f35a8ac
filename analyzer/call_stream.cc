// One process's calls handed out as they settle (see call_stream.h).
#include "analyzer/call_stream.h"

#include <algorithm>
#include <set>
#include <vector>

namespace collwatch::analyzer {
namespace {

// Sequence numbers (and send/receive positions) kept below each communicator rank's newest:
// a record of another lane may still place a call there (lanes are shipped apart).
constexpr uint64_t kLateMargin = 1024;
// Calls held back at most: those in flight, and those behind them on their communicator.
constexpr size_t kMaxWaiting = 1 << 16;

}  // namespace

bool CallFinished(const Call& call) {
  return ring::IsCollective(call.fn) || ring::IsP2p(call.fn) ? call.completed() : call.returned();
}

CallStream::CallStream(const ProcessInfo& info) { model_.AddProcess(info); }

CallStream::Placed CallStream::PlacedNow(uint32_t index, const Call& call) const {
  // A creation learns its communicator at its return where its enter did not know it.
  const Placed not_yet = call.returned() ? Placed::kNo : Placed::kUnknown;
  const Comm* comm = model_.CommOf(call);
  if (comm == nullptr || call.rank < 0 || static_cast<size_t>(call.rank) >= comm->ranks.size()) return not_yet;
  const CommRank& rank = comm->ranks[static_cast<size_t>(call.rank)];
  if (!rank.present) return not_yet;
  if (ring::IsCollective(call.fn)) {
    const bool listed = call.seq > 0 && rank.collectives.Holds(call.seq - 1) && rank.collectives[call.seq - 1] == index;
    return listed ? Placed::kYes : Placed::kNo;
  }
  if (ring::IsP2p(call.fn)) {
    return std::binary_search(rank.p2p.begin(), rank.p2p.end(), index) ? Placed::kYes : Placed::kNo;
  }
  return rank.init_call == index ? Placed::kYes : not_yet;
}

void CallStream::HandOutSettled(bool all, const Each& each) {
  const auto& calls = process().calls;
  for (; next_ < calls.size(); ++next_) {
    const Placed placed = PlacedNow(next_, calls[next_]);
    if (placed != Placed::kNo) waiting_.emplace(next_, placed);
  }
  // In call order per communicator: a reader lays each communicator's calls on tracks as
  // they come, and the tracks are those of the whole process only if they come in order.
  std::set<CommIndex> held_back;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    const Call& call = calls[it->first];
    if (it->second == Placed::kUnknown) {
      if (!all && !call.returned()) {
        ++it;
        continue;
      }
      it->second = PlacedNow(it->first, call);
      if (it->second != Placed::kYes) {
        it = waiting_.erase(it);
        continue;
      }
    }
    // Past the cap (completions lost with their records), the oldest goes out as it is:
    // drawn as never finished, as it would be if its completion never came.
    const bool forced = waiting_.size() > kMaxWaiting && it == waiting_.begin();
    if (!all && !forced && (!CallFinished(call) || held_back.count(call.comm) != 0)) {
      held_back.insert(call.comm);
      ++it;
      continue;
    }
    each(model_, it->first, call);
    it = waiting_.erase(it);
  }
}

void CallStream::Forget() {
  for (const auto& [comm, rank_number] : process().memberships) {
    const CommRank& rank = model_.comms()[comm].ranks[static_cast<size_t>(rank_number)];
    if (rank.collectives.size() > kLateMargin) {
      model_.ForgetCollectivesBefore(comm, rank_number, rank.collectives.size() - kLateMargin + 1);
    }
    if (rank.p2p.size() > kLateMargin) model_.ForgetP2pBefore(comm, rank_number, rank.p2p.size() - kLateMargin);
  }
  std::vector<size_t> keep;
  keep.reserve(waiting_.size());
  for (const auto& [index, placed] : waiting_) keep.push_back(index);
  model_.ForgetCallsBefore(0, static_cast<uint32_t>(process().calls.size()), keep);
}

void CallStream::Add(const ProcessUpdate& piece, const Each& each) {
  model_.Apply(0, piece);
  HandOutSettled(/*all=*/false, each);
  Forget();
}

void CallStream::Finish(const Each& each) { HandOutSettled(/*all=*/true, each); }

}  // namespace collwatch::analyzer
