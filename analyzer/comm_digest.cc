// Digests of a communicator (comm_digest.h): made from a model, merged, judged.
#include "analyzer/comm_digest.h"

#include <algorithm>

#include "ring/hash.h"

namespace collwatch::analyzer {
namespace {

// Each rank kept only at the highest sequence number it appears at, sets left empty dropped:
// so that merging is a per-rank maximum, whatever was merged before.
void KeepEachRankAtItsHighest(std::map<uint64_t, RankSet>* progress) {
  RankSet higher;
  for (auto it = progress->rbegin(); it != progress->rend(); ++it) {
    it->second.Remove(higher);
    higher.Merge(it->second);
  }
  std::erase_if(*progress, [](const auto& entry) { return entry.second.empty(); });
}

void MergeProgress(std::map<uint64_t, RankSet>* into, const std::map<uint64_t, RankSet>& from) {
  for (const auto& [seq, ranks] : from) (*into)[seq].Merge(ranks);
  KeepEachRankAtItsHighest(into);
}

// A rank in a class of the window is no longer open there.
void CloseClassedRanks(WindowClasses* window) {
  for (const auto& [chain, ranks] : window->by_chain) window->open.Remove(ranks);
}

// `rank`'s portable chain of `window`, reading its calls (folded ones through their
// reference); nullopt where one cannot be read.
std::optional<uint64_t> PortableChainOf(const JobModel& model, const Comm& comm, int32_t rank, uint64_t window,
                                        std::vector<CollectiveTimes>* calls) {
  const uint64_t from_seq = window * kChainWindow + 1;
  model.CollectivesLike(comm, rank, from_seq, from_seq + kChainWindow, calls);
  uint64_t chain = 0;
  for (uint64_t slot = 0; slot < kChainWindow; ++slot) {
    const Call* like = (*calls)[slot].like;
    if (like == nullptr) return std::nullopt;
    chain += PortableChainLink(FingerprintOf(*like), model.RegionName(like->region), from_seq + slot);
  }
  return chain;
}

}  // namespace

uint64_t PortableChainLink(const Fingerprint& fingerprint, std::string_view region_name, uint64_t seq) {
  Fingerprint without_region = fingerprint;
  without_region.region = 0;
  const uint64_t region = Hash64(region_name.data(), region_name.size());
  return ChainLink(without_region, seq) + Mix64(region ^ (seq * 0xc2b2ae3d27d4eb4full));
}

CommDigest DigestOfComm(const JobModel& model, const Comm& comm, uint64_t from_window) {
  CommDigest digest;
  digest.comm_id = comm.id;
  digest.nranks = comm.nranks;
  std::vector<CollectiveTimes> calls;
  for (size_t index = 0; index < comm.ranks.size(); ++index) {
    const CommRank& entry = comm.ranks[index];
    if (!entry.present) continue;
    const auto rank = static_cast<int32_t>(index);
    digest.present.Add(rank);
    digest.entered[entry.progress.entered()].Add(rank);
    digest.completed[entry.progress.completed()].Add(rank);
    for (uint64_t window = std::max(from_window, entry.chains.first()); window < entry.chains.size(); ++window) {
      const std::optional<uint64_t> chain =
          entry.chains[window].usable() ? PortableChainOf(model, comm, rank, window, &calls) : std::nullopt;
      WindowClasses& classes = digest.windows[window];
      if (chain) {
        classes.by_chain[*chain].Add(rank);
      } else {
        classes.open.Add(rank);
      }
    }
  }
  return digest;
}

void MergeDigest(CommDigest* into, const CommDigest& from) {
  if (into->comm_id == 0) into->comm_id = from.comm_id;
  into->nranks = std::max(into->nranks, from.nranks);
  into->present.Merge(from.present);
  for (const auto& [number, window] : from.windows) {
    WindowClasses& merged = into->windows[number];
    for (const auto& [chain, ranks] : window.by_chain) merged.by_chain[chain].Merge(ranks);
    merged.open.Merge(window.open);
    CloseClassedRanks(&merged);
  }
  MergeProgress(&into->entered, from.entered);
  MergeProgress(&into->completed, from.completed);
}

DigestVerdict JudgeDigest(const CommDigest& digest) {
  DigestVerdict verdict;
  verdict.complete = digest.nranks > 0 && digest.present.size() == static_cast<uint64_t>(digest.nranks);
  bool agreed_so_far = true;
  for (const auto& [number, window] : digest.windows) {
    if (window.by_chain.size() > 1) {
      verdict.divergent_window = number;
      for (const auto& [chain, ranks] : window.by_chain) verdict.classes.push_back(ranks);
      std::sort(verdict.classes.begin(), verdict.classes.end(), [](const RankSet& a, const RankSet& b) {
        return a.size() != b.size() ? a.size() > b.size() : a.lowest() < b.lowest();
      });
      for (const RankSet& ranks : verdict.classes) verdict.representatives.push_back(ranks.lowest());
      break;
    }
    const bool agreed = window.open.empty() && window.by_chain.size() == 1 &&
                        window.by_chain.begin()->second == digest.present;
    agreed_so_far = agreed_so_far && agreed;
    if (agreed_so_far) ++verdict.agreed_windows;
  }
  if (!digest.entered.empty()) {
    verdict.min_entered = digest.entered.begin()->first;
    verdict.max_entered = digest.entered.rbegin()->first;
    verdict.behind = digest.entered.begin()->second;
  }
  if (!digest.completed.empty()) {
    verdict.min_completed = digest.completed.begin()->first;
    verdict.max_completed = digest.completed.rbegin()->first;
  }
  return verdict;
}

}  // namespace collwatch::analyzer
