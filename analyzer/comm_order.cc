// Order inversions between communicators (comm_order.h).
#include "analyzer/comm_order.h"

#include <algorithm>
#include <span>

namespace collwatch::analyzer {
namespace {

// The key of the ordered pair (comm, other) in pair_index_ and ProcessOrder::pairs.
uint64_t PairKey(CommIndex comm, CommIndex other) { return (static_cast<uint64_t>(comm) << 32) | other; }

// The pair as reported_ holds it, either order: (lower, higher).
std::pair<CommIndex, CommIndex> EitherOrder(CommIndex a, CommIndex b) { return {std::min(a, b), std::max(a, b)}; }

}  // namespace

CommOrderTracker::PairReferences& CommOrderTracker::PairOf(ProcessOrder& order, CommIndex comm, CommIndex other) {
  const uint64_t key = PairKey(comm, other);
  for (const auto& [cached, index] : order.pairs) {
    if (cached == key) return pairs_[index];
  }
  const auto [it, inserted] = pair_index_.try_emplace(key, pairs_.size());
  if (inserted) {
    pairs_.emplace_back();
    if (pairs_of_comm_.size() <= comm) pairs_of_comm_.resize(comm + 1);
    pairs_of_comm_[comm].push_back(it->second);
  }
  order.pairs.emplace_back(key, it->second);
  return pairs_[it->second];
}

void CommOrderTracker::Forget(CommIndex comm) {
  if (newest_seq_[comm] <= kReferenceWindow) return;
  const uint64_t below = newest_seq_[comm] - kReferenceWindow;
  if (comm >= pairs_of_comm_.size()) return;
  for (const size_t pair : pairs_of_comm_[comm]) pairs_[pair].DropBefore(below);
}

void CommOrderTracker::ObserveCollective(ProcessId p, const Process& process, bool comparable,
                                         const OrderedCollective& call, ProcessOrder& order,
                                         std::vector<OrderInversion>* found, std::vector<CommIndex>* advanced) {
  // A process on one communicator has no other order to compare (most of a large job's).
  if (comparable && process.memberships.size() > 1) {
    // Every communicator of the process counts, one it issued nothing on yet as 0.
    for (const auto& membership : process.memberships) {
      const CommIndex member_of = membership.first;
      if (member_of == call.comm || member_of >= newest_seq_.size()) continue;
      Latest other{member_of, 0, 0};
      for (const Latest& latest : order.latest) {
        if (latest.comm == member_of) other = latest;
      }
      // Calls of one group are launched together: no order between them.
      if (call.group_id != 0 && other.group_id == call.group_id) continue;
      PairReferences& references = PairOf(order, call.comm, other.comm);
      references.StartAt(call.seq > kLateStartMargin ? call.seq - kLateStartMargin : 0);
      if (call.seq < references.first()) continue;  // forgotten: too far behind to compare
      references.resize(call.seq + 1, Reference{});
      Reference& reference = references[call.seq];
      if (reference.process == kNoProcess) {
        reference = Reference{p, other.seq};
        continue;
      }
      if (reference.other_seq == other.seq || reference.process == p) continue;
      if (!reported_.insert(EitherOrder(call.comm, other.comm)).second) continue;
      // The process that had issued more of X's collectives issued the next one before
      // this C collective; the other issued this one first.
      const bool reference_first = reference.other_seq > other.seq;
      OrderInversion inversion;
      inversion.first = reference_first ? reference.process : p;
      inversion.second = reference_first ? p : reference.process;
      inversion.comm_x = other.comm;
      inversion.seq_x = std::min(reference.other_seq, other.seq) + 1;
      inversion.comm_c = call.comm;
      inversion.seq_c = call.seq;
      found->push_back(inversion);
    }
  }
  NoteLatest(call, order, advanced);
}

void CommOrderTracker::NoteLatest(const OrderedCollective& call, ProcessOrder& order,
                                  std::vector<CommIndex>* advanced) {
  if (call.seq > newest_seq_[call.comm]) {
    newest_seq_[call.comm] = call.seq;
    advanced->push_back(call.comm);
  }
  auto own = std::find_if(order.latest.begin(), order.latest.end(),
                          [&](const Latest& latest) { return latest.comm == call.comm; });
  if (own == order.latest.end()) {
    order.latest.push_back(Latest{call.comm, call.seq, call.group_id});
  } else {
    own->seq = std::max(own->seq, call.seq);
    own->group_id = call.group_id;
  }
}

bool CommOrderTracker::ObservePairs(ProcessId p, const ListedOrder& listed, ProcessOrder& order,
                                    std::vector<CommIndex>* advanced) {
  // The pairs say what reading one by one says of a process seen for the first time.
  if (!listed.by_pairs || (!listed.pairs.empty() && !order.latest.empty())) return false;
  // First only read: a pair that disagrees with a reference reports an inversion, which must
  // name the first disagreeing collective in call order (read one by one).
  for (const PairOrder& pair : listed.pairs) {
    const auto known = pair_index_.find(PairKey(pair.comm, pair.other));
    if (known == pair_index_.end() || reported_.count(EitherOrder(pair.comm, pair.other)) != 0) continue;
    const PairReferences& references = pairs_[known->second];
    const uint64_t end = std::min<uint64_t>(pair.first_seq + pair.other_seqs.size(), references.size());
    for (uint64_t seq = std::max<uint64_t>(pair.first_seq, references.first()); seq < end;) {
      const std::span<const Reference> run = references.RunFrom(seq);
      const size_t n = static_cast<size_t>(std::min<uint64_t>(run.size(), end - seq));
      const uint64_t* other_seqs = &pair.other_seqs[seq - pair.first_seq];
      for (size_t i = 0; i < n; ++i) {
        if (other_seqs[i] != PairOrder::kNotCompared && run[i].process != kNoProcess && run[i].process != p &&
            run[i].other_seq != other_seqs[i]) {
          return false;
        }
      }
      seq += n;
    }
  }
  // Then the references this process is the first to give, as ObserveCollective gives them:
  // its first compared collective starts the pair's window, and every one past it is held.
  for (const PairOrder& pair : listed.pairs) {
    const std::vector<uint64_t>& other_seqs = pair.other_seqs;
    const auto compared = [](uint64_t other_seq) { return other_seq != PairOrder::kNotCompared; };
    const auto first = std::find_if(other_seqs.begin(), other_seqs.end(), compared);
    if (first == other_seqs.end()) continue;
    const auto last = std::find_if(other_seqs.rbegin(), other_seqs.rend(), compared);
    const uint64_t first_seq = pair.first_seq + static_cast<uint64_t>(first - other_seqs.begin());
    const uint64_t last_seq = pair.first_seq + static_cast<uint64_t>(other_seqs.rend() - last) - 1;
    PairReferences& references = PairOf(order, pair.comm, pair.other);
    references.StartAt(first_seq > kLateStartMargin ? first_seq - kLateStartMargin : 0);
    if (last_seq < references.first()) continue;
    references.resize(last_seq + 1, Reference{});
    for (uint64_t seq = std::max<uint64_t>(first_seq, references.first()); seq <= last_seq;) {
      const std::span<Reference> run = references.RunFrom(seq);
      const size_t n = static_cast<size_t>(std::min<uint64_t>(run.size(), last_seq + 1 - seq));
      const uint64_t* mine = &other_seqs[seq - pair.first_seq];
      for (size_t i = 0; i < n; ++i) {
        if (compared(mine[i]) && run[i].process == kNoProcess) run[i] = Reference{p, mine[i]};
      }
      seq += n;
    }
  }
  for (const OrderedCollective& latest : listed.latest) {
    if (latest.comm < newest_seq_.size()) NoteLatest(latest, order, advanced);
  }
  return true;
}

std::vector<OrderInversion> CommOrderTracker::Observe(const JobModel& model, bool forget_behind,
                                                      std::optional<ProcessId> only, const ListedOrder* listed) {
  std::vector<OrderInversion> found;
  if (processes_.size() < model.process_count()) processes_.resize(model.process_count());
  if (newest_seq_.size() < model.comms().size()) newest_seq_.resize(model.comms().size(), 0);
  std::vector<CommIndex> advanced;
  const ProcessId first = only.value_or(0);
  const auto end_process = static_cast<ProcessId>(only ? std::min<size_t>(*only + 1, model.process_count())
                                                        : model.process_count());
  for (ProcessId p = first; p < end_process; ++p) {
    const Process& process = model.process(p);
    ProcessOrder& order = processes_[p];
    const size_t end = process.calls.size();
    if (order.next_call >= end) continue;
    const bool comparable = OneRankPerComm(process);
    if (only && listed != nullptr) {
      // Listed while every call was still there (JobModel::ListOrder), by the same rules.
      if (!ObservePairs(p, *listed, order, &advanced)) {
        for (const OrderedCollective& call : listed->collectives) {
          if (call.comm < newest_seq_.size()) ObserveCollective(p, process, comparable, call, order, &found, &advanced);
        }
      }
      order.next_call = end;
      continue;
    }
    for (size_t i = std::max(order.next_call, process.calls.first()); i < end; ++i) {
      const Call& call = process.calls[i];
      // A call placed in no communicator (a damaged rank or size: kNoComm) counts in no order;
      // CountsInOrder is checked without reading the rank's slots.
      if (call.comm >= newest_seq_.size()) continue;
      const Comm& comm = model.comms()[call.comm];
      const bool in_comm = call.rank >= 0 && static_cast<size_t>(call.rank) < comm.ranks.size();
      if (!CountsInOrder(call, in_comm ? &comm.ranks[static_cast<size_t>(call.rank)] : nullptr, p)) continue;
      ObserveCollective(p, process, comparable, OrderedCollective{call.comm, call.seq, call.group_id}, order, &found,
                        &advanced);
    }
    order.next_call = end;
  }
  std::sort(advanced.begin(), advanced.end());
  advanced.erase(std::unique(advanced.begin(), advanced.end()), advanced.end());
  if (forget_behind) {
    for (CommIndex comm : advanced) Forget(comm);
  }
  return found;
}

}  // namespace collwatch::analyzer
