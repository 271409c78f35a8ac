// Read-only access to ring files. Threading: see ring_reader.h.
#include "ring/ring_reader.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "files/safe_files.h"
#include "ring/hash.h"

namespace collwatch {
namespace {

std::string BoundedString(const char* text, size_t capacity) {
  return std::string(text, strnlen(text, capacity));
}

absl::Status Invalid(const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": not a readable collwatch ring: ", why));
}

// The writer creates the file, sizes it, then writes the header: until then the ring
// is not ready, which is no error while the writer lives.
absl::Status NotReady(const std::string& path) {
  return absl::UnavailableError(absl::StrCat(
      path, ": ring not ready: header not written yet (writer still starting, or died while "
            "creating it)"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<RingReader>> RingReader::Open(const std::string& path) {
  absl::StatusOr<int> opened = OpenRegularFile(path);  // a FIFO named *.ring must not hang us
  if (!opened.ok()) return opened.status();
  const int fd = *opened;
  struct stat info {};
  if (fstat(fd, &info) != 0) {
    close(fd);
    return absl::InternalError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  const auto file_bytes = static_cast<uint64_t>(info.st_size);
  if (file_bytes == 0) {
    close(fd);
    return NotReady(path);
  }
  if (file_bytes < ring::kHeaderBytes) {
    close(fd);
    return Invalid(path, absl::StrCat("file has ", file_bytes, " bytes, less than a header"));
  }
  void* map = mmap(nullptr, file_bytes, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return absl::InternalError(absl::StrCat(path, ": mmap: ", std::strerror(errno)));

  std::unique_ptr<RingReader> reader(new RingReader());
  reader->base_ = static_cast<const char*>(map);
  reader->mapped_bytes_ = file_bytes;
  const auto* header = reinterpret_cast<const ring::Header*>(reader->base_);
  const uint64_t magic = __atomic_load_n(&header->magic, __ATOMIC_ACQUIRE);
  if (magic == 0) return NotReady(path);
  if (magic != ring::kMagic) return Invalid(path, "wrong magic");
  if (header->version != ring::kVersion) {
    return Invalid(path, absl::StrCat("format version ", header->version, ", this build reads ",
                                      ring::kVersion));
  }
  if (header->header_bytes != ring::kHeaderBytes || header->record_bytes != ring::kRecordBytes ||
      header->string_slot_bytes != ring::kStringSlotBytes || header->call_path_slot_bytes != ring::kCallPathSlotBytes) {
    return Invalid(path, "record, header, string or call path slot size differs from this build");
  }
  const uint64_t capacity = header->lane_capacity;
  const uint64_t strings = header->string_capacity;
  const uint64_t call_paths = header->call_path_capacity;
  const uint32_t lanes = header->lane_count;
  if (capacity == 0 || (capacity & (capacity - 1)) != 0 || capacity > (1ull << 24) ||
      strings > (1ull << 24) || call_paths > (1ull << 24) || lanes == 0 || lanes > 1024 ||
      header->lane_header_bytes != ring::kLaneHeaderBytes ||
      header->lane_bytes != ring::LaneBytes(capacity)) {
    return Invalid(path, "implausible capacities");
  }
  // Each region within the file, compared without sums that could wrap (the capacities
  // are bounded above, the offsets are not).
  const auto fits = [&](uint64_t offset, uint64_t bytes) {
    return offset >= ring::kHeaderBytes && offset <= file_bytes && bytes <= file_bytes - offset;
  };
  if (header->file_bytes != file_bytes) {
    return Invalid(path, absl::StrCat("truncated or grown: header says ", header->file_bytes, " bytes, file has ",
                                      file_bytes));
  }
  if (!fits(header->lanes_offset, lanes * header->lane_bytes) ||
      !fits(header->strings_offset, strings * ring::kStringSlotBytes) ||
      !fits(header->call_paths_offset, call_paths * ring::kCallPathSlotBytes) || header->lanes_offset % 64 != 0 ||
      header->strings_offset % 8 != 0 || header->call_paths_offset % 8 != 0) {
    // The size matches, so what the header says of its parts is wrong (a damaged lane count,
    // capacity or offset): say what, not "header says N bytes, file has N".
    return Invalid(path, absl::StrCat("inconsistent header: its ", lanes, " lanes of ", header->lane_bytes,
                                      " bytes at offset ", header->lanes_offset, ", strings at ",
                                      header->strings_offset, " and call paths at ", header->call_paths_offset,
                                      " do not fit its ", file_bytes, " bytes"));
  }
  reader->header_ = header;
  reader->lanes_ = reader->base_ + header->lanes_offset;
  reader->strings_ = reinterpret_cast<const ring::StringSlot*>(reader->base_ + header->strings_offset);
  reader->call_paths_ = reinterpret_cast<const ring::CallPathSlot*>(reader->base_ + header->call_paths_offset);
  RingIdentity& id = reader->identity_;
  id.path = path;
  id.host = BoundedString(header->host, sizeof header->host);
  id.job = BoundedString(header->job, sizeof header->job);
  id.pid = header->pid;
  id.rank = header->rank;
  id.local_rank = header->local_rank;
  id.world_size = header->world_size;
  id.lane_count = lanes;
  id.lane_capacity = capacity;
  id.start_realtime_ns = header->start_realtime_ns;
  id.start_monotonic_ns = header->start_monotonic_ns;
  return reader;
}

RingReader::~RingReader() {
  if (base_ != nullptr) munmap(const_cast<char*>(base_), mapped_bytes_);
}

const ring::LaneHeader* RingReader::LaneHead(uint32_t lane) const {
  return reinterpret_cast<const ring::LaneHeader*>(lanes_ + lane * header_->lane_bytes);
}

uint64_t RingReader::write_index(uint32_t lane) const {
  return LaneHead(lane)->write_index.load(std::memory_order_acquire);
}

uint64_t RingReader::records_written() const {
  uint64_t total = 0;
  for (uint32_t lane = 0; lane < identity_.lane_count; ++lane) total += write_index(lane);
  return total;
}

uint64_t RingReader::heartbeat_ns() const {
  return header_->heartbeat_ns.load(std::memory_order_acquire);
}
uint64_t RingReader::dropped() const { return header_->dropped.load(std::memory_order_relaxed); }
ring::WriterState RingReader::writer_state() const {
  return static_cast<ring::WriterState>(header_->writer_state.load(std::memory_order_acquire));
}

std::optional<int32_t> RingReader::exit_code() const {
  if (writer_state() != ring::WriterState::kExited) return std::nullopt;  // acquire: publishes the code
  const int32_t code = header_->exit_code.load(std::memory_order_relaxed);
  if (code < 0 || code > 255) return std::nullopt;  // kUnset, or damage
  return code;
}

bool RingReader::WriterProcessAlive() const {
  char host[ring::kHostBytes] = {};
  gethostname(host, sizeof host - 1);
  if (identity_.host != host) return true;  // cannot tell from here
  if (kill(identity_.pid, 0) != 0 && errno != EPERM) return false;
  // A zombie (killed, not yet reaped by its parent) writes no more: it is gone.
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", identity_.pid);
  FILE* file = std::fopen(path, "r");
  if (file == nullptr) return true;
  char line[512] = {};
  const bool read = std::fgets(line, sizeof line, file) != nullptr;
  std::fclose(file);
  const char* after_name = read ? std::strrchr(line, ')') : nullptr;
  return after_name == nullptr || after_name[1] == '\0' || after_name[2] != 'Z';
}

// A slot at `index` whose commit word names another write: an earlier lap's or one not
// made yet (not committed), a later lap's (overwritten), or garbage, which no write of
// this lane leaves: an index of another slot, or one beyond what the lane reserved.
RingReader::SlotRead RingReader::OtherSlotRead(uint32_t lane, uint64_t index, uint64_t holds) const {
  if (holds == 0) return SlotRead::kNotCommitted;  // never written
  const uint64_t written = holds - 1;
  const uint64_t position_mask = identity_.lane_capacity - 1;
  if ((written & position_mask) != (index & position_mask)) return SlotRead::kDamaged;
  if (written < index) return SlotRead::kNotCommitted;
  return written < write_index(lane) ? SlotRead::kOverwritten : SlotRead::kDamaged;
}

RingReader::SlotRead RingReader::ReadSlot(uint32_t lane, uint64_t index, ring::Record* out,
                                          bool* returned) const {
  const auto* slot = reinterpret_cast<const ring::Record*>(
                         lanes_ + lane * header_->lane_bytes + ring::kLaneHeaderBytes) +
                     (index & (identity_.lane_capacity - 1));
  // The only change a valid record can see is its in-place return: then read again.
  for (int attempt = 0; attempt < 4; ++attempt) {
    const uint64_t before = ring::CommitWord(slot).load(std::memory_order_acquire);
    const uint64_t holds = before & ~(ring::kCommitReturned | ring::kCommitWriting);
    // Claimed by a shared-lane writer: this record not written yet, or another lap's.
    if ((before & ring::kCommitWriting) != 0) {
      return holds == index + 1 ? SlotRead::kNotCommitted : OtherSlotRead(lane, index, holds);
    }
    if (holds != index + 1) return OtherSlotRead(lane, index, holds);
    ring::LoadPayload(slot, out);
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint64_t after = ring::CommitWord(slot).load(std::memory_order_relaxed);
    if (after == before) {
      if (!ring::IsKnownRecordKind(out->kind)) return SlotRead::kDamaged;  // committed, but garbage
      out->commit = holds;
      *returned = (before & ring::kCommitReturned) != 0;
      return SlotRead::kValid;
    }
    if (after != (before | ring::kCommitReturned)) return SlotRead::kOverwritten;
  }
  return SlotRead::kNotCommitted;
}

namespace {

// The kEnter as it was written, before an in-place return added to it.
IndexedRecord EnterView(uint32_t lane, uint64_t index, const ring::Record& record) {
  IndexedRecord item{lane, index, record};
  item.record.flags &= static_cast<uint8_t>(~ring::kReturnFlags);
  item.record.return_ns = 0;
  item.record.result = 0;
  return item;
}

// The kReturn an in-place return stands for.
IndexedRecord ReturnView(uint32_t lane, uint64_t index, const ring::Record& record) {
  IndexedRecord item{lane, index, record};
  item.record.kind = static_cast<uint16_t>(ring::RecordKind::kReturn);
  item.record.t_ns = record.return_ns;
  item.record.ref_lane = static_cast<uint16_t>(lane);
  item.record.ref_index = index;
  return item;
}

}  // namespace

void RingReader::ReadLane(uint32_t lane, LaneCursor* cursor, size_t max_records, bool writer_gone,
                          ReadBatch* out) const {
  const uint64_t capacity = identity_.lane_capacity;
  const uint64_t end = write_index(lane);
  const size_t limit = out->records.size() + max_records;
  uint64_t index = cursor->next;
  if (end > capacity && index < end - capacity) {  // already overwritten
    out->lost += end - capacity - index;
    index = end - capacity;
    cursor->enter_emitted = false;
  }
  while (index < end && out->records.size() < limit) {
    ring::Record record{};
    bool returned = false;
    const SlotRead read = ReadSlot(lane, index, &record, &returned);
    if (read == SlotRead::kValid) {
      const bool in_place = record.kind == static_cast<uint16_t>(ring::RecordKind::kEnter) &&
                            (record.flags & ring::kFlagReturnsInPlace) != 0;
      if (!in_place) {
        out->records.push_back(IndexedRecord{lane, index, record});
      } else {
        if (!cursor->enter_emitted) out->records.push_back(EnterView(lane, index, record));
        if (returned) {
          out->records.push_back(ReturnView(lane, index, record));
        } else if (!writer_gone) {
          cursor->enter_emitted = true;  // its thread is inside the call: wait here
          break;
        }
      }
    } else if (read == SlotRead::kDamaged) {
      ++out->damaged;
    } else if (read == SlotRead::kOverwritten || write_index(lane) >= index + capacity) {
      ++out->lost;  // a later lap reserved (or wrote) this slot already
    } else if (writer_gone) {
      ++out->torn;
    } else {
      break;  // the writer is finishing this record
    }
    cursor->enter_emitted = false;
    ++index;
  }
  cursor->next = index;
}

ReadBatch RingReader::ReadAll(bool writer_gone) const {
  std::vector<ReadBatch> lanes(identity_.lane_count);
  ReadBatch all;
  size_t total = 0;
  for (uint32_t lane = 0; lane < identity_.lane_count; ++lane) {
    LaneCursor cursor;
    ReadLane(lane, &cursor, std::numeric_limits<size_t>::max(), writer_gone, &lanes[lane]);
    all.lost += lanes[lane].lost;
    all.torn += lanes[lane].torn;
    all.damaged += lanes[lane].damaged;
    total += lanes[lane].records.size();
  }
  // Merge by time, always taking the head of a lane, so each lane keeps its order.
  std::vector<size_t> heads(lanes.size(), 0);
  all.records.reserve(total);
  while (all.records.size() < total) {
    size_t best = lanes.size();
    for (size_t lane = 0; lane < lanes.size(); ++lane) {
      if (heads[lane] == lanes[lane].records.size()) continue;
      if (best == lanes.size() || lanes[lane].records[heads[lane]].record.t_ns <
                                      lanes[best].records[heads[best]].record.t_ns) {
        best = lane;
      }
    }
    all.records.push_back(lanes[best].records[heads[best]++]);
  }
  return all;
}

std::string RingReader::Name(uint32_t id) const { return ReadName(id).value_or(""); }

std::optional<std::string> RingReader::ReadName(uint32_t id) const {
  if (id == 0 || id > header_->string_capacity) return std::nullopt;
  const ring::StringSlot& slot = strings_[id - 1];
  if (slot.state.load(std::memory_order_acquire) != ring::kStringReady) return std::nullopt;
  const uint32_t length = slot.length;
  if (length > ring::kMaxStringBytes) return std::nullopt;  // no writer stores more than a slot holds
  std::string name(slot.text, length);
  // A name short of where the writer cuts is whole: its hash must match. Past it, the
  // name may have been cut (the hash is the whole name's) and cannot be checked.
  if (length < ring::kMaxStringBytes - 3 && Hash64(name.data(), name.size()) != slot.hash) return std::nullopt;
  return name;
}

std::optional<CallPath> RingReader::ReadCallPath(uint32_t id) const {
  if (id == 0 || id > header_->call_path_capacity) return std::nullopt;
  const ring::CallPathSlot& slot = call_paths_[id - 1];
  if (slot.state.load(std::memory_order_acquire) != ring::kStringReady) return std::nullopt;
  if (slot.frame_count > ring::kMaxCallPathFrames) return std::nullopt;
  CallPath path;
  path.truncated = (slot.flags & ring::kCallPathTruncated) != 0;
  // A frame's name id 0 is a name the writer could not intern (its table full): unknown
  // but no damage. Any other id must name a readable string.
  const auto name = [this](uint32_t name_id) -> std::optional<std::string> {
    return name_id == 0 ? std::optional<std::string>("") : ReadName(name_id);
  };
  for (uint16_t i = 0; i < slot.frame_count; ++i) {
    const ring::CallPathFrame& frame = slot.frames[i];
    std::optional<std::string> file = name(frame.file_id);
    std::optional<std::string> function = name(frame.function_id);
    if (!file || !function) return std::nullopt;
    path.frames.push_back({*std::move(file), *std::move(function), frame.line});
  }
  return path;
}

absl::StatusOr<std::vector<std::string>> ListRingFiles(const std::string& dir) {
  DIR* handle = opendir(dir.c_str());
  if (handle == nullptr) return absl::NotFoundError(absl::StrCat(dir, ": ", std::strerror(errno)));
  std::vector<std::string> paths;
  while (dirent* entry = readdir(handle)) {
    const std::string name = entry->d_name;
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".ring") == 0) {
      paths.push_back(absl::StrCat(dir, "/", name));
    }
  }
  closedir(handle);
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace collwatch
