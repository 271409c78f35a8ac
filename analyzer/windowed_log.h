// A growing sequence whose indexes stay global while its front is dropped: what lets the
// online analyzer forget history no check can need again without renumbering the call
// indexes and sequence numbers every other structure holds. A few entries below the
// window may be kept on purpose (calls still referenced, e.g. a communicator's creation).
// Threading: none; the owner serialises (the chunks a thread drops are pooled per thread).
#ifndef COLLWATCH_ANALYZER_WINDOWED_LOG_H_
#define COLLWATCH_ANALYZER_WINDOWED_LOG_H_

#include <algorithm>
#include <bit>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace collwatch::analyzer {

// Entries live in chunks of a power-of-two count (about kChunkBytes each): an index is a
// shift and a mask, where std::deque divided by its block's count (a fifth of the model's
// time post-mortem), and an entry never moves once stored (references stay valid as it
// grows). Smaller chunks suit logs most of which end short (a folded rank's last entries).
template <typename T, size_t kChunkBytes = 1024>
class WindowedLog {
  static constexpr size_t kChunkEntries = std::bit_floor(std::max<size_t>(1, kChunkBytes / sizeof(T)));
  static constexpr size_t kChunkShift = std::countr_zero(kChunkEntries);
  static constexpr size_t kChunkMask = kChunkEntries - 1;

  // The window's entries and the kept ones below it; made with the first entry, as a
  // communicator has several logs per rank slot, most never filled where a damaged size
  // claims 131,072 ranks.
  struct Storage {
    // Chunk i holds positions [i * kChunkEntries, (i + 1) * kChunkEntries); the window's
    // first entry is at position `offset`. Chunks below it are freed at once and their
    // empty slots erased once they are half of the list (a vector's front erased each time
    // would move every chunk pointer).
    std::vector<std::unique_ptr<T[]>> chunks;
    size_t offset = 0;
    size_t count = 0;
    std::map<size_t, T> kept;

    [[gnu::always_inline]] T& At(size_t window_index) {
      const size_t position = offset + window_index;
      return chunks[position >> kChunkShift][position & kChunkMask];
    }
  };

 public:
  // Visits the window's entries in index order: random access, as a binary search needs.
  class const_iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = const T*;
    using reference = const T&;
    const_iterator() = default;
    const_iterator(Storage* storage, size_t window_index) : storage_(storage), index_(window_index) {}
    reference operator*() const { return storage_->At(index_); }
    pointer operator->() const { return &storage_->At(index_); }
    reference operator[](difference_type n) const { return storage_->At(Moved(n)); }
    const_iterator& operator++() { ++index_; return *this; }
    const_iterator operator++(int) { const_iterator was = *this; ++index_; return was; }
    const_iterator& operator--() { --index_; return *this; }
    const_iterator operator--(int) { const_iterator was = *this; --index_; return was; }
    const_iterator& operator+=(difference_type n) { index_ = Moved(n); return *this; }
    const_iterator& operator-=(difference_type n) { index_ = Moved(-n); return *this; }
    friend const_iterator operator+(const_iterator it, difference_type n) { return it += n; }
    friend const_iterator operator+(difference_type n, const_iterator it) { return it += n; }
    friend const_iterator operator-(const_iterator it, difference_type n) { return it -= n; }
    friend difference_type operator-(const const_iterator& a, const const_iterator& b) {
      return static_cast<difference_type>(a.index_) - static_cast<difference_type>(b.index_);
    }
    friend auto operator<=>(const const_iterator& a, const const_iterator& b) { return a.index_ <=> b.index_; }
    friend bool operator==(const const_iterator& a, const const_iterator& b) { return a.index_ == b.index_; }

   private:
    size_t Moved(difference_type n) const { return static_cast<size_t>(static_cast<difference_type>(index_) + n); }
    Storage* storage_ = nullptr;
    size_t index_ = 0;
  };

  WindowedLog() = default;
  WindowedLog(const WindowedLog& other) : first_(other.first_) {
    if (!other.storage_) return;
    for (size_t i = 0; i < other.storage_->count; ++i) push_back(other.storage_->At(i));
    MutableStorage().kept = other.storage_->kept;
  }
  WindowedLog& operator=(const WindowedLog& other) {
    if (this != &other) *this = WindowedLog(other);
    return *this;
  }
  WindowedLog(WindowedLog&&) noexcept = default;
  WindowedLog& operator=(WindowedLog&&) noexcept = default;

  // One past the highest index ever stored (dropping the front does not change it).
  size_t size() const { return first_ + Count(); }
  bool empty() const { return size() == 0; }
  // The lowest index of the window; below it only kept entries remain.
  size_t first() const { return first_; }
  // Entries held in memory: the window plus the kept ones.
  size_t stored() const { return storage_ ? storage_->count + storage_->kept.size() : 0; }

  // Valid for every index in [first(), size()) and for the kept ones below; anything else
  // is a caller that lost track of what it pruned, and must not read another call.
  [[gnu::always_inline]] const T& operator[](size_t index) const {
    if (index >= first_ && index < size()) [[likely]] return storage_->At(index - first_);
    return KeptEntry(index);
  }
  [[gnu::always_inline]] T& operator[](size_t index) { return const_cast<T&>(std::as_const(*this)[index]); }
  bool Holds(size_t index) const {
    return (index >= first_ && index < size()) || (storage_ && storage_->kept.count(index) != 0);
  }

  const T& front() const { return storage_->At(0); }  // the window's first entry
  const T& back() const { return storage_->At(storage_->count - 1); }
  T& back() { return storage_->At(storage_->count - 1); }
  void push_back(T item) {
    Storage& storage = MutableStorage();
    const size_t position = storage.offset + storage.count;
    if ((position >> kChunkShift) == storage.chunks.size()) storage.chunks.push_back(NewChunk());
    storage.chunks[position >> kChunkShift][position & kChunkMask] = std::move(item);
    ++storage.count;
  }
  // `items` after the last entry, a chunk at a time.
  void Append(const std::vector<T>& items) {
    Storage& storage = MutableStorage();
    for (size_t done = 0; done < items.size();) {
      const size_t position = storage.offset + storage.count;
      if ((position >> kChunkShift) == storage.chunks.size()) storage.chunks.push_back(NewChunk());
      const size_t room = std::min(kChunkEntries - (position & kChunkMask), items.size() - done);
      std::copy_n(items.begin() + static_cast<std::ptrdiff_t>(done), room,
                  &storage.chunks[position >> kChunkShift][position & kChunkMask]);
      storage.count += room;
      done += room;
    }
  }
  // Grows to `count` indexes, new ones set to `fill` (never shrinks).
  void resize(size_t count, const T& fill) {
    while (size() < count) push_back(fill);
  }

  // The `n` entries from `index` when they lie in the window and in one chunk (a window of a
  // few dozen usually does), for a loop over them without a lookup each; else nullptr.
  const T* Run(size_t index, size_t n) const {
    const std::span<const T> run = RunFrom(index);
    return n != 0 && run.size() >= n ? run.data() : nullptr;
  }

  // The entries from `index` to the end of its chunk or of the window, whichever comes first:
  // a long range read a chunk at a time, without a lookup each (empty outside the window).
  std::span<const T> RunFrom(size_t index) const {
    if (index < first_ || index >= size()) return {};
    const size_t position = storage_->offset + (index - first_);
    const size_t n = std::min(kChunkEntries - (position & kChunkMask), size() - index);
    return {&storage_->chunks[position >> kChunkShift][position & kChunkMask], n};
  }
  std::span<T> RunFrom(size_t index) {
    const std::span<const T> run = std::as_const(*this).RunFrom(index);
    return {const_cast<T*>(run.data()), run.size()};
  }

  // Calls `visit(index, entry)` for each kept entry below the window, in index order.
  template <typename Visit>
  void ForEachKept(const Visit& visit) {
    if (!storage_) return;
    for (auto& [index, entry] : storage_->kept) visit(index, entry);
  }

  // The window's entries, in index order (kept entries below it are not visited).
  const_iterator begin() const { return const_iterator(storage_.get(), 0); }
  const_iterator end() const { return const_iterator(storage_.get(), Count()); }

  // An empty log whose history begins at `index`: the indexes below hold nothing and
  // take no memory (a trace that kept only its last entries).
  void StartAt(size_t index) {
    if (empty()) first_ = index;
  }

  // Drops every index below `index`, except those in `keep` (any order), which stay
  // readable; entries kept by an earlier call and not named again are dropped now.
  // Kept entries that run without a hole up to `index` stay in the window, which then
  // starts lower: the usual case online (the calls every rank's recent collectives name),
  // where copying each into the map cost more than the rest of the pass. Drops nothing, and
  // returns false, where more than `most_kept` entries would be kept that way.
  bool DropBefore(size_t index, const std::vector<size_t>& keep = {}, size_t most_kept = SIZE_MAX) {
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
    if (most_kept != SIZE_MAX) {
      const auto marked = std::count(kept_in_window.begin(), kept_in_window.begin() + (index - first_), true);
      if (static_cast<size_t>(marked) + kept_below.size() > most_kept) return false;
    }
    if (!storage_) {
      first_ = index;
      return true;
    }
    Storage& storage = *storage_;
    std::map<size_t, T> kept;
    for (size_t k : kept_below) {
      if (auto node = storage.kept.extract(k)) kept.insert(std::move(node));  // moved, not copied
    }
    // Only the kept ones are visited, not the whole span dropped (a fold drops thousands).
    for (size_t k : keep) {
      if (k < first_ || k >= index || !kept_in_window[k - first_]) continue;
      kept.emplace(k, storage.At(k - first_));
      kept_in_window[k - first_] = false;  // named twice in `keep`: kept once
    }
    storage.kept.swap(kept);
    DropWindowFront(index - first_);
    first_ = index;
    return true;
  }

 private:
  size_t Count() const { return storage_ ? storage_->count : 0; }
  // Below the window: out of line, so that the window's indexing inlines where it is read.
  [[gnu::noinline, gnu::cold]] const T& KeptEntry(size_t index) const {
    if (storage_) {
      if (auto kept = storage_->kept.find(index); kept != storage_->kept.end()) return kept->second;
    }
    std::fprintf(stderr, "collwatch: internal error: pruned history entry %zu read\n", index);
    std::abort();
  }
  // Chunks this thread dropped, handed out again before new ones are made: a worker builds a
  // process's calls four to a chunk and drops most of them at once, more than the
  // allocator's per-thread cache holds (its bins took a tenth of the build). Only entries
  // that own nothing are pooled, up to about 1 MiB a thread.
  static constexpr bool kPooled = std::is_trivially_destructible_v<T>;
  static constexpr size_t kMostPooled = std::max<size_t>(1, (size_t{1} << 20) / (kChunkEntries * sizeof(T)));
  static std::vector<std::unique_ptr<T[]>>& ChunkPool() {
    thread_local std::vector<std::unique_ptr<T[]>> pool;
    return pool;
  }
  static std::unique_ptr<T[]> NewChunk() {
    if constexpr (kPooled) {
      auto& pool = ChunkPool();
      if (!pool.empty()) {
        std::unique_ptr<T[]> chunk = std::move(pool.back());
        pool.pop_back();
        return chunk;
      }
    }
    return std::unique_ptr<T[]>(new T[kChunkEntries]);
  }
  static void Recycle(std::unique_ptr<T[]> chunk) {
    if constexpr (kPooled) {
      auto& pool = ChunkPool();
      if (chunk && pool.size() < kMostPooled) pool.push_back(std::move(chunk));
    }
  }
  Storage& MutableStorage() {
    if (!storage_) storage_ = std::make_unique<Storage>();
    return *storage_;
  }
  // Forgets the window's first `n` entries, freeing each chunk they leave empty.
  void DropWindowFront(size_t n) {
    Storage& storage = *storage_;
    const size_t first_chunk = storage.offset >> kChunkShift;
    storage.offset += n;
    storage.count -= n;
    if (storage.count == 0) {  // nothing left: no chunk is needed, the next entry starts one
      for (auto& chunk : storage.chunks) Recycle(std::move(chunk));
      storage.chunks.clear();
      storage.offset = 0;
      return;
    }
    const size_t now_first_chunk = storage.offset >> kChunkShift;
    for (size_t chunk = first_chunk; chunk < now_first_chunk; ++chunk) Recycle(std::move(storage.chunks[chunk]));
    if (now_first_chunk * 2 >= storage.chunks.size()) {
      const auto emptied = static_cast<std::ptrdiff_t>(now_first_chunk);
      storage.chunks.erase(storage.chunks.begin(), storage.chunks.begin() + emptied);
      storage.offset -= now_first_chunk << kChunkShift;
      // A long log cut to its last entries (a folded rank's calls) gives its list back.
      if (storage.chunks.capacity() > 4 * storage.chunks.size() + 8) storage.chunks.shrink_to_fit();
    }
  }

  size_t first_ = 0;
  std::unique_ptr<Storage> storage_;
};

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_WINDOWED_LOG_H_
