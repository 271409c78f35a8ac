// The calls of one process waiting for their return or completion, by their enter
// record's (lane, index) key: the JobModel's lookup for every return and completion record.
// Threading: plain values; the JobModel that owns them serialises.
#ifndef COLLWATCH_ANALYZER_PENDING_CALLS_H_
#define COLLWATCH_ANALYZER_PENDING_CALLS_H_

#include <array>
#include <cstddef>
#include <cstdint>

#include "absl/container/flat_hash_map.h"

namespace collwatch::analyzer {

// A small direct-mapped table in front of a hash map: nearly every return and completion
// follows its enter within a few records, and is found in the table without hashing
// (hashing, inserting and erasing were about 8 % of the model's instructions). An entry
// the table must give up for a newer key moves to the map; a key is in one of the two.
class PendingCalls {
 public:
  // The call waiting under `key`, or nullptr; valid until the next change.
  uint32_t* Find(uint64_t key) {
    Slot& slot = recent_[SlotOf(key)];
    if (slot.used && slot.key == key) return &slot.call;
    if (older_.empty()) return nullptr;
    auto it = older_.find(key);
    return it == older_.end() ? nullptr : &it->second;
  }
  // `call` waits under `key` (replacing what waited under it).
  void Set(uint64_t key, uint32_t call) {
    Slot& slot = recent_[SlotOf(key)];
    if (!slot.used || slot.key != key) {
      if (!older_.empty()) older_.erase(key);
      if (slot.used) {
        older_[slot.key] = slot.call;
      } else {
        ++recent_count_;
      }
      slot.key = key;
      slot.used = true;
    }
    slot.call = call;
  }
  void Erase(uint64_t key) {
    Slot& slot = recent_[SlotOf(key)];
    if (slot.used && slot.key == key) {
      slot.used = false;
      --recent_count_;
    } else if (!older_.empty()) {
      older_.erase(key);
    }
  }
  bool empty() const { return recent_count_ == 0 && older_.empty(); }
  size_t size() const { return recent_count_ + older_.size(); }
  // visit(call) for each waiting call, in no particular order.
  template <typename Visit>
  void ForEach(Visit&& visit) const {
    for (const Slot& slot : recent_) {
      if (slot.used) visit(slot.call);
    }
    for (const auto& [key, call] : older_) visit(call);
  }

 private:
  static constexpr size_t kSlots = 16;  // 256 bytes a process
  struct Slot {
    uint64_t key = 0;
    uint32_t call = 0;
    bool used = false;  // any key may come from a damaged record: no key means "empty"
  };
  // The index's low bits: consecutive enters of a lane take consecutive slots.
  static size_t SlotOf(uint64_t key) { return static_cast<size_t>(key) % kSlots; }

  std::array<Slot, kSlots> recent_{};
  size_t recent_count_ = 0;
  absl::flat_hash_map<uint64_t, uint32_t> older_;
};

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_PENDING_CALLS_H_
