// How far one rank has come on one communicator: the newest collective it entered and
// its completion frontier. The one rule for the analyzer's model (job_model.h) and the
// collector's live state (collector/live_state.h), so `top` and the findings agree.
// Threading: a plain value; its owner serialises.
#ifndef COLLWATCH_ANALYZER_PROGRESS_FRONTIER_H_
#define COLLWATCH_ANALYZER_PROGRESS_FRONTIER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <set>

namespace collwatch::analyzer {

class ProgressFrontier {
 public:
  // Collective `seq` was entered. An enter at or below the newest one is a resend (or
  // damage) and changes nothing: collectives of one rank are entered in order.
  void Entered(uint64_t seq);
  // Collective `seq`'s work is done (or nothing will ever say so). A completion may
  // arrive before its enter (lanes travel separately); it is held until the enter comes.
  void Completed(uint64_t seq);

  // The newest collective entered (0: none).
  uint64_t entered() const { return entered_; }
  // The highest seq such that every collective entered up to it has completed. A seq
  // never entered (its records lost) does not hold it back.
  uint64_t completed() const { return open_.empty() ? entered_ : open_.front() - 1; }

 private:
  // Bounds for a stream whose completions never come: past them the oldest is forgotten
  // (the frontier moves on) rather than memory growing without end.
  static constexpr size_t kMaxTracked = 1 << 16;

  uint64_t entered_ = 0;
  std::deque<uint64_t> open_;         // entered, not completed; ascending (enters come in order)
  std::set<uint64_t> done_early_;     // completed, enter not seen yet
};

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_PROGRESS_FRONTIER_H_
