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
  P2pRhythm rhythm;
  const size_t n = is_send.size();
  for (size_t offset = 0; offset <= kMaxRhythmOffset && offset < n; ++offset) {
    // A repetition must hold both directions: no period ends before the first change.
    size_t first_change = offset + 1;
    while (first_change < n && is_send[first_change] == is_send[offset]) ++first_change;
    for (size_t period = std::max<size_t>(2, first_change - offset + 1);
         period <= kMaxRhythmPeriod && offset + 2 * period <= n; ++period) {
      size_t held = offset + period;  // calls that follow the rhythm
      while (held < n && is_send[held] == is_send[held - period]) ++held;
      if (held < offset + 2 * period) continue;
      const std::vector<P2pRun> runs = RunsOf(is_send, offset, offset + period);
      rhythm.offset = offset;
      rhythm.period = runs;
      rhythm.period_calls = period;
      rhythm.repetitions = (held - offset) / period;
      rhythm.broke = held < n;
      rhythm.broke_at = held;
      rhythm.after = RunsOf(is_send, offset + rhythm.repetitions * period, n);
      return rhythm;
    }
  }
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
  return absl::StrJoin(runs, ", ", [](std::string* out, const P2pRun& run) {
    absl::StrAppend(out, run.calls, run.sends ? (run.calls == 1 ? " send" : " sends")
                                              : (run.calls == 1 ? " receive" : " receives"));
  });
}

}  // namespace collwatch::analyzer
