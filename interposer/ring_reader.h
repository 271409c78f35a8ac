// The reader side of the ring (format: ring_format.h), for the node agent and the
// post-mortem tools: validates and maps a ring file read-only and copies records out
// with the seqlock protocol. Never writes to the ring.
// Threading: one RingReader per thread; any number of readers per ring.
#ifndef COLLWATCH_INTERPOSER_RING_READER_H_
#define COLLWATCH_INTERPOSER_RING_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "interposer/ring_format.h"

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
  uint64_t record_capacity = 0;
  uint64_t start_realtime_ns = 0;
  uint64_t start_monotonic_ns = 0;
};

struct IndexedRecord {
  uint64_t index = 0;
  ring::Record record{};
};

// The result of reading a span of indices.
struct ReadBatch {
  std::vector<IndexedRecord> records;  // valid records, in index order
  uint64_t lost = 0;  // overwritten by a later lap before we read them
  uint64_t torn = 0;  // reserved but never completed by a writer that is gone
  uint64_t next = 0;  // first index not consumed: read from here next time
};

class RingReader {
 public:
  // Opens and validates a ring file; a clear error for anything that is not a complete,
  // supported ring (wrong magic, truncated, unsupported version, bad geometry).
  static absl::StatusOr<std::unique_ptr<RingReader>> Open(const std::string& path);
  ~RingReader();
  RingReader(const RingReader&) = delete;
  RingReader& operator=(const RingReader&) = delete;

  const RingIdentity& identity() const { return identity_; }
  uint64_t write_index() const;
  uint64_t heartbeat_ns() const;
  uint64_t dropped() const;
  ring::WriterState writer_state() const;

  // True while the writing process exists (same host only; a ring from another host
  // is judged by its heartbeat instead).
  bool WriterProcessAlive() const;

  // Reads valid records with indices in [from, write_index), at most `max_records`.
  // A reserved record not yet committed stops the read there (its writer may still be
  // finishing it) unless `writer_gone`: then it is counted as torn and skipped.
  ReadBatch ReadFrom(uint64_t from, size_t max_records, bool writer_gone) const;

  // Name of an NVTX region id ("" when unknown or not yet written).
  std::string RegionName(uint32_t id) const;

 private:
  RingReader() = default;
  enum class SlotRead { kValid, kNotCommitted, kOverwritten };
  SlotRead ReadSlot(uint64_t index, ring::Record* out) const;

  RingIdentity identity_;
  const char* base_ = nullptr;
  size_t mapped_bytes_ = 0;
  const ring::Header* header_ = nullptr;
  const ring::Record* records_ = nullptr;
  const ring::StringSlot* strings_ = nullptr;
};

// Ring files (*.ring) directly inside `dir`, sorted by name.
absl::StatusOr<std::vector<std::string>> ListRingFiles(const std::string& dir);

}  // namespace collwatch

#endif  // COLLWATCH_INTERPOSER_RING_READER_H_
