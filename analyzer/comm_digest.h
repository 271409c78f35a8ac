// What one part of a job (a node's agent, an aggregator's subtree) says of one communicator,
// in place of its records (issue 40): its rank classes per window of collectives, each a set
// of ranks whose window's calls agree, and its progress as sets of ranks by the last
// collective each entered and completed. Digests of disjoint parts merge into the digest of
// their union, in any grouping and order, and merging one again changes nothing: a tree of
// aggregators can merge what its children send, and a child may resend. Where a
// communicator's every rank is in a digest, the digest alone says whether they agree so far
// and, where not, which classes to ask for their calls (one representative each).
// Threading: plain values.
#ifndef COLLWATCH_ANALYZER_COMM_DIGEST_H_
#define COLLWATCH_ANALYZER_COMM_DIGEST_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "analyzer/job_model.h"
#include "analyzer/rank_set.h"

namespace collwatch::analyzer {

// One window of kChainWindow collectives (window_chain.h) of one communicator.
struct WindowClasses {
  // By the window's chain: the ranks whose window is usable (every slot filled once, every
  // region known) with that chain. A chain here is the same on every node
  // (PortableChainLink), not the model's own (which numbers regions as it met them).
  std::map<uint64_t, RankSet> by_chain;
  // Ranks with calls in the window that is not usable (yet): still filling, or with a slot
  // placed twice or a call of unknown region. Never counted as agreeing.
  RankSet open;
  bool operator==(const WindowClasses&) const = default;
};

struct CommDigest {
  uint64_t comm_id = 0;
  int32_t nranks = 0;
  RankSet present;  // the communicator's ranks this part has
  std::map<uint64_t, WindowClasses> windows;  // by window number (ChainWindowOf)
  // Ranks by the highest sequence number each entered, and completed (0: none).
  std::map<uint64_t, RankSet> entered;
  std::map<uint64_t, RankSet> completed;
  bool operator==(const CommDigest&) const = default;
};

// A call's link in a portable chain: ChainLink's, but with its region's name in place of the
// model's number for it. Sums of these compare across models.
uint64_t PortableChainLink(const Fingerprint& fingerprint, std::string_view region_name, uint64_t seq);

// `comm`'s digest from `model`: every rank of it the model has, windows from `from_window`
// on (those below were sent already, or agreed).
CommDigest DigestOfComm(const JobModel& model, const Comm& comm, uint64_t from_window = 0);

// `from` merged into `into` (the same communicator). A rank's progress is the highest either
// says; a rank in a class of a window is no longer open there. A rank in two classes of one
// window (two parts each claiming it, with different calls) stays in both: a disagreement.
void MergeDigest(CommDigest* into, const CommDigest& from);

// What a digest says of its communicator's windows. Complete: every rank present.
struct DigestVerdict {
  bool complete = false;
  // Windows, from the lowest, where every present rank's window is usable in one class.
  uint64_t agreed_windows = 0;
  // The first window where the present ranks' usable windows fall in more than one class
  // (nullopt: none so far), and those classes, the largest first.
  std::optional<uint64_t> divergent_window;
  std::vector<RankSet> classes;
  // One rank of each class, its lowest: whose calls to ask for (drill-down).
  std::vector<int32_t> representatives;
  // Progress: the lowest and highest last entered and completed, and the ranks at the lowest.
  uint64_t min_entered = 0, max_entered = 0, min_completed = 0, max_completed = 0;
  RankSet behind;  // the ranks at min_entered
};
DigestVerdict JudgeDigest(const CommDigest& digest);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_COMM_DIGEST_H_
