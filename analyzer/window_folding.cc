// Post-mortem folding of agreeing windows (issue 39's classes first): a rank whose window of
// collectives equals, call for call, that of the first rank seen with the same chain there
// keeps only its times for it. Part of JobModel (job_model.h); single-threaded as the model.
#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

#include "analyzer/fold_references.h"
#include "analyzer/job_model.h"

namespace collwatch::analyzer {
namespace {

// Chains a window keeps a reference for: ranks past this many classes there keep their calls
// (a job whose every rank differs must not cost a search over every rank per rank).
constexpr size_t kMaxWindowClasses = 64;
// A fold drops a process's calls only where at most this share of them (one in four)
// would be kept one by one.
constexpr size_t kMostKeptShare = 4;

// How a call's communicator, region and call path read in the numbering of the model that
// holds the reference's call: as they are, in the same model.
struct SameNumbering {
  CommIndex Comm(const Call& call) const { return call.comm; }
  RegionId Region(const Call& call) const { return call.region; }
  CallPathId CallPath(const Call& call) const { return call.call_path; }
};

// Every field of a call but its rank, times and flags (its times kept with each folded call,
// its flags where they are not its reference's): what a folded call takes from its
// reference's. `a`'s numbered fields read as `numbering` says. A field added to Call must be
// compared here, or a folded call would be made again with the reference's value of it.
template <typename Numbering>
bool SameButRankTimesAndFlags(const Call& a, const Call& b, const Numbering& numbering) {
  return a.count == b.count && a.seq == b.seq && a.group_id == b.group_id && numbering.Comm(a) == b.comm &&
         numbering.Region(a) == b.region && numbering.CallPath(a) == b.call_path && a.root_or_peer == b.root_or_peer &&
         a.redop == b.redop && a.result == b.result && a.fn == b.fn && a.dtype == b.dtype &&
         a.call_path_inferred == b.call_path_inferred && a.region_unknown == b.region_unknown &&
         a.region_damaged == b.region_damaged;
}
static_assert(sizeof(Call) == 88, "a field added to Call must be compared in SameButRankTimesAndFlags");

// `mine` as an offset from `reference`: none for a time not known yet (0) or too far apart.
std::optional<int32_t> OffsetOf(int64_t mine, int64_t reference) {
  if (mine == 0 || reference == 0) return std::nullopt;
  const int64_t offset = mine - reference;
  if (offset < std::numeric_limits<int32_t>::min() || offset > std::numeric_limits<int32_t>::max()) return std::nullopt;
  return static_cast<int32_t>(offset);
}

// A call of a model built apart read in the numbering of the job's model (FoldApart): its
// region and call path through the worker's view, its communicator the class's.
struct JobNumbering {
  const FoldReferences::View& view;
  CommIndex comm;
  CommIndex Comm(const Call& /*call*/) const { return comm; }
  RegionId Region(const Call& call) const { return view.region_of[call.region]; }
  CallPathId CallPath(const Call& call) const { return view.call_path_of[call.call_path]; }
};

// Appends to `times` the offsets of each call of the window from `first_slot` from its
// reference's, and to `unlike_flags` those whose flags differ, if every call there equals its
// reference's but for rank, times and flags, with all three times known and near enough;
// false, and nothing appended, otherwise. `mine_at` and `theirs_at` give a slot's call
// (nullptr: none); `numbering` reads the numbered fields of `mine_at`'s calls.
template <typename MineAt, typename TheirsAt, typename Numbering>
bool FoldWindow(uint64_t first_slot, const MineAt& mine_at, const TheirsAt& theirs_at, const Numbering& numbering,
                std::vector<FoldedTimes>* times, std::vector<std::pair<uint64_t, uint8_t>>* unlike_flags) {
  const size_t before = times->size();
  const size_t unlike_before = unlike_flags->size();
  for (uint64_t slot = first_slot; slot < first_slot + kChainWindow; ++slot) {
    const Call* mine = mine_at(slot);
    const Call* theirs = theirs_at(slot);
    std::optional<int32_t> enter, returned, completed;
    if (mine != nullptr && theirs != nullptr) {
      enter = OffsetOf(mine->enter_ns, theirs->enter_ns);
      returned = OffsetOf(mine->return_ns, theirs->return_ns);
      completed = OffsetOf(mine->complete_ns, theirs->complete_ns);
    }
    if (!enter || !returned || !completed || !SameButRankTimesAndFlags(*mine, *theirs, numbering)) {
      times->resize(before);
      unlike_flags->resize(unlike_before);
      return false;
    }
    times->push_back(FoldedTimes{*enter, *returned, *completed});
    if (mine->flags != theirs->flags) unlike_flags->emplace_back(slot, mine->flags);
  }
  return true;
}

// The rank whose calls `entry`'s folded window `window` matched (its reference there).
int32_t FoldedReference(const CommRank& entry, uint64_t window) {
  return entry.folded_like[window - ChainWindowOf(entry.folded.first() + 1)];
}

// A folded call's own times: its reference's call's, offset by its own.
CallTimes FoldedCallTimes(const Call& like, const FoldedTimes& offsets) {
  return CallTimes{like.enter_ns + offsets.enter, like.return_ns + offsets.returned,
                   like.complete_ns + offsets.completed};
}

}  // namespace

size_t JobModel::FoldableWindows(Comm& comm, int32_t rank, std::vector<FoldedTimes>* times,
                                 std::vector<std::pair<uint64_t, uint8_t>>* unlike_flags, std::vector<int32_t>* like) {
  const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
  if (entry.collectives.first() % kChainWindow != 0) return 0;  // a history cut inside a window
  const auto& calls = ProcessAt(entry.process).calls;
  size_t foldable = 0;
  bool folding = true;
  // Past the first window that cannot fold, the rank still becomes the reference of each
  // window whose chain no rank had before: later ranks with that chain fold into it.
  for (uint64_t window = entry.collectives.first() / kChainWindow;
       (window + 1) * kChainWindow <= entry.collectives.size() && entry.chains.Holds(window); ++window) {
    const WindowChain& chain = entry.chains[window];
    // A window with a gap, a slot placed twice or a region not known stands for no class.
    if (!chain.usable()) break;
    std::vector<std::pair<uint64_t, int32_t>>& classes = comm.window_classes[window];
    auto seen =
        std::find_if(classes.begin(), classes.end(), [&](const auto& known) { return known.first == chain.chain; });
    if (seen == classes.end()) {
      if (classes.size() < kMaxWindowClasses) {
        classes.emplace_back(chain.chain, rank);
        if (fold_references_) {
          const auto comm_index = static_cast<CommIndex>(&comm - comms_.data());
          unpublished_classes_.push_back(NewClass{comm_index, window, rank, chain.chain});
        }
      }
      folding = false;
      continue;
    }
    if (!folding || seen->second == rank) {
      folding = false;
      continue;
    }
    const CommRank& reference = comm.ranks[static_cast<size_t>(seen->second)];
    const auto& reference_calls = ProcessAt(reference.process).calls;
    const uint64_t first_slot = window * kChainWindow;
    // Both ranks' call indexes for the window, read in place where each lies in one chunk.
    const uint32_t* mine_run = entry.collectives.Run(first_slot, kChainWindow);
    const uint32_t* theirs_run = reference.collectives.Run(first_slot, kChainWindow);
    auto mine_at = [&](uint64_t slot) -> const Call* {
      const uint32_t index = mine_run != nullptr ? mine_run[slot - first_slot] : entry.collectives[slot];
      return index == kNoCall ? nullptr : &calls[index];
    };
    auto theirs_at = [&](uint64_t slot) -> const Call* {
      const uint32_t index = theirs_run != nullptr                 ? theirs_run[slot - first_slot]
                             : reference.collectives.Holds(slot) ? reference.collectives[slot]
                                                                 : kNoCall;
      return index == kNoCall ? nullptr : &reference_calls[index];
    };
    folding = FoldWindow(first_slot, mine_at, theirs_at, SameNumbering{}, times, unlike_flags);
    if (!folding) continue;
    like->push_back(seen->second);
    ++foldable;
  }
  return foldable;
}

void JobModel::KeepFolded(CommRank& entry, size_t windows, const std::vector<FoldedTimes>& times,
                          const std::vector<std::pair<uint64_t, uint8_t>>& unlike_flags,
                          const std::vector<int32_t>& like) {
  const size_t first_slot = entry.collectives.first();
  entry.folded.StartAt(first_slot);
  entry.folded.Append(times);
  entry.folded_flags_unlike.insert(unlike_flags.begin(), unlike_flags.end());
  entry.folded_like.insert(entry.folded_like.end(), like.begin(), like.end());
  entry.collectives.DropBefore(first_slot + windows * kChainWindow);
}

void JobModel::ForgetFoldedCalls(ProcessId process_id) {
  const Process& process = ProcessAt(process_id);
  std::vector<size_t> keep;
  if (const uint32_t last = LastTellingCall(process); last != kNoCall) keep.push_back(last);
  // Not where many calls between the dropped ones are still listed (a rank folded on one
  // communicator but the reference of its class on another): a call kept by itself takes
  // more memory than in place and is read far slower, and the class's later ranks read it.
  ForgetCallsBefore(process_id, static_cast<uint32_t>(process.calls.size()), keep,
                    (process.calls.size() - process.calls.first()) / kMostKeptShare);
}

void JobModel::FoldAgreeingWindows(ProcessId process_id) {
  if (process_id >= processes_.size()) return;
  std::vector<FoldedTimes> times;
  std::vector<std::pair<uint64_t, uint8_t>> unlike_flags;
  std::vector<int32_t> like;
  bool folded_any = false;
  for (const auto& [comm_index, rank_number] : ProcessAt(process_id).memberships) {
    Comm& comm = comms_[comm_index];
    times.clear();
    unlike_flags.clear();
    like.clear();
    const size_t windows = FoldableWindows(comm, rank_number, &times, &unlike_flags, &like);
    if (windows == 0) continue;
    KeepFolded(comm.ranks[static_cast<size_t>(rank_number)], windows, times, unlike_flags, like);
    folded_any = true;
  }
  PublishFoldReferences();
  if (folded_any) ForgetFoldedCalls(process_id);
}

const FoldReferences* JobModel::ShareFoldReferences() {
  if (!fold_references_) fold_references_ = std::make_shared<FoldReferences>();
  PublishFoldReferences();
  return fold_references_.get();
}

void JobModel::PublishFoldReferences() {
  if (!fold_references_) return;
  // Names first: a worker that sees a class finds the names its calls carry.
  fold_references_->PublishNames(*this);
  for (const NewClass& added : unpublished_classes_) {
    const Comm& comm = comms_[added.comm];
    const CommRank& rank = comm.ranks[static_cast<size_t>(added.rank)];
    FoldReferences::Window window{added.chain, added.rank, {}};
    window.calls.reserve(kChainWindow);
    for (uint64_t slot = added.window * kChainWindow; slot < (added.window + 1) * kChainWindow; ++slot) {
      const uint32_t index = rank.collectives.Holds(slot) ? rank.collectives[slot] : kNoCall;
      if (index == kNoCall) break;
      window.calls.push_back(ProcessAt(rank.process).calls[index]);
    }
    // A class whose calls are not all held folds no rank: left out, this model's fold finds so.
    if (window.calls.size() == kChainWindow) fold_references_->Publish(comm.id, added.window, std::move(window));
  }
  unpublished_classes_.clear();
}

void JobModel::FoldApart(const FoldReferences& references) {
  if (!one_process_ || processes_.size() != 1) return;
  Process& process = *processes_.front();
  ListOrder(process);  // while every call is here
  std::vector<std::pair<uint64_t, uint64_t>> wanted;
  for (const auto& [comm_index, rank_number] : process.memberships) {
    const CommRank& entry = *FindRank(comms_[comm_index], rank_number);
    for (uint64_t window = entry.collectives.first() / kChainWindow;
         (window + 1) * kChainWindow <= entry.collectives.size(); ++window) {
      wanted.emplace_back(comms_[comm_index].id, window);
    }
  }
  const FoldReferences::View view = references.ViewOf(region_names_, call_paths_, wanted);
  std::vector<FoldedTimes> times;
  std::vector<std::pair<uint64_t, uint8_t>> unlike_flags;
  std::vector<int32_t> like;
  bool folded_any = false;
  for (const auto& [comm_index, rank_number] : process.memberships) {
    const Comm& comm = comms_[comm_index];
    CommRank& entry = *FindRank(comms_[comm_index], rank_number);
    if (entry.collectives.first() % kChainWindow != 0) continue;  // a history cut inside a window
    times.clear();
    unlike_flags.clear();
    like.clear();
    size_t windows = 0;
    // A prefix of windows, as FoldableWindows folds: each usable, and equal to a class
    // published there. Where none is, the job's model's fold goes on (a class not published
    // yet, or this rank the first of its class).
    for (uint64_t window = entry.collectives.first() / kChainWindow;
         (window + 1) * kChainWindow <= entry.collectives.size() && entry.chains.Holds(window); ++window) {
      WindowChain& chain = entry.chains[window];
      auto classes = view.classes.find({comm.id, window});
      if (!chain.usable() || classes == view.classes.end()) break;
      const uint64_t first_slot = window * kChainWindow;
      const uint32_t* mine_run = entry.collectives.Run(first_slot, kChainWindow);
      auto mine_at = [&](uint64_t slot) -> const Call* {
        const uint32_t index = mine_run != nullptr ? mine_run[slot - first_slot] : entry.collectives[slot];
        return index == kNoCall ? nullptr : &process.calls[index];
      };
      const FoldReferences::Window* matched = nullptr;
      for (const std::shared_ptr<const FoldReferences::Window>& published : classes->second) {
        auto theirs_at = [&](uint64_t slot) { return &published->calls[slot - first_slot]; };
        // This rank's calls as the job's model numbers them (their communicator: the class's).
        const JobNumbering numbering{view, published->calls.front().comm};
        // A class holds each chain once: equal calls mean this rank's chain is that class's,
        // the one FoldableWindows would find.
        if (FoldWindow(first_slot, mine_at, theirs_at, numbering, &times, &unlike_flags)) {
          matched = published.get();
          break;
        }
      }
      if (matched == nullptr) break;
      chain.chain = matched->chain;  // in the job's numbering, as adopting would sum it again
      like.push_back(matched->reference);
      ++windows;
    }
    if (windows == 0) continue;
    KeepFolded(entry, windows, times, unlike_flags, like);
    folded_any = true;
  }
  if (folded_any) ForgetFoldedCalls(0);
}

const Call* JobModel::CollectiveLike(const Comm& comm, int32_t rank, uint64_t seq, CallTimes* times) const {
  if (rank < 0 || rank >= static_cast<int32_t>(comm.ranks.size()) || seq == 0) return nullptr;
  const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
  if (!entry.present || seq - 1 >= entry.collectives.first()) {
    const Call* call = Collective(comm, rank, seq);
    if (call != nullptr && times != nullptr) *times = CallTimes{call->enter_ns, call->return_ns, call->complete_ns};
    return call;
  }
  if (seq - 1 < entry.folded.first() || seq - 1 >= entry.folded.size()) return nullptr;
  const int32_t reference = FoldedReference(entry, ChainWindowOf(seq));
  const CommRank& theirs = comm.ranks[static_cast<size_t>(reference)];
  if (seq - 1 < theirs.collectives.first()) return nullptr;  // never: a reference keeps its window
  const Call* like = Collective(comm, reference, seq);
  if (like != nullptr && times != nullptr) *times = FoldedCallTimes(*like, entry.folded[seq - 1]);
  return like;
}

void JobModel::CollectivesLike(const Comm& comm, int32_t rank, uint64_t from_seq, uint64_t to_seq,
                               std::vector<CollectiveTimes>* out) const {
  // Each entry is written once below: clearing them all first cost as much as reading the calls.
  out->resize(to_seq > from_seq ? to_seq - from_seq : 0);
  if (rank < 0 || rank >= static_cast<int32_t>(comm.ranks.size())) {
    std::fill(out->begin(), out->end(), CollectiveTimes{});
    return;
  }
  const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
  if (from_seq == 0 && to_seq > 0) (*out)[0] = CollectiveTimes{};  // seq 0 names no collective
  for (uint64_t seq = std::max<uint64_t>(from_seq, 1); seq < to_seq;) {
    const bool folded = entry.present && seq - 1 < entry.collectives.first();
    if (!folded || seq - 1 < entry.folded.first() || seq - 1 >= entry.folded.size()) {
      CollectiveTimes& at = (*out)[seq - from_seq];
      at.like = CollectiveLike(comm, rank, seq, &at.times);
      ++seq;
      continue;
    }
    // A folded window, or what of it the range holds: its reference's calls, read in place.
    const uint64_t window = ChainWindowOf(seq);
    const CommRank& theirs = comm.ranks[static_cast<size_t>(FoldedReference(entry, window))];
    const auto& reference_calls = ProcessAt(theirs.process).calls;
    const uint64_t end = std::min({to_seq, (window + 1) * kChainWindow + 1, entry.collectives.first() + 1});
    // In place where each lies in one chunk, as a window of a few dozen usually does.
    const uint32_t* indexes = theirs.collectives.Run(seq - 1, end - seq);
    const FoldedTimes* offsets = entry.folded.Run(seq - 1, end - seq);
    for (const uint64_t first = seq; seq < end; ++seq) {
      CollectiveTimes& at = (*out)[seq - from_seq];
      // Never missing: a reference keeps its window (CollectiveLike's reading, in place).
      const bool held = seq - 1 >= theirs.collectives.first() && seq <= theirs.collectives.size();
      const uint32_t index = indexes != nullptr ? indexes[seq - first] : held ? theirs.collectives[seq - 1] : kNoCall;
      if (index == kNoCall) {
        at = CollectiveTimes{};
        continue;
      }
      at.like = &reference_calls[index];
      at.times = FoldedCallTimes(*at.like, offsets != nullptr ? offsets[seq - first] : entry.folded[seq - 1]);
    }
  }
}

const Call* JobModel::RemadeCollective(const Comm& comm, int32_t rank, uint64_t seq) const {
  const auto comm_index = static_cast<CommIndex>(&comm - comms_.data());
  const auto key = std::make_tuple(comm_index, rank, seq);
  if (auto known = remade_index_.find(key); known != remade_index_.end()) return &remade_[known->second];
  CallTimes times;
  const Call* like = CollectiveLike(comm, rank, seq, &times);
  if (like == nullptr) return nullptr;
  Call call = *like;
  call.rank = rank;
  call.enter_ns = times.enter_ns;
  call.return_ns = times.return_ns;
  call.complete_ns = times.complete_ns;
  const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
  if (auto unlike = entry.folded_flags_unlike.find(seq - 1); unlike != entry.folded_flags_unlike.end()) {
    call.flags = unlike->second;
  }
  remade_index_.emplace(key, static_cast<uint32_t>(remade_.size()));
  remade_.push_back(call);
  return &remade_.back();
}

}  // namespace collwatch::analyzer
