// The rhythm of one rank's sends and receives with one peer on one communicator: the
// shortest run of calls, holding both directions, that its history repeats from the start
// (a pipeline schedule's step: each microbatch's activations one way, gradients the
// other), how long it held and what the rank did after it broke. What tells "the ranks
// each receive first" from "one side sent fewer messages in one step" at a cycle of
// receives. Threading: pure functions.
#ifndef COLLWATCH_ANALYZER_P2P_RHYTHM_H_
#define COLLWATCH_ANALYZER_P2P_RHYTHM_H_

#include <cstddef>
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
  std::vector<P2pRun> period;  // one repetition, as runs (empty: no rhythm found)
  size_t period_calls = 0;
  size_t repetitions = 0;      // whole repetitions before it broke (or the calls ended)
  bool broke = false;          // a call went off the rhythm
  size_t broke_at = 0;         // when it broke: the 0-based index of that call
  // The calls from the last whole repetition's end to the last call, as runs.
  std::vector<P2pRun> after;
};

// `is_send`: the rank's sends (true) and receives (false) with the peer, oldest first, from
// the first one. A rhythm must repeat at least twice from the start.
P2pRhythm RhythmOf(const std::vector<bool>& is_send);

// "4 sends, 4 receives"
std::string RunsText(const std::vector<P2pRun>& runs);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_P2P_RHYTHM_H_
