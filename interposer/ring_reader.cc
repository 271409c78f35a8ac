// Read-only access to ring files. Threading: see ring_reader.h.
#include "interposer/ring_reader.h"

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

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace collwatch {
namespace {

std::string BoundedString(const char* text, size_t capacity) {
  return std::string(text, strnlen(text, capacity));
}

absl::Status Invalid(const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": not a readable collwatch ring: ", why));
}

}  // namespace

absl::StatusOr<std::unique_ptr<RingReader>> RingReader::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(errno)));
  struct stat info {};
  if (fstat(fd, &info) != 0) {
    close(fd);
    return absl::InternalError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  const auto file_bytes = static_cast<uint64_t>(info.st_size);
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
  if (magic != ring::kMagic) {
    return Invalid(path, magic == 0 ? "header not written yet (writer still starting, or died "
                                      "while creating it)"
                                    : "wrong magic");
  }
  if (header->version != ring::kVersion) {
    return Invalid(path, absl::StrCat("format version ", header->version, ", this build reads ",
                                      ring::kVersion));
  }
  if (header->header_bytes != ring::kHeaderBytes || header->record_bytes != ring::kRecordBytes ||
      header->string_slot_bytes != ring::kStringSlotBytes) {
    return Invalid(path, "record, header or string slot size differs from this build");
  }
  const uint64_t capacity = header->record_capacity;
  const uint64_t strings = header->string_capacity;
  if (capacity == 0 || (capacity & (capacity - 1)) != 0 || capacity > (1ull << 32) ||
      strings > (1ull << 24)) {
    return Invalid(path, "implausible capacities");
  }
  const uint64_t records_end = header->records_offset + capacity * ring::kRecordBytes;
  const uint64_t strings_end = header->strings_offset + strings * ring::kStringSlotBytes;
  if (header->file_bytes != file_bytes || header->records_offset < ring::kHeaderBytes ||
      header->strings_offset < ring::kHeaderBytes || records_end > file_bytes ||
      strings_end > file_bytes || header->records_offset % 8 != 0 ||
      header->strings_offset % 8 != 0) {
    return Invalid(path, absl::StrCat("truncated or inconsistent: header says ", header->file_bytes,
                                      " bytes, file has ", file_bytes));
  }
  reader->header_ = header;
  reader->records_ = reinterpret_cast<const ring::Record*>(reader->base_ + header->records_offset);
  reader->strings_ = reinterpret_cast<const ring::StringSlot*>(reader->base_ + header->strings_offset);
  RingIdentity& id = reader->identity_;
  id.path = path;
  id.host = BoundedString(header->host, sizeof header->host);
  id.job = BoundedString(header->job, sizeof header->job);
  id.pid = header->pid;
  id.rank = header->rank;
  id.local_rank = header->local_rank;
  id.world_size = header->world_size;
  id.record_capacity = capacity;
  id.start_realtime_ns = header->start_realtime_ns;
  id.start_monotonic_ns = header->start_monotonic_ns;
  return reader;
}

RingReader::~RingReader() {
  if (base_ != nullptr) munmap(const_cast<char*>(base_), mapped_bytes_);
}

uint64_t RingReader::write_index() const {
  return header_->write_index.load(std::memory_order_acquire);
}
uint64_t RingReader::heartbeat_ns() const {
  return header_->heartbeat_ns.load(std::memory_order_acquire);
}
uint64_t RingReader::dropped() const { return header_->dropped.load(std::memory_order_relaxed); }
ring::WriterState RingReader::writer_state() const {
  return static_cast<ring::WriterState>(header_->writer_state.load(std::memory_order_acquire));
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

RingReader::SlotRead RingReader::ReadSlot(uint64_t index, ring::Record* out) const {
  const ring::Record* slot = &records_[index & (identity_.record_capacity - 1)];
  const uint64_t before = ring::CommitWord(slot).load(std::memory_order_acquire);
  if (before == index + 1) {
    ring::LoadPayload(slot, out);
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint64_t after = ring::CommitWord(slot).load(std::memory_order_relaxed);
    if (after == before) {
      out->commit = before;
      return SlotRead::kValid;
    }
    return SlotRead::kOverwritten;
  }
  return before > index + 1 ? SlotRead::kOverwritten : SlotRead::kNotCommitted;
}

ReadBatch RingReader::ReadFrom(uint64_t from, size_t max_records, bool writer_gone) const {
  ReadBatch batch;
  const uint64_t end = write_index();
  const uint64_t capacity = identity_.record_capacity;
  uint64_t index = from;
  if (end > capacity && index < end - capacity) {  // already overwritten
    batch.lost += end - capacity - index;
    index = end - capacity;
  }
  for (; index < end && batch.records.size() < max_records; ++index) {
    IndexedRecord item;
    item.index = index;
    switch (ReadSlot(index, &item.record)) {
      case SlotRead::kValid:
        batch.records.push_back(item);
        continue;
      case SlotRead::kOverwritten:
        ++batch.lost;
        continue;
      case SlotRead::kNotCommitted:
        // A later lap may have reserved (zeroed) the slot already: then it is lost.
        if (write_index() >= index + capacity) {
          ++batch.lost;
          continue;
        }
        if (writer_gone) {
          ++batch.torn;
          continue;
        }
        break;
    }
    break;  // wait for the writer to finish this record
  }
  batch.next = index;
  return batch;
}

std::string RingReader::RegionName(uint32_t id) const {
  if (id == 0 || id > header_->string_capacity) return "";
  const ring::StringSlot& slot = strings_[id - 1];
  if (slot.state.load(std::memory_order_acquire) != ring::kStringReady) return "";
  return std::string(slot.text, std::min<size_t>(slot.length, ring::kMaxStringBytes));
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
