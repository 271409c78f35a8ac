// The reader side of the ring (format: ring_format.h), for the node agent and the
// post-mortem tools: validates and maps a ring file read-only and copies records out
// with the seqlock protocol. Never writes to the ring.
// Threading: one RingReader per thread; any number of readers per ring.
#ifndef COLLWATCH_RING_RING_READER_H_
#define COLLWATCH_RING_RING_READER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ring/call_path.h"
#include "ring/ring_format.h"

namespace collwatch {

// Who wrote a ring: copied from its header.
struct RingIdentity {
  std::string path;
  std::string host;
  std::string job;
  int32_t pid = 0;
  int32_t rank = ring::kUnset;
  int32_t local_rank = ring::kUnset;
  int32_t world_size = ring::kUnset;
  uint32_t lane_count = 0;
  uint64_t lane_capacity = 0;
  uint64_t start_realtime_ns = 0;
  uint64_t start_monotonic_ns = 0;
};

// A record and where it lives. Returns written in place are presented as a kEnter
// followed by a kReturn with the kEnter's (lane, index): the same view a separate kReturn
// record gives.
struct IndexedRecord {
  IndexedRecord() = default;
  // For emplace_back: a record made in place, not copied in (144 bytes, millions a trace).
  IndexedRecord(uint32_t lane_in, uint64_t index_in, const ring::Record& record_in)
      : lane(lane_in), index(index_in), record(record_in) {}
  uint32_t lane = 0;
  uint64_t index = 0;
  ring::Record record{};
};

// Where reading a lane goes on from.
struct LaneCursor {
  uint64_t next = 0;           // first index not consumed
  bool enter_emitted = false;  // the kEnter at `next` was handed out, its return not yet
};

// The result of reading.
struct ReadBatch {
  std::vector<IndexedRecord> records;  // valid records, each lane's in its order
  uint64_t lost = 0;     // overwritten by a later lap before we read them
  uint64_t torn = 0;     // reserved but never completed by a writer that is gone
  uint64_t damaged = 0;  // slots holding what no write of the lane left (garbage)
};

class RingReader {
 public:
  // Opens and validates a ring file; a clear error for anything that is not a complete,
  // supported ring (wrong magic, truncated, unsupported version, bad geometry);
  // kUnavailable for a ring whose writer has not finished creating it (try again).
  static absl::StatusOr<std::unique_ptr<RingReader>> Open(const std::string& path);
  ~RingReader();
  RingReader(const RingReader&) = delete;
  RingReader& operator=(const RingReader&) = delete;

  const RingIdentity& identity() const { return identity_; }
  uint64_t write_index(uint32_t lane) const;   // records reserved in the lane
  uint64_t records_written() const;            // over all lanes
  uint64_t heartbeat_ns() const;
  uint64_t dropped() const;
  ring::WriterState writer_state() const;
  // The status the writer passed to exit() (ring_format.h Header::exit_code): set once
  // it exited through exit(); nullopt while it runs, after a kill or crash, or when the
  // status was not recorded.
  std::optional<int32_t> exit_code() const;

  // True while the writing process exists (same host only; a ring from another host
  // is judged by its heartbeat instead).
  bool WriterProcessAlive() const;

  // Appends to `out` the valid records of `lane` from `cursor` on, at most
  // `max_records`, and moves the cursor. A reserved record not yet committed, or a call
  // still waiting for its in-place return, stops the read there (the writer is still at
  // it) unless `writer_gone`: then a record never committed is counted as torn and a
  // call never returned stays a lone kEnter.
  void ReadLane(uint32_t lane, LaneCursor* cursor, size_t max_records, bool writer_gone,
                ReadBatch* out) const;

  // Every lane from its start, merged in time order (each lane's own order kept).
  ReadBatch ReadAll(bool writer_gone) const;

  // A name of the ring's string table by id: an NVTX region, a call path's file or
  // function ("" when it cannot be read: see ReadName).
  std::string Name(uint32_t id) const;
  // The name behind `id` (nonzero), or nullopt when no write of the ring left one there:
  // an id past the table, a slot not ready (never written, or its writer died in it), a
  // length beyond the slot, or text that does not hash to the slot's hash. A name the
  // writer cut to fit (kMaxStringBytes, less up to 3 bytes of a split UTF-8 sequence) is
  // hashed whole, so its text cannot be checked: a damaged text there goes unnoticed.
  std::optional<std::string> ReadName(uint32_t id) const;
  // A call path by id (nullopt when unknown, not yet written or damaged: more frames than
  // a slot holds, or a frame naming a file or function ReadName cannot read). A path of
  // no frames (none could be described) is an empty path.
  std::optional<CallPath> ReadCallPath(uint32_t id) const;

 private:
  RingReader() = default;
  enum class SlotRead { kValid, kNotCommitted, kOverwritten, kDamaged };
  SlotRead ReadSlot(uint32_t lane, uint64_t index, ring::Record* out, bool* returned) const;
  SlotRead OtherSlotRead(uint32_t lane, uint64_t index, uint64_t holds) const;
  const ring::LaneHeader* LaneHead(uint32_t lane) const;

  RingIdentity identity_;
  const char* base_ = nullptr;
  size_t mapped_bytes_ = 0;
  const ring::Header* header_ = nullptr;
  const char* lanes_ = nullptr;
  const ring::StringSlot* strings_ = nullptr;
  const ring::CallPathSlot* call_paths_ = nullptr;
};

// Ring files (*.ring) directly inside `dir`, sorted by name.
absl::StatusOr<std::vector<std::string>> ListRingFiles(const std::string& dir);

}  // namespace collwatch

#endif  // COLLWATCH_RING_RING_READER_H_
