// The writer side of the ring (format: ring_format.h): creates the per-process ring
// file, hands out lanes to threads and appends records. Threading: Append to an owned
// lane only from its owner thread; Append to the shared lane (0) from any thread;
// ClaimLane/ReleaseLane from any thread; Create() runs once per process.
#ifndef COLLWATCH_INTERPOSER_RING_WRITER_H_
#define COLLWATCH_INTERPOSER_RING_WRITER_H_

#include <cstdint>
#include <memory>

#include "interposer/config.h"
#include "ring/ring_format.h"

namespace collwatch {

// How big a ring is made: the default, or smaller where the ring folder's file system
// (RAM, on /dev/shm) has little free, down to a floor that still holds enough history to
// show where ranks part.
struct RingGeometry {
  uint64_t lane_capacity = 0;       // records per lane, a power of two
  uint64_t string_capacity = 0;
  uint64_t call_path_capacity = 0;
  uint64_t bytes = 0;               // the file (ring::RingFileBytes)
  uint64_t floor_bytes = 0;         // the smallest ring it would make
  bool fits = false;                // bytes <= the free space
};
// Records per lane, names and call paths below which a ring is not shrunk.
inline constexpr uint64_t kFloorLaneRecords = 1024;
inline constexpr uint64_t kFloorStrings = 1024;
inline constexpr uint64_t kFloorCallPaths = 256;
// A ring takes at most this share of what is free: the node's other ranks need theirs.
inline constexpr uint64_t kFreeSpaceShare = 4;

// The ring `config` asks for, halved (lanes, names, call paths alike) while it is over
// free_bytes / kFreeSpaceShare and above the floor. COLLWATCH_RING_RECORDS, when set,
// is taken as it is.
RingGeometry SizeRing(const Config& config, uint64_t free_bytes) noexcept;

class RingWriter {
 public:
  // Creates the ring file for this process (never over another process's: ring_claim.h),
  // sized by SizeRing to the folder's free space, and maps it. Returns nullptr and writes one line on stderr when
  // the folder is not private to this user (ring_directory.h), is unwritable, the disk is
  // full, the ring would pass the file size limit or mapping fails: the caller then stops
  // recording. Where the folder could take the ring but for its size, a note says why
  // (ring/ring_notes.h), for the report. The interposer keeps
  // its writer for the life of the process (release()).
  static std::unique_ptr<RingWriter> Create(const Config& config) noexcept;
  ~RingWriter();
  RingWriter(const RingWriter&) = delete;
  RingWriter& operator=(const RingWriter&) = delete;

  static constexpr uint32_t kSharedLane = 0;

  // A free owned lane for thread `tid`, or kSharedLane when all are taken.
  uint32_t ClaimLane(uint32_t tid) noexcept;
  // The owner thread is gone: the lane may be claimed again (its indices continue).
  void ReleaseLane(uint32_t lane) noexcept;

  // Appends one record (its `commit` field is ignored) to `lane` and returns its index.
  uint64_t Append(uint32_t lane, const ring::Record& record) noexcept {
    ring::LaneHeader* head = LaneHead(lane);
    uint64_t index;
    if (lane == kSharedLane) {
      index = head->write_index.fetch_add(1, std::memory_order_relaxed);
    } else {  // one writer: no read-modify-write needed
      index = head->write_index.load(std::memory_order_relaxed);
      head->write_index.store(index + 1, std::memory_order_relaxed);
    }
    ring::Record* slot = Slot(lane, index);
    if (lane == kSharedLane) {
      if (!ClaimSharedSlot(slot, index)) {
        CountDropped();  // another writer is inside the slot, or a later lap took it
        return index;
      }
    } else {
      ring::CommitWord(slot).store(0, std::memory_order_relaxed);
    }
    std::atomic_thread_fence(std::memory_order_release);
    ring::StorePayload(slot, record);
    ring::CommitWord(slot).store(index + 1, std::memory_order_release);
    return index;
  }

  // Writes the return of the kEnter at (owned `lane`, `index`) into its own slot;
  // `flags` are the record's flags with the return's added.
  void ReturnInPlace(uint32_t lane, uint64_t index, uint64_t return_ns, int32_t result,
                     uint8_t flags) noexcept {
    ring::Record* slot = Slot(lane, index);
    __atomic_store_n(&slot->return_ns, return_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->result, result, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->flags, flags, __ATOMIC_RELAXED);
    ring::CommitWord(slot).store((index + 1) | ring::kCommitReturned, std::memory_order_release);
  }

  // Records reserved so far over all lanes (the watcher's activity probe).
  uint64_t RecordsReserved() const noexcept {
    uint64_t total = 0;
    for (uint32_t lane = 0; lane < lane_count_; ++lane) {
      total += LaneHead(lane)->write_index.load(std::memory_order_relaxed);
    }
    return total;
  }

  void CountDropped() noexcept { header_->dropped.fetch_add(1, std::memory_order_relaxed); }

  // Step 2 on the shared lane (ring_format.h): marks `slot` as being written with record
  // `index`, unless another writer is inside it or it holds this record or a later one.
  static bool ClaimSharedSlot(ring::Record* slot, uint64_t index) noexcept {
    uint64_t seen = ring::CommitWord(slot).load(std::memory_order_relaxed);
    for (int attempt = 0; attempt < 4; ++attempt) {
      if ((seen & ring::kCommitWriting) != 0 || (seen & ~ring::kCommitReturned) >= index + 1) return false;
      if (ring::CommitWord(slot).compare_exchange_weak(seen, ring::kCommitWriting | (index + 1),
                                                       std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;  // contended past a few tries: never wait
  }
  void Heartbeat(uint64_t now_ns) noexcept {
    header_->heartbeat_ns.store(now_ns, std::memory_order_release);
  }
  void SetState(ring::WriterState state) noexcept {
    header_->writer_state.store(static_cast<uint32_t>(state), std::memory_order_release);
  }
  // The status passed to exit(); published by the SetState(kExited) that follows.
  void RecordExitCode(int32_t exit_code) noexcept {
    header_->exit_code.store(exit_code, std::memory_order_relaxed);
  }

  ring::StringSlot* strings() const noexcept { return strings_; }
  uint64_t string_capacity() const noexcept { return header_->string_capacity; }
  ring::CallPathSlot* call_paths() const noexcept { return call_paths_; }
  uint64_t call_path_capacity() const noexcept { return header_->call_path_capacity; }
  const char* path() const noexcept { return path_; }

 private:
  RingWriter() = default;
  ring::LaneHeader* LaneHead(uint32_t lane) const noexcept {
    return reinterpret_cast<ring::LaneHeader*>(lanes_ + lane * lane_bytes_);
  }
  ring::Record* Slot(uint32_t lane, uint64_t index) const noexcept {
    return reinterpret_cast<ring::Record*>(lanes_ + lane * lane_bytes_ + ring::kLaneHeaderBytes) +
           (index & index_mask_);
  }

  ring::Header* header_ = nullptr;
  char* lanes_ = nullptr;
  uint64_t lane_bytes_ = 0;
  uint32_t lane_count_ = 0;
  ring::StringSlot* strings_ = nullptr;
  ring::CallPathSlot* call_paths_ = nullptr;
  uint64_t index_mask_ = 0;
  char path_[512] = {};
};

}  // namespace collwatch

#endif  // COLLWATCH_INTERPOSER_RING_WRITER_H_
