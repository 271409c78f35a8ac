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
#include <memory>
#include <utility>
#include <vector>

namespace collwatch::analyzer {

template <typename T>
class WindowedLog {
 public:
  WindowedLog() = default;
  WindowedLog(const WindowedLog& other)
      : first_(other.first_),
        items_(other.items_ ? std::make_unique<std::deque<T>>(*other.items_) : nullptr),
        kept_(other.kept_) {}
  WindowedLog& operator=(const WindowedLog& other) {
    if (this != &other) *this = WindowedLog(other);
    return *this;
  }
  WindowedLog(WindowedLog&&) noexcept = default;
  WindowedLog& operator=(WindowedLog&&) noexcept = default;

  // One past the highest index ever stored (dropping the front does not change it).
  size_t size() const { return first_ + Items().size(); }
  bool empty() const { return size() == 0; }
  // The lowest index of the window; below it only kept entries remain.
  size_t first() const { return first_; }
  // Entries held in memory: the window plus the kept ones.
  size_t stored() const { return Items().size() + kept_.size(); }

  // Valid for every index in [first(), size()) and for the kept ones below; anything else
  // is a caller that lost track of what it pruned, and must not read another call.
  const T& operator[](size_t index) const {
    if (index >= first_ && index < size()) return Items()[index - first_];
    auto kept = kept_.find(index);
    if (kept == kept_.end()) {
      std::fprintf(stderr, "collwatch: internal error: pruned history entry %zu read\n", index);
      std::abort();
    }
    return kept->second;
  }
  T& operator[](size_t index) { return const_cast<T&>(std::as_const(*this)[index]); }
  bool Holds(size_t index) const { return (index >= first_ && index < size()) || kept_.count(index) != 0; }

  const T& front() const { return Items().front(); }  // the window's first entry
  const T& back() const { return Items().back(); }
  T& back() { return MutableItems().back(); }
  void push_back(T item) { MutableItems().push_back(std::move(item)); }
  // Grows to `count` indexes, new ones set to `fill` (never shrinks).
  void resize(size_t count, const T& fill) {
    if (count > size()) MutableItems().resize(count - first_, fill);
  }

  // The window's entries, in index order (kept entries below it are not visited).
  auto begin() const { return Items().begin(); }
  auto end() const { return Items().end(); }

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
      if (kept_in_window[k - first_]) kept.emplace(k, Items()[k - first_]);
    }
    kept_.swap(kept);
    if (index > first_) {
      std::deque<T>& items = MutableItems();
      items.erase(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(index - first_));
    }
    first_ = index;
  }

 private:
  const std::deque<T>& Items() const {
    static const std::deque<T> kNone;
    return items_ ? *items_ : kNone;
  }
  std::deque<T>& MutableItems() {
    if (!items_) items_ = std::make_unique<std::deque<T>>();
    return *items_;
  }

  size_t first_ = 0;
  // Made with the first entry: an empty std::deque allocates its map and a 512-byte block,
  // and a communicator has three logs per rank slot, most never filled where a damaged
  // size claims a million ranks (about 1.7 KB a slot before).
  std::unique_ptr<std::deque<T>> items_;
  std::map<size_t, T> kept_;
};

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_WINDOWED_LOG_H_
