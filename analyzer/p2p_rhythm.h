// The rhythm of one rank's sends and receives with one peer on one communicator: the
// shortest run of calls, holding both directions, that its history repeats from the start
// (a pipeline schedule's step: each microbatch's activations one way, gradients the
// other), how long it held and what the rank did after it broke. What tells "the ranks
// each receive first" from "one side sent fewer messages in one step" at a cycle of
// receives. Threading: pure functions.
#ifndef COLLWATCH_ANALYZER_P2P_RHYTHM_H_
#define COLLWATCH_ANALYZER_P2P_RHYTHM_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace collwatch::analyzer {

// A run of calls in one direction.
struct P2pRun {
  bool sends = false;
  size_t calls = 0;
  bool operator==(const P2pRun&) const = default;
};

struct P2pRhythm {
  size_t offset = 0;           // calls before the rhythm starts (a set-up, a handshake)
  std::vector<P2pRun> period;  // one repetition, as runs (empty: no rhythm found)
  size_t period_calls = 0;
  size_t repetitions = 0;      // whole repetitions before it broke (or the calls ended)
  bool broke = false;          // a call went off the rhythm
  size_t broke_at = 0;         // when it broke: the 0-based index of that call
  // The calls from the last whole repetition's end to the last call, as runs.
  std::vector<P2pRun> after;
};

// At most this many calls before a rhythm (a schedule's first-step set-up), and in one
// repetition: what bounds the search on a long history (post-mortem).
inline constexpr size_t kMaxRhythmOffset = 16;
inline constexpr size_t kMaxRhythmPeriod = 4096;
// Calls compared, over all periods tried: each multiple of a rhythm's period holds as long
// as it, so on a long history (a million calls of a two-call rhythm) they would cost
// seconds. Periods are tried shortest first; past this, longer ones are not tried.
inline constexpr size_t kMaxRhythmComparisons = size_t{1} << 25;

// `is_send`: the rank's sends (true) and receives (false) with the peer, oldest first, from
// the first one. A rhythm must repeat at least twice from its start, at most
// kMaxRhythmOffset calls in; of those, the one that holds over the most calls from its
// start, then the earliest start, then the shortest period. One pass over the calls per
// period tried.
P2pRhythm RhythmOf(const std::vector<bool>& is_send);

// Where call `position` of `rhythm`'s calls sits: its repetition (0-based) and, among the
// repetition's calls of its direction, its number (1-based); nullopt before the rhythm or
// once it broke.
struct RhythmPlace {
  size_t repetition = 0;
  size_t nth = 0;     // the nth send (or receive) of its repetition
  size_t of = 0;      // sends (or receives) in one repetition
};
std::optional<RhythmPlace> PlaceInRhythm(const P2pRhythm& rhythm, size_t position);

// "4 sends, 4 receives"; past kMaxRunsSpelledOut runs (several stages a rank interleave
// them), "12 sends and 12 receives in 20 runs".
inline constexpr size_t kMaxRunsSpelledOut = 8;
std::string RunsText(const std::vector<P2pRun>& runs);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_P2P_RHYTHM_H_
