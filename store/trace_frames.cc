// The framed files of the trace store: headers, checksummed frames, scans that tell a
// torn tail from damage, and the index entries of events frames (see trace_frames.h).
// Threading: pure functions and single-call file I/O; no state.
#include "store/trace_frames.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <utility>

#include "files/safe_files.h"
#include "store/crc32c.h"
#include "store/event_codec.h"

namespace collwatch {
namespace {

void PutU32(char* out, uint32_t value) { std::memcpy(out, &value, 4); }  // x86-64: little endian
uint32_t GetU32(const char* in) {
  uint32_t value;
  std::memcpy(&value, in, 4);
  return value;
}

absl::Status ReadWholeFile(const std::string& path, std::string* bytes) {
  // Only a regular file: a FIFO or a device in a trace's place is an error, not a hang
  // or a read without end.
  absl::StatusOr<int> opened = OpenRegularFile(path);
  if (!opened.ok()) return opened.status();
  const int fd = *opened;
  bytes->clear();
  char buffer[1 << 16];
  while (true) {
    const ssize_t got = read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      close(fd);
      return store::Errno(absl::StrCat("read ", path));
    }
    if (got == 0) break;
    bytes->append(buffer, static_cast<size_t>(got));
  }
  close(fd);
  return absl::OkStatus();
}

// The whole file in memory, as a source of bytes for the scan below (FramedFileReader is
// the other: the file read in place).
class WholeBytes {
 public:
  explicit WholeBytes(const std::string& bytes) : bytes_(bytes) {}
  uint64_t size() const { return bytes_.size(); }
  std::string_view Bytes(uint64_t offset, uint64_t length) const {
    return std::string_view(bytes_).substr(offset, length);
  }
  absl::Status error() const { return absl::OkStatus(); }

 private:
  const std::string& bytes_;
};

// The end of the frame that starts at `offset` of `source` when one does (its length fits
// the file and its checksum holds), else 0.
template <typename Source>
uint64_t FrameEndAt(Source& source, uint64_t offset) {
  const uint64_t size = source.size();
  if (size - offset < store::kFrameHeaderBytes) return 0;
  const std::string_view header = source.Bytes(offset, store::kFrameHeaderBytes);
  if (header.size() < store::kFrameHeaderBytes) return 0;
  const uint32_t length = GetU32(header.data());
  const uint32_t checksum = GetU32(header.data() + 4);
  if (length == 0 || length > store::kMaxFramePayloadBytes) return 0;
  const uint64_t end = offset + store::kFrameHeaderBytes + length;
  if (end > size) return 0;
  const std::string_view payload = source.Bytes(offset + store::kFrameHeaderBytes, length);
  if (payload.size() < length) return 0;
  return Crc32c(payload.data(), length) == checksum ? end : 0;
}

// Where the first good frame after the bad byte at `offset` starts (size: none). A
// candidate must begin with a record tag the store writes before its checksum is
// computed: the search costs a checksum only where a frame could plausibly be.
template <typename Source>
uint64_t NextFrameAfter(Source& source, uint64_t offset) {
  const uint64_t size = source.size();
  for (uint64_t at = offset + 1; at + store::kFrameHeaderBytes < size; ++at) {
    const std::string_view tag_byte = source.Bytes(at + store::kFrameHeaderBytes, 1);
    if (tag_byte.empty()) return size;
    const auto tag = static_cast<uint8_t>(tag_byte[0]);
    const bool known = tag == store::kTagIdentity || tag == store::kTagEvents || tag == store::kTagRegion ||
                       tag == store::kTagStatus || tag == store::kTagCallPath || tag == store::kTagStacks;
    if (known && FrameEndAt(source, at) != 0) return at;
  }
  return size;
}

template <typename Source>
bool AllZero(Source& source, uint64_t from) {
  constexpr uint64_t kPiece = 1 << 16;
  for (uint64_t at = from; at < source.size(); at += kPiece) {
    const std::string_view piece = source.Bytes(at, std::min(kPiece, source.size() - at));
    if (piece.empty() || !std::all_of(piece.begin(), piece.end(), [](char c) { return c == 0; })) return false;
  }
  return true;
}

// Every frame of `source` (the file `path`), damage skipped and counted, up to a torn tail.
template <typename Source>
absl::StatusOr<LogScan> ScanFrames(Source& source, const std::string& path, uint64_t magic) {
  LogScan scan;
  scan.file_bytes = source.size();
  if (source.size() < store::kFileHeaderBytes) return scan;  // torn while being created
  const std::string_view header = source.Bytes(0, store::kFileHeaderBytes);
  if (!source.error().ok()) return source.error();
  uint64_t file_magic;
  std::memcpy(&file_magic, header.data(), 8);
  if (file_magic != magic) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a collwatch trace file (wrong magic)"));
  }
  if (const uint32_t version = GetU32(header.data() + 8); version != store::kVersion) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": trace format version ", version,
                                                   ", this build reads ", store::kVersion));
  }
  uint64_t offset = store::kFileHeaderBytes;
  const uint64_t size = source.size();
  while (offset < size) {
    if (const uint64_t end = FrameEndAt(source, offset); end != 0) {
      const std::string_view tag = source.Bytes(offset + store::kFrameHeaderBytes, 1);
      scan.frames.push_back(FrameInfo{offset, end - offset, static_cast<uint8_t>(tag.empty() ? 0 : tag[0])});
      offset = end;
      continue;
    }
    // A crash leaves only the end bad: a frame cut short, or zeros the file system added.
    // Bad bytes with a good frame after them are damage: skipped, counted, read on from
    // that frame.
    if (AllZero(source, offset)) break;
    const uint64_t next = NextFrameAfter(source, offset);
    if (next == size) break;
    if (scan.damaged_bytes == 0) scan.first_damage_offset = offset;
    scan.damaged_bytes += next - offset;
    ++scan.damaged_regions;
    offset = next;
  }
  if (!source.error().ok()) return source.error();
  scan.valid_end = offset;
  return scan;
}

}  // namespace

namespace store {

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

std::string FileHeader(uint64_t magic) {
  std::string header(store::kFileHeaderBytes, '\0');
  std::memcpy(header.data(), &magic, 8);
  PutU32(header.data() + 8, store::kVersion);
  return header;
}

// Appends one frame holding `message` to `out`.
void AppendFrame(const google::protobuf::MessageLite& message, std::string* out) {
  const size_t payload = message.ByteSizeLong();
  const size_t start = out->size();
  out->resize(start + store::kFrameHeaderBytes + payload);
  char* frame = out->data() + start;
  message.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(frame + store::kFrameHeaderBytes));
  PutU32(frame, static_cast<uint32_t>(payload));
  PutU32(frame + 4, Crc32c(frame + store::kFrameHeaderBytes, payload));
}

absl::Status WriteAll(int fd, const std::string& bytes, uint64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t wrote = pwrite(fd, bytes.data() + done, bytes.size() - done,
                                 static_cast<off_t>(offset + done));
    if (wrote < 0) {
      if (errno == EINTR) continue;
      return Errno(absl::StrCat("write ", path));
    }
    done += static_cast<size_t>(wrote);
  }
  return absl::OkStatus();
}

// The index entry that describes an events frame.
v1::StoreIndexEntry EntryFor(const FrameInfo& frame, const v1::StoredEvents& events) {
  v1::StoreIndexEntry entry;
  entry.set_offset(frame.offset);
  entry.set_length(frame.length);
  entry.set_events(static_cast<uint64_t>(events.events_size()));
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> lanes;
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> comms;
  for (const v1::Event& event : events.events()) {
    const uint64_t position = LanePosition(event);
    auto [lane, new_lane] = lanes.try_emplace(event.lane(), position, position);
    if (!new_lane) {
      lane->second.first = std::min(lane->second.first, position);
      lane->second.second = std::max(lane->second.second, position);
    }
    if (event.comm_id() == 0) continue;
    auto [comm, new_comm] = comms.try_emplace(event.comm_id(), event.seq(), event.seq());
    if (!new_comm) {
      comm->second.first = std::min(comm->second.first, event.seq());
      comm->second.second = std::max(comm->second.second, event.seq());
    }
  }
  for (const auto& [lane, range] : lanes) {
    v1::LaneRange* out = entry.add_lanes();
    out->set_lane(lane);
    out->set_first_position(range.first);
    out->set_last_position(range.second);
  }
  for (const auto& [comm_id, range] : comms) {
    v1::CommRange* out = entry.add_comms();
    out->set_comm_id(comm_id);
    out->set_min_seq(range.first);
    out->set_max_seq(range.second);
  }
  return entry;
}

// Index entries of `index_path` that describe `log_frames` in order: the longest
// matching prefix. `*index_valid_end` is where that prefix ends in the index file.
std::vector<v1::StoreIndexEntry> MatchingIndexPrefix(const std::string& index_path,
                                                     const std::vector<FrameInfo>& log_frames,
                                                     uint64_t* index_valid_end) {
  std::vector<v1::StoreIndexEntry> entries;
  *index_valid_end = 0;
  std::string bytes;
  absl::StatusOr<LogScan> scan = collwatch::ScanFramedFile(index_path, store::kIndexMagic, &bytes);
  if (!scan.ok()) return entries;  // missing or damaged: rebuilt from the log
  *index_valid_end = store::kFileHeaderBytes;
  size_t next_log = 0;
  for (const FrameInfo& frame : scan->frames) {
    while (next_log < log_frames.size() && log_frames[next_log].tag != store::kTagEvents) ++next_log;
    if (next_log == log_frames.size()) break;
    absl::StatusOr<v1::StoreIndexEntry> entry = DecodeFrame<v1::StoreIndexEntry>(bytes, frame, index_path);
    if (!entry.ok() || entry->offset() != log_frames[next_log].offset ||
        entry->length() != log_frames[next_log].length) {
      break;
    }
    entries.push_back(*std::move(entry));
    *index_valid_end = frame.offset + frame.length;
    ++next_log;
  }
  return entries;
}

}  // namespace store

absl::StatusOr<LogScan> ScanFramedFile(const std::string& path, uint64_t magic, std::string* bytes) {
  if (absl::Status read = ReadWholeFile(path, bytes); !read.ok()) return read;
  WholeBytes source(*bytes);
  return ScanFrames(source, path, magic);
}

namespace store {

absl::StatusOr<std::unique_ptr<FramedFileReader>> FramedFileReader::Open(const std::string& path) {
  absl::StatusOr<int> opened = OpenRegularFile(path);
  if (!opened.ok()) return opened.status();
  struct stat info {};
  if (fstat(*opened, &info) != 0) {
    const absl::Status status = Errno(absl::StrCat("stat ", path));
    close(*opened);
    return status;
  }
  return std::unique_ptr<FramedFileReader>(new FramedFileReader(path, *opened, static_cast<uint64_t>(info.st_size)));
}

FramedFileReader::~FramedFileReader() {
  if (fd_ >= 0) close(fd_);
}

std::string_view FramedFileReader::Bytes(uint64_t offset, uint64_t length) {
  if (!error_.ok() || offset > size_ || length > size_ - offset) {
    if (error_.ok()) error_ = absl::DataLossError(absl::StrCat(path_, ": read past its end at offset ", offset));
    return {};
  }
  if (offset >= window_offset_ && offset + length <= window_offset_ + window_.size()) {
    return std::string_view(window_).substr(offset - window_offset_, length);
  }
  const uint64_t wanted = std::min(std::max(length, kWindowBytes), size_ - offset);
  window_.resize(wanted);
  uint64_t done = 0;
  while (done < wanted) {
    const ssize_t got = pread(fd_, window_.data() + done, wanted - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      error_ = got < 0 ? Errno(absl::StrCat("read ", path_))
                       : absl::DataLossError(absl::StrCat(path_, ": shorter than when it was opened"));
      window_.clear();
      return {};
    }
    done += static_cast<uint64_t>(got);
  }
  window_offset_ = offset;
  return std::string_view(window_).substr(0, length);
}

absl::StatusOr<LogScan> ScanFramedFile(FramedFileReader& file, uint64_t magic) {
  return ScanFrames(file, file.path(), magic);
}

}  // namespace store

}  // namespace collwatch
