// How two rank classes parted at the first collective they disagree on, read from their
// call sequences (NVTX regions help where they exist; nothing here needs them): a run of
// calls one class issued and the other did not (PATH_DIVERGENCE, or
// SKIPPED_REDUCE_SCATTER when the run is reduce-scatters only), the same calls with
// another signature (SIGNATURE_MISMATCH), another collective (OP_MISMATCH), or, where the
// evidence fits more than one of these, undecided with every reading it fits.
// Threading: pure functions.
#ifndef COLLWATCH_ANALYZER_CLASSIFICATION_H_
#define COLLWATCH_ANALYZER_CLASSIFICATION_H_

#include <cstddef>
#include <span>
#include <vector>

#include "analyzer/finding.h"
#include "analyzer/job_model.h"

namespace collwatch::analyzer {

// What the two largest classes reported, each through one representative rank.
struct DivergenceEvidence {
  std::span<const Call* const> major;    // the larger class's calls from the first mismatch on
  std::span<const Call* const> minor;    // the other class's
  std::span<const Call* const> history;  // calls every rank agreed on before it, oldest first
  size_t max_run = 256;                  // longest run read off the history
  // The two classes' first differing calls were issued from different code: their call
  // paths part at a function the classes run from different lines (or whose one line led
  // to different functions), each path read from the calling thread.
  bool heads_from_different_code = false;
};

// A divergence classified; `basis` (DivergenceBasis, finding.h) says what decided it.
struct Classification {
  FindingKind kind = FindingKind::kOpMismatch;
  DivergenceBasis basis = DivergenceBasis::kHeadsOnly;
  // False when the evidence fits other kinds too (`other_readings`): the finding must say
  // so and give every reading.
  bool decided = true;
  std::vector<FindingKind> other_readings;
  // True when calls reported later could still change the verdict or its run; the
  // analyzer then waits a bounded settle window for them (GPU ranks keep enqueueing).
  bool wants_more = false;

  // PATH_DIVERGENCE and SKIPPED_REDUCE_SCATTER: the calls one class issued that the other
  // did not. `two_sided`: both classes issued calls the other did not (`major_run` and
  // `minor_run`), with no point seen where they agree again when `open_ended`.
  bool major_inserted = false;           // one-sided: the run is the major class's
  std::vector<const Call*> run;          // one-sided run, on the side that issued it
  bool two_sided = false;
  bool open_ended = false;
  std::vector<const Call*> major_run;    // two-sided
  std::vector<const Call*> minor_run;
  // The latest call the verdict rests on (post-mortem detection time).
  const Call* last_evidence = nullptr;
};

// Calls matched after a differing stretch that make its realignment firm.
inline constexpr size_t kFirmAnchor = 2;
// Calls per class whose shapes must agree before a size difference reads as a mismatch
// of the same calls rather than different code.
inline constexpr size_t kStructureCalls = 3;

Classification ClassifyDivergence(const DivergenceEvidence& evidence);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_CLASSIFICATION_H_
