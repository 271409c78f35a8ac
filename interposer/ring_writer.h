// The writer side of the ring (format: ring_format.h): creates the per-process ring
// file and appends records. Threading: Append() is lock-free and may be called from
// any number of threads at once; Create() runs once per process.
#ifndef COLLWATCH_INTERPOSER_RING_WRITER_H_
#define COLLWATCH_INTERPOSER_RING_WRITER_H_

#include <cstdint>
#include <memory>

#include "interposer/config.h"
#include "interposer/ring_format.h"

namespace collwatch {

class RingWriter {
 public:
  // Creates (or replaces a stale) ring file for this process and maps it. Returns
  // nullptr and writes one line on stderr when the folder is unwritable, the disk is
  // full or mapping fails: the caller then stops recording.
  // The interposer keeps its writer for the life of the process (release()).
  static std::unique_ptr<RingWriter> Create(const Config& config) noexcept;
  ~RingWriter();
  RingWriter(const RingWriter&) = delete;
  RingWriter& operator=(const RingWriter&) = delete;

  // Appends one record (its `commit` field is ignored) and returns its index.
  uint64_t Append(const ring::Record& record) noexcept {
    const uint64_t index = header_->write_index.fetch_add(1, std::memory_order_relaxed);
    ring::Record* slot = &records_[index & index_mask_];
    ring::CommitWord(slot).store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    ring::StorePayload(slot, record);
    ring::CommitWord(slot).store(index + 1, std::memory_order_release);
    return index;
  }

  void CountDropped() noexcept { header_->dropped.fetch_add(1, std::memory_order_relaxed); }
  void Heartbeat(uint64_t now_ns) noexcept {
    header_->heartbeat_ns.store(now_ns, std::memory_order_release);
  }
  void SetState(ring::WriterState state) noexcept {
    header_->writer_state.store(static_cast<uint32_t>(state), std::memory_order_release);
  }

  ring::StringSlot* strings() const noexcept { return strings_; }
  uint64_t string_capacity() const noexcept { return header_->string_capacity; }
  const char* path() const noexcept { return path_; }

 private:
  RingWriter() = default;

  ring::Header* header_ = nullptr;
  ring::Record* records_ = nullptr;
  ring::StringSlot* strings_ = nullptr;
  uint64_t index_mask_ = 0;
  char path_[512] = {};
};


}  // namespace collwatch

#endif  // COLLWATCH_INTERPOSER_RING_WRITER_H_
