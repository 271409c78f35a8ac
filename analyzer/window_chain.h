// The compact summary of one rank's collectives on one communicator (issue 39): per
// window of kChainWindow sequence numbers, a chained fingerprint of the calls in it. Ranks
// whose chains for a window are equal issued the same collectives there, so agreement is
// one compare per rank and window instead of one per call. Threading: plain values; the
// JobModel that owns them serialises.
#ifndef COLLWATCH_ANALYZER_WINDOW_CHAIN_H_
#define COLLWATCH_ANALYZER_WINDOW_CHAIN_H_

#include <cstdint>

namespace collwatch::analyzer {

struct Fingerprint;  // job_model.h

// Sequence numbers per window: small enough that a damaged or lost call sends only a
// short stretch back to the per-call check, large enough that a window costs little.
inline constexpr uint64_t kChainWindow = 64;

// One window of one rank. `chain` folds every placed call's link (ChainLink); `filled`
// counts them. Only a window with every slot filled exactly once and no call of unknown
// region (which matches any region, so equal chains would not mean agreement and unequal
// ones not disagreement) can stand for its calls: `usable`.
struct WindowChain {
  uint64_t chain = 0;
  uint32_t filled = 0;
  bool tainted = false;  // a slot placed twice, or a call whose region is not known
  bool usable() const { return !tainted && filled == kChainWindow; }
};

// The window a collective's sequence number (1-based) falls in.
constexpr uint64_t ChainWindowOf(uint64_t seq) { return (seq - 1) / kChainWindow; }

// The one function that makes a call's contribution to its window's chain: its
// fingerprint's hash tied to its sequence number. Links are summed, not hashed in turn:
// lanes arrive out of order, and a sum of position-tied links is the same whatever the
// order while still telling apart the same calls at other positions.
uint64_t ChainLink(const Fingerprint& fingerprint, uint64_t seq);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_WINDOW_CHAIN_H_
