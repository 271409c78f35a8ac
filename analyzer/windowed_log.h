// A growing sequence whose indexes stay global while its front is dropped: what lets the
// online analyzer forget history no check can need again without renumbering the call
// indexes and sequence numbers every other structure holds. A few entries below the
// window may be kept on purpose (calls still referenced, e.g. a communicator's creation).
// Threading: none; the owner serialises.
#ifndef COLLWATCH_ANALYZER_WINDOWED_LOG_H_
#define COLLWATCH_ANALYZER_WINDOWED_LOG_H_

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <utility>
#include <vector>

namespace collwatch::analyzer {

template <typename T>
class WindowedLog {
 public:
  // One past the highest index ever stored (dropping the front does not change it).
  size_t size() const { return first_ + items_.size(); }
  bool empty() const { return size() == 0; }
  // The lowest index of the window; below it only kept entries remain.
  size_t first() const { return first_; }
  // Entries held in memory: the window plus the kept ones.
  size_t stored() const { return items_.size() + kept_.size(); }

  // Valid for every index in [first(), size()) and for the kept ones below; anything else
  // is a caller that lost track of what it pruned, and must not read another call.
  const T& operator[](size_t index) const {
    if (index >= first_ && index < size()) return items_[index - first_];
    auto kept = kept_.find(index);
    if (kept == kept_.end()) {
      std::fprintf(stderr, "collwatch: internal error: pruned history entry %zu read\n", index);
      std::abort();
    }
    return kept->second;
  }
  T& operator[](size_t index) { return const_cast<T&>(std::as_const(*this)[index]); }
  bool Holds(size_t index) const { return (index >= first_ && index < size()) || kept_.count(index) != 0; }

  const T& front() const { return items_.front(); }  // the window's first entry
  const T& back() const { return items_.back(); }
  T& back() { return items_.back(); }
  void push_back(T item) { items_.push_back(std::move(item)); }
  // Grows to `count` indexes, new ones set to `fill` (never shrinks).
  void resize(size_t count, const T& fill) {
    if (count > size()) items_.resize(count - first_, fill);
  }

  // The window's entries, in index order (kept entries below it are not visited).
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

  // An empty log whose history begins at `index`: the indexes below hold nothing and
  // take no memory (a trace that kept only its last entries).
  void StartAt(size_t index) {
    if (empty()) first_ = index;
  }

  // Drops every index below `index`, except those in `keep` (any order), which stay
  // readable; entries kept by an earlier call and not named again are dropped now.
  // Kept entries that run without a hole up to `index` stay in the window, which then
  // starts lower: the usual case online (the calls every rank's recent collectives name),
  // where copying each into the map cost more than the rest of the pass.
  void DropBefore(size_t index, const std::vector<size_t>& keep = {}) {
    if (index > size()) index = size();
    if (index < first_) index = first_;
    // Marks over the dropped span of the window: no sort of `keep`, which holds every
    // call a rank's recent collectives name, in no order.
    std::vector<bool> kept_in_window(index - first_, false);
    std::vector<size_t> kept_below;  // kept by an earlier call, below the window
    for (size_t k : keep) {
      if (k >= first_ && k < index) {
        kept_in_window[k - first_] = true;
      } else if (k < first_) {
        kept_below.push_back(k);
      }
    }
    while (index > first_ && kept_in_window[index - 1 - first_]) --index;
    std::map<size_t, T> kept;
    for (size_t k : kept_below) {
      if (auto node = kept_.extract(k)) kept.insert(std::move(node));  // moved, not copied
    }
    for (size_t k = first_; k < index; ++k) {
      if (kept_in_window[k - first_]) kept.emplace(k, items_[k - first_]);
    }
    kept_.swap(kept);
    items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(index - first_));
    first_ = index;
  }

 private:
  size_t first_ = 0;
  std::deque<T> items_;
  std::map<size_t, T> kept_;
};

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_WINDOWED_LOG_H_
