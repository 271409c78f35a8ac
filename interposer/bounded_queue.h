// A fixed-capacity lock-free multi-producer multi-consumer queue (per-cell sequence
// numbers, after Dmitry Vyukov's design). Push and Pop never block and never allocate:
// a full queue refuses the push, an empty one the pop.
// Threading: any threads on either side.
#ifndef COLLWATCH_INTERPOSER_BOUNDED_QUEUE_H_
#define COLLWATCH_INTERPOSER_BOUNDED_QUEUE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace collwatch {

template <typename T, size_t kCapacity>
class BoundedQueue {
  static_assert(kCapacity >= 2 && (kCapacity & (kCapacity - 1)) == 0, "power of two");

 public:
  BoundedQueue() noexcept {
    for (size_t i = 0; i < kCapacity; ++i) cells_[i].sequence.store(i, std::memory_order_relaxed);
  }

  bool Push(const T& value) noexcept {
    size_t position = enqueue_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& cell = cells_[position & (kCapacity - 1)];
      const size_t sequence = cell.sequence.load(std::memory_order_acquire);
      const auto difference = static_cast<intptr_t>(sequence) - static_cast<intptr_t>(position);
      if (difference == 0) {
        if (enqueue_.compare_exchange_weak(position, position + 1, std::memory_order_relaxed)) {
          cell.value = value;
          cell.sequence.store(position + 1, std::memory_order_release);
          return true;
        }
      } else if (difference < 0) {
        return false;  // full
      } else {
        position = enqueue_.load(std::memory_order_relaxed);
      }
    }
  }

  bool Pop(T* value) noexcept {
    size_t position = dequeue_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& cell = cells_[position & (kCapacity - 1)];
      const size_t sequence = cell.sequence.load(std::memory_order_acquire);
      const auto difference =
          static_cast<intptr_t>(sequence) - static_cast<intptr_t>(position + 1);
      if (difference == 0) {
        if (dequeue_.compare_exchange_weak(position, position + 1, std::memory_order_relaxed)) {
          *value = cell.value;
          cell.sequence.store(position + kCapacity, std::memory_order_release);
          return true;
        }
      } else if (difference < 0) {
        return false;  // empty
      } else {
        position = dequeue_.load(std::memory_order_relaxed);
      }
    }
  }

 private:
  struct Cell {
    std::atomic<size_t> sequence;
    T value;
  };
  alignas(64) Cell cells_[kCapacity];
  alignas(64) std::atomic<size_t> enqueue_{0};
  alignas(64) std::atomic<size_t> dequeue_{0};
};

}  // namespace collwatch

#endif  // COLLWATCH_INTERPOSER_BOUNDED_QUEUE_H_
