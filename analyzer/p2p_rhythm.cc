// The rhythm of a rank's point-to-point calls with one peer: see p2p_rhythm.h.
#include "analyzer/p2p_rhythm.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace collwatch::analyzer {
namespace {

std::vector<P2pRun> RunsOf(const std::vector<bool>& is_send, size_t begin, size_t end) {
  std::vector<P2pRun> runs;
  for (size_t i = begin; i < end; ++i) {
    if (runs.empty() || runs.back().sends != is_send[i]) runs.push_back(P2pRun{is_send[i], 0});
    ++runs.back().calls;
  }
  return runs;
}

}  // namespace

P2pRhythm RhythmOf(const std::vector<bool>& is_send) {
  // The rhythm that holds over the most calls wins, the earliest start and then the shortest
  // period on a tie: a short pattern that happens to repeat twice near the start must not
  // hide the schedule's step (with two stages a rank, the set-up's calls did), nor one that
  // repeats twice at the end hide where the step broke.
  const size_t n = is_send.size();
  const size_t last_offset = std::min(kMaxRhythmOffset, n == 0 ? 0 : n - 1);
  // A repetition must hold both directions: from `offset`, no period ends before the first change.
  std::vector<size_t> shortest_period(last_offset + 1);
  for (size_t offset = 0; offset <= last_offset; ++offset) {
    size_t first_change = offset + 1;
    while (first_change < n && is_send[first_change] == is_send[offset]) ++first_change;
    shortest_period[offset] = std::max<size_t>(2, first_change - offset + 1);
  }
  size_t best_held = 0, best_offset = 0, best_period = 0;
  std::vector<size_t> breaks;  // where a call differs from the one a period before it
  size_t compared = 0;
  for (size_t period = 2; period <= kMaxRhythmPeriod && 2 * period <= n && compared < kMaxRhythmComparisons;
       ++period) {
    // One pass per period serves every start: the calls up to the first break at or after
    // the latest start's first repetition.
    breaks.clear();
    for (size_t i = period; i < n; ++i) {
      ++compared;
      if (is_send[i] == is_send[i - period]) continue;
      breaks.push_back(i);
      if (i >= last_offset + period) break;
    }
    for (size_t offset = 0; offset <= last_offset && offset + 2 * period <= n; ++offset) {
      if (period < shortest_period[offset]) continue;
      const auto next_break = std::lower_bound(breaks.begin(), breaks.end(), offset + period);
      const size_t held = next_break == breaks.end() ? n : *next_break;  // calls that follow the rhythm
      if (held < offset + 2 * period) continue;
      const size_t covered = held - offset, best_covered = best_held - best_offset;
      if (covered < best_covered || (covered == best_covered && offset >= best_offset)) continue;
      best_held = held;
      best_offset = offset;
      best_period = period;
    }
  }
  P2pRhythm rhythm;
  if (best_period == 0) return rhythm;
  rhythm.offset = best_offset;
  rhythm.period = RunsOf(is_send, best_offset, best_offset + best_period);
  rhythm.period_calls = best_period;
  rhythm.repetitions = (best_held - best_offset) / best_period;
  rhythm.broke = best_held < n;
  rhythm.broke_at = best_held;
  rhythm.after = RunsOf(is_send, best_offset + rhythm.repetitions * best_period, n);
  return rhythm;
}

std::optional<RhythmPlace> PlaceInRhythm(const P2pRhythm& rhythm, size_t position) {
  if (rhythm.period.empty() || position < rhythm.offset || (rhythm.broke && position >= rhythm.broke_at)) {
    return std::nullopt;
  }
  RhythmPlace place;
  place.repetition = (position - rhythm.offset) / rhythm.period_calls;
  size_t left = (position - rhythm.offset) % rhythm.period_calls;
  size_t before[2] = {0, 0};  // receives, sends in the runs before the call's
  bool sends = false;
  for (const P2pRun& run : rhythm.period) {
    if (left < run.calls) {
      sends = run.sends;
      place.nth = before[run.sends ? 1 : 0] + left + 1;
      break;
    }
    before[run.sends ? 1 : 0] += run.calls;
    left -= run.calls;
  }
  for (const P2pRun& run : rhythm.period) {
    if (run.sends == sends) place.of += run.calls;
  }
  return place;
}

std::string RunsText(const std::vector<P2pRun>& runs) {
  if (runs.size() > kMaxRunsSpelledOut) {
    size_t sends = 0, receives = 0;
    for (const P2pRun& run : runs) (run.sends ? sends : receives) += run.calls;
    return absl::StrCat(sends, sends == 1 ? " send and " : " sends and ", receives,
                        receives == 1 ? " receive" : " receives", " in ", runs.size(), " runs");
  }
  return absl::StrJoin(runs, ", ", [](std::string* out, const P2pRun& run) {
    absl::StrAppend(out, run.calls, run.sends ? (run.calls == 1 ? " send" : " sends")
                                              : (run.calls == 1 ? " receive" : " receives"));
  });
}

}  // namespace collwatch::analyzer
