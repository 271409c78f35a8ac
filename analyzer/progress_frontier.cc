// One rank's progress on one communicator. Threading: see progress_frontier.h.
#include "analyzer/progress_frontier.h"

#include <algorithm>

namespace collwatch::analyzer {

void ProgressFrontier::Entered(uint64_t seq) {
  if (seq <= entered_) return;
  entered_ = seq;
  if (!done_early_.empty()) {  // rare: a completion came before its enter
    const bool done = done_early_.count(seq) > 0;
    // Early completions at or below it are settled: this one, or ones whose enters were lost.
    done_early_.erase(done_early_.begin(), done_early_.upper_bound(seq));
    if (done) return;
  }
  if (open_.size() - open_head_ >= kMaxTracked) PopOpenFront();
  open_.push_back(seq);
}

void ProgressFrontier::GiveBackPassed() {
  open_.erase(open_.begin(), open_.begin() + static_cast<std::ptrdiff_t>(open_head_));
  open_head_ = 0;
}

void ProgressFrontier::Completed(uint64_t seq) {
  if (seq == 0) return;
  if (!OpenEmpty() && open_[open_head_] == seq) {  // the usual case: completions in order
    PopOpenFront();
    return;
  }
  auto found = std::lower_bound(open_.begin() + static_cast<std::ptrdiff_t>(open_head_), open_.end(), seq);
  if (found != open_.end() && *found == seq) {
    open_.erase(found);
    return;
  }
  if (seq <= entered_) return;  // already completed, or its enter was lost
  if (done_early_.size() >= kMaxTracked) done_early_.erase(done_early_.begin());
  done_early_.insert(seq);
}

}  // namespace collwatch::analyzer
