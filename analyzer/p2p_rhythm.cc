// The rhythm of a rank's point-to-point calls with one peer: see p2p_rhythm.h.
#include "analyzer/p2p_rhythm.h"

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
  for (size_t period = 2; 2 * period <= n; ++period) {
    size_t held = period;  // calls that follow the rhythm
    while (held < n && is_send[held] == is_send[held - period]) ++held;
    if (held < 2 * period) continue;
    const std::vector<P2pRun> runs = RunsOf(is_send, 0, period);
    if (runs.size() < 2) continue;  // one direction only: no exchange to count
    rhythm.period = runs;
    rhythm.period_calls = period;
    rhythm.repetitions = held / period;
    rhythm.broke = held < n;
    rhythm.broke_at = held;
    rhythm.after = RunsOf(is_send, rhythm.repetitions * period, n);
    return rhythm;
  }
  return rhythm;
}

std::string RunsText(const std::vector<P2pRun>& runs) {
  return absl::StrJoin(runs, ", ", [](std::string* out, const P2pRun& run) {
    absl::StrAppend(out, run.calls, run.sends ? (run.calls == 1 ? " send" : " sends")
                                              : (run.calls == 1 ? " receive" : " receives"));
  });
}

}  // namespace collwatch::analyzer
