// How far one rank has come on one communicator: the newest collective it entered and
// its completion frontier; and how grouped collectives complete. The one rule for the
// analyzer's model (job_model.h) and the collector's live state (collector/live_state.h),
// so `top` and the findings agree. Threading: plain values; their owner serialises.
#ifndef COLLWATCH_ANALYZER_PROGRESS_FRONTIER_H_
#define COLLWATCH_ANALYZER_PROGRESS_FRONTIER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

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
  uint64_t completed() const { return OpenEmpty() ? entered_ : open_[open_head_] - 1; }

 private:
  // Bounds for a stream whose completions never come: past them the oldest is forgotten
  // (the frontier moves on) rather than memory growing without end.
  static constexpr size_t kMaxTracked = 1 << 16;

  bool OpenEmpty() const { return open_head_ == open_.size(); }
  void PopOpenFront() {
    if (++open_head_ == open_.size()) {  // the usual case: nothing else open
      open_.clear();
      open_head_ = 0;
    } else if (open_head_ >= 1024 && open_head_ * 2 >= open_.size()) {
      GiveBackPassed();
    }
  }
  void GiveBackPassed();

  uint64_t entered_ = 0;
  // Entered, not completed; ascending (enters come in order): open_[open_head_...]. A vector
  // whose front is passed by moving a start: cheaper per collective than a deque, and no
  // block allocated for a rank until it has something open.
  std::vector<uint64_t> open_;
  size_t open_head_ = 0;
  std::set<uint64_t> done_early_;     // completed, enter not seen yet
};

// The collectives of a process issued between ncclGroupStart and ncclGroupEnd: they carry
// no completion of their own but complete with their group's GroupEnd. A device
// completion of the GroupEnd covers the members on its stream; a GroupEnd that completes
// at its return (nothing left on a device) covers them all. `Member` names a collective
// the way its owner does (a call index, a communicator rank and seq).
template <typename Member>
class GroupedCollectives {
 public:
  void Add(uint64_t group_id, uint64_t stream, Member member) {
    auto group = groups_.find(group_id);
    if (group == groups_.end() && groups_.size() >= kMaxOpenGroups) groups_.erase(groups_.begin());  // the oldest
    std::vector<Entry>& members = groups_[group_id];
    if (members.size() < kMaxMembers) members.push_back({std::move(member), stream});
  }
  // GroupEnd `group_id` completed on `stream` (nullptr: at its return, on every stream):
  // calls `done(member)` for each member that completes, and forgets them.
  template <typename Done>
  void Complete(uint64_t group_id, const uint64_t* stream, Done&& done) {
    auto group = groups_.find(group_id);
    if (group == groups_.end()) return;
    std::vector<Entry>& members = group->second;
    std::vector<Entry> waiting;
    for (Entry& entry : members) {
      if (stream != nullptr && entry.stream != *stream) {
        waiting.push_back(std::move(entry));
      } else {
        done(entry.member);
      }
    }
    if (waiting.empty()) {
      groups_.erase(group);
    } else {
      members = std::move(waiting);
    }
  }
  // Members of `group_id` still wait (on some stream).
  bool Waiting(uint64_t group_id) const { return groups_.count(group_id) > 0; }
  bool empty() const { return groups_.empty(); }
  template <typename Visit>
  void ForEachMember(Visit&& visit) const {
    for (const auto& [id, members] : groups_) {
      for (const Entry& entry : members) visit(entry.member);
    }
  }

 private:
  // Bounds for a stream whose GroupEnd records never come. Group ids are serials of
  // their process, so the lowest open one is the oldest.
  static constexpr size_t kMaxOpenGroups = 1024;
  static constexpr size_t kMaxMembers = 1 << 16;
  struct Entry {
    Member member;
    uint64_t stream;
  };
  std::map<uint64_t, std::vector<Entry>> groups_;
};

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_PROGRESS_FRONTIER_H_
