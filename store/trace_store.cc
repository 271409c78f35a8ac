// The trace store: framed, checksummed, append-only logs with a derived index.
// Threading: see trace_store.h.
#include "store/trace_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ring/clocks.h"
#include "store/crc32c.h"
#include "store/event_codec.h"
#include "store/trace_store_format.h"

namespace collwatch {
namespace {

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

void PutU32(char* out, uint32_t value) { std::memcpy(out, &value, 4); }  // x86-64: little endian
uint32_t GetU32(const char* in) {
  uint32_t value;
  std::memcpy(&value, in, 4);
  return value;
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

absl::Status ReadWholeFile(const std::string& path, std::string* bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return Errno(absl::StrCat("open ", path));
  }
  bytes->clear();
  char buffer[1 << 16];
  while (true) {
    const ssize_t got = read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      close(fd);
      return Errno(absl::StrCat("read ", path));
    }
    if (got == 0) break;
    bytes->append(buffer, static_cast<size_t>(got));
  }
  close(fd);
  return absl::OkStatus();
}

bool AllZero(const std::string& bytes, size_t from) {
  return std::all_of(bytes.begin() + static_cast<std::ptrdiff_t>(from), bytes.end(),
                     [](char c) { return c == 0; });
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

template <typename Message>
absl::StatusOr<Message> DecodeFrame(const std::string& bytes, const FrameInfo& frame,
                                    const std::string& path) {
  Message message;
  if (!message.ParseFromArray(bytes.data() + frame.offset + store::kFrameHeaderBytes,
                              static_cast<int>(frame.length - store::kFrameHeaderBytes))) {
    return absl::DataLossError(absl::StrCat(path, ": frame at offset ", frame.offset,
                                            " passes its checksum but does not decode"));
  }
  return message;
}

// Index entries of `index_path` that describe `log_frames` in order: the longest
// matching prefix. `*index_valid_end` is where that prefix ends in the index file.
std::vector<v1::StoreIndexEntry> MatchingIndexPrefix(const std::string& index_path,
                                                     const std::vector<FrameInfo>& log_frames,
                                                     uint64_t* index_valid_end) {
  std::vector<v1::StoreIndexEntry> entries;
  *index_valid_end = 0;
  std::string bytes;
  absl::StatusOr<LogScan> scan = ScanFramedFile(index_path, store::kIndexMagic, &bytes);
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

bool SameProcess(const v1::RankIdentity& a, const v1::RankIdentity& b) {
  return a.job() == b.job() && a.host() == b.host() && a.pid() == b.pid() &&
         a.start_realtime_ns() == b.start_realtime_ns();
}

std::string SafeName(const std::string& text) {
  std::string out = text.empty() ? "unknown" : text;
  for (char& c : out) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_';
    if (!safe) c = '_';
  }
  return out.substr(0, 64);
}

}  // namespace

absl::StatusOr<LogScan> ScanFramedFile(const std::string& path, uint64_t magic, std::string* bytes) {
  if (absl::Status read = ReadWholeFile(path, bytes); !read.ok()) return read;
  LogScan scan;
  scan.file_bytes = bytes->size();
  if (bytes->size() < store::kFileHeaderBytes) return scan;  // torn while being created
  uint64_t file_magic;
  std::memcpy(&file_magic, bytes->data(), 8);
  if (file_magic != magic) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a collwatch trace file (wrong magic)"));
  }
  if (const uint32_t version = GetU32(bytes->data() + 8); version != store::kVersion) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": trace format version ", version,
                                                   ", this build reads ", store::kVersion));
  }
  uint64_t offset = store::kFileHeaderBytes;
  const uint64_t size = bytes->size();
  while (offset < size) {
    if (size - offset < store::kFrameHeaderBytes) break;  // torn frame header
    const uint32_t length = GetU32(bytes->data() + offset);
    const uint32_t crc = GetU32(bytes->data() + offset + 4);
    const uint64_t end = offset + store::kFrameHeaderBytes + length;
    if (end > size) break;  // torn payload
    const char* payload = bytes->data() + offset + store::kFrameHeaderBytes;
    const bool valid = length > 0 && length <= store::kMaxFramePayloadBytes &&
                       Crc32c(payload, length) == crc;
    if (!valid) {
      // A crash leaves only the last frame bad (or zeros the file system added).
      if (end == size || AllZero(*bytes, offset)) break;
      return absl::DataLossError(absl::StrCat(
          path, ": the frame at offset ", offset, " fails its checksum and ", size - end,
          " bytes follow it: the file is damaged, not cut short by a crash. It was left as "
          "it is; move the folder aside to start a new trace for this rank"));
    }
    scan.frames.push_back(FrameInfo{offset, end - offset, static_cast<uint8_t>(payload[0])});
    offset = end;
  }
  scan.valid_end = offset;
  return scan;
}

// ---------------------------------------------------------------------------------------
// RankTraceWriter

absl::StatusOr<std::unique_ptr<RankTraceWriter>> RankTraceWriter::Open(
    const std::string& dir, const v1::RankIdentity& identity, StoreOptions options) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return absl::InternalError(absl::StrCat("create ", dir, ": ", error.message()));
  std::unique_ptr<RankTraceWriter> writer(new RankTraceWriter());
  writer->dir_ = dir;
  writer->options_ = options;
  const std::string log_path = absl::StrCat(dir, "/", store::kLogFileName);
  const std::string index_path = absl::StrCat(dir, "/", store::kIndexFileName);
  writer->log_fd_ = open(log_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (writer->log_fd_ < 0) return Errno(absl::StrCat("open ", log_path));
  writer->index_fd_ = open(index_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (writer->index_fd_ < 0) return Errno(absl::StrCat("open ", index_path));
  if (absl::Status recovered = writer->Recover(identity); !recovered.ok()) return recovered;
  return writer;
}

absl::Status RankTraceWriter::Recover(const v1::RankIdentity& identity) {
  const std::string log_path = absl::StrCat(dir_, "/", store::kLogFileName);
  const std::string index_path = absl::StrCat(dir_, "/", store::kIndexFileName);
  std::string bytes;
  absl::StatusOr<LogScan> scan = ScanFramedFile(log_path, store::kLogMagic, &bytes);
  if (!scan.ok()) return scan.status();
  const bool fresh = scan->frames.empty() || scan->frames[0].tag != store::kTagIdentity;
  if (fresh) {
    // Nothing usable yet (new, or torn before its identity frame was whole): start over.
    if (ftruncate(log_fd_, 0) != 0 || ftruncate(index_fd_, 0) != 0) return Errno("truncate " + dir_);
    torn_bytes_cut_ = scan->file_bytes;
    std::string head = FileHeader(store::kLogMagic);
    v1::StoreRecord record;
    *record.mutable_identity() = identity;
    AppendFrame(record, &head);
    if (absl::Status wrote = WriteAll(log_fd_, head, 0, log_path); !wrote.ok()) return wrote;
    if (options_.fsync && fdatasync(log_fd_) != 0) return Errno("fdatasync " + log_path);
    log_end_ = head.size();
    const std::string index_head = FileHeader(store::kIndexMagic);
    if (absl::Status wrote = WriteAll(index_fd_, index_head, 0, index_path); !wrote.ok()) return wrote;
    index_end_ = index_head.size();
    return absl::OkStatus();
  }
  absl::StatusOr<v1::StoreRecord> first = DecodeFrame<v1::StoreRecord>(bytes, scan->frames[0], log_path);
  if (!first.ok()) return first.status();
  if (!SameProcess(first->identity(), identity)) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir_, " holds the trace of job ", first->identity().job(), " pid ", first->identity().pid(),
        " on ", first->identity().host(), ", not of this stream's process"));
  }
  if (scan->valid_end < scan->file_bytes) {
    if (ftruncate(log_fd_, static_cast<off_t>(scan->valid_end)) != 0) return Errno("truncate " + log_path);
    torn_bytes_cut_ = scan->file_bytes - scan->valid_end;
  }
  log_end_ = scan->valid_end;

  std::vector<v1::StoreIndexEntry> entries = MatchingIndexPrefix(index_path, scan->frames, &index_end_);
  if (index_end_ == 0) {
    const std::string index_head = FileHeader(store::kIndexMagic);
    if (absl::Status wrote = WriteAll(index_fd_, index_head, 0, index_path); !wrote.ok()) return wrote;
    index_end_ = index_head.size();
  }
  if (ftruncate(index_fd_, static_cast<off_t>(index_end_)) != 0) return Errno("truncate " + index_path);
  for (const v1::StoreIndexEntry& entry : entries) NoteIndexEntry(entry);

  size_t indexed = 0;
  std::string missing_entries;
  for (const FrameInfo& frame : scan->frames) {
    if (frame.tag == store::kTagEvents) {
      if (indexed < entries.size()) {
        ++indexed;
        continue;
      }
      absl::StatusOr<v1::StoreRecord> record = DecodeFrame<v1::StoreRecord>(bytes, frame, log_path);
      if (!record.ok()) return record.status();
      v1::StoreIndexEntry entry = EntryFor(frame, record->events());
      NoteIndexEntry(entry);
      AppendFrame(entry, &missing_entries);
    } else if (frame.tag == store::kTagRegion || frame.tag == store::kTagStatus) {
      absl::StatusOr<v1::StoreRecord> record = DecodeFrame<v1::StoreRecord>(bytes, frame, log_path);
      if (!record.ok()) return record.status();
      if (record->has_region()) regions_[record->region().id()] = record->region().name();
      if (record->has_status()) status_ = record->status();
    }
  }
  if (!missing_entries.empty()) {
    if (absl::Status wrote = WriteAll(index_fd_, missing_entries, index_end_, index_path); !wrote.ok()) {
      return wrote;
    }
    index_end_ += missing_entries.size();
  }
  return absl::OkStatus();
}

void RankTraceWriter::NoteIndexEntry(const v1::StoreIndexEntry& entry) {
  events_ += entry.events();
  for (const v1::LaneRange& lane : entry.lanes()) {
    uint64_t& next = next_position_[lane.lane()];
    next = std::max(next, lane.last_position() + 1);
  }
}

RankTraceWriter::~RankTraceWriter() {
  if (log_fd_ >= 0) close(log_fd_);
  if (index_fd_ >= 0) close(index_fd_);
}

absl::StatusOr<AppendResult> RankTraceWriter::Append(const v1::StreamEventsRequest& batch) {
  std::lock_guard<std::mutex> lock(mutex_);
  AppendResult result;
  v1::StoreRecord events_record;
  v1::StoredEvents* stored = events_record.mutable_events();
  std::map<uint32_t, uint64_t> next = next_position_;
  for (int i = 0; i < batch.events_size(); ++i) {
    const v1::Event& event = batch.events(i);
    uint64_t& lane_next = next[event.lane()];
    const uint64_t position = LanePosition(event);
    if (position < lane_next) {
      ++result.duplicates;
      continue;
    }
    lane_next = position + 1;
    *stored->add_events() = event;
    result.stored_events.push_back(i);
  }
  result.stored = static_cast<uint64_t>(stored->events_size());

  std::string frames;
  FrameInfo events_frame;
  if (result.stored > 0) {
    stored->set_collector_time_ns(RealtimeNs());
    events_frame.offset = log_end_;
    AppendFrame(events_record, &frames);
    events_frame.length = frames.size();
    events_frame.tag = store::kTagEvents;
  }
  std::vector<std::pair<uint32_t, std::string>> new_regions;
  for (const v1::RegionName& region : batch.regions()) {
    auto known = regions_.find(region.id());
    if (known != regions_.end() && known->second == region.name()) continue;
    v1::StoreRecord record;
    *record.mutable_region() = region;
    AppendFrame(record, &frames);
    new_regions.emplace_back(region.id(), region.name());
  }
  v1::StoredStatus status;
  status.set_writer_status(batch.writer_status());
  status.set_lost(batch.lost());
  status.set_torn(batch.torn());
  status.set_dropped(batch.dropped());
  // A batch without a look at the process (another host's ring) keeps the stored one.
  *status.mutable_process() = batch.has_process() ? batch.process() : status_.process();
  status.set_exit_recorded(batch.exit_recorded());
  status.set_exit_code(batch.exit_code());
  // A heartbeat or a look at the process a second newer is news too: post-mortem
  // analysis measures a hang up to the last sign of life. What the look saw changing
  // (stopped, gone, CPU idle) is stored at once; the same state again, once a second.
  constexpr uint64_t kHeartbeatStoreNs = 1'000'000'000;
  constexpr int64_t kSampleStoreNs = 1'000'000'000;
  const v1::ProcessSample& sample = status.process();
  const v1::ProcessSample& stored_sample = status_.process();
  const bool sample_changed = sample.state() != stored_sample.state() ||
                              sample.cpu_advancing() != stored_sample.cpu_advancing() ||
                              sample.wait_channel() != stored_sample.wait_channel() ||
                              sample.sampled_ns() >= stored_sample.sampled_ns() + kSampleStoreNs;
  const bool status_changed = status.writer_status() != status_.writer_status() ||
                              status.lost() != status_.lost() || status.torn() != status_.torn() ||
                              status.dropped() != status_.dropped() ||
                              batch.heartbeat_ns() >= status_.heartbeat_ns() + kHeartbeatStoreNs ||
                              sample_changed ||
                              status.exit_recorded() != status_.exit_recorded() ||
                              status.exit_code() != status_.exit_code();
  status.set_heartbeat_ns(batch.heartbeat_ns());
  status.set_collector_time_ns(RealtimeNs());
  if (status_changed && batch.writer_status() != v1::WRITER_STATUS_UNSPECIFIED) {
    v1::StoreRecord record;
    *record.mutable_status() = status;
    AppendFrame(record, &frames);
  }
  if (frames.empty()) return result;

  const std::string log_path = absl::StrCat(dir_, "/", store::kLogFileName);
  if (absl::Status wrote = WriteAll(log_fd_, frames, log_end_, log_path); !wrote.ok()) {
    // Leave no partial frame behind for the next append to follow.
    (void)!ftruncate(log_fd_, static_cast<off_t>(log_end_));
    return wrote;
  }
  if (options_.fsync && fdatasync(log_fd_) != 0) {
    (void)!ftruncate(log_fd_, static_cast<off_t>(log_end_));
    return Errno("fdatasync " + log_path);
  }
  log_end_ += frames.size();
  next_position_ = std::move(next);
  events_ += result.stored;
  for (auto& [id, name] : new_regions) regions_[id] = std::move(name);
  if (status_changed) status_ = status;

  if (result.stored > 0) {
    // The index is derived data: a failed write here is repaired on the next open.
    std::string entry_frame;
    AppendFrame(EntryFor(events_frame, *stored), &entry_frame);
    const std::string index_path = absl::StrCat(dir_, "/", store::kIndexFileName);
    if (WriteAll(index_fd_, entry_frame, index_end_, index_path).ok()) {
      index_end_ += entry_frame.size();
    }
  }
  return result;
}

std::vector<v1::LaneResume> RankTraceWriter::Resume() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<v1::LaneResume> resume;
  for (const auto& [lane, next] : next_position_) {
    v1::LaneResume item;
    item.set_lane(lane);
    item.set_next_position(next);
    resume.push_back(item);
  }
  return resume;
}

uint64_t RankTraceWriter::events_stored() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

// ---------------------------------------------------------------------------------------
// RankTraceReader

absl::StatusOr<std::unique_ptr<RankTraceReader>> RankTraceReader::Open(const std::string& dir) {
  std::unique_ptr<RankTraceReader> reader(new RankTraceReader());
  reader->dir_ = dir;
  const std::string log_path = absl::StrCat(dir, "/", store::kLogFileName);
  absl::StatusOr<LogScan> scan = ScanFramedFile(log_path, store::kLogMagic, &reader->bytes_);
  if (!scan.ok()) return scan.status();
  reader->scan_ = *std::move(scan);
  const std::vector<FrameInfo>& frames = reader->scan_.frames;
  if (frames.empty() || frames[0].tag != store::kTagIdentity) {
    return absl::DataLossError(absl::StrCat(log_path, ": no identity frame (the trace was cut "
                                                      "short before its first record)"));
  }
  uint64_t index_end = 0;
  reader->index_ = MatchingIndexPrefix(absl::StrCat(dir, "/", store::kIndexFileName), frames, &index_end);
  size_t indexed = 0;
  for (const FrameInfo& frame : frames) {
    if (frame.tag == store::kTagEvents) {
      if (indexed++ < reader->index_.size()) continue;
      absl::StatusOr<v1::StoreRecord> record = reader->Decode(frame);
      if (!record.ok()) return record.status();
      reader->index_.push_back(EntryFor(frame, record->events()));
      continue;
    }
    absl::StatusOr<v1::StoreRecord> record = reader->Decode(frame);
    if (!record.ok()) return record.status();
    if (record->has_identity()) reader->identity_ = record->identity();
    if (record->has_region()) reader->regions_[record->region().id()] = record->region().name();
    if (record->has_status()) reader->status_ = record->status();
  }
  return reader;
}

absl::StatusOr<v1::StoreRecord> RankTraceReader::Decode(const FrameInfo& frame) const {
  return DecodeFrame<v1::StoreRecord>(bytes_, frame, absl::StrCat(dir_, "/", store::kLogFileName));
}

absl::StatusOr<std::vector<v1::Event>> RankTraceReader::ReadAll() const {
  std::vector<v1::Event> events;
  for (const FrameInfo& frame : scan_.frames) {
    if (frame.tag != store::kTagEvents) continue;
    absl::StatusOr<v1::StoreRecord> record = Decode(frame);
    if (!record.ok()) return record.status();
    for (v1::Event& event : *record->mutable_events()->mutable_events()) events.push_back(std::move(event));
  }
  return events;
}

absl::StatusOr<std::vector<v1::Event>> RankTraceReader::ReadComm(uint64_t comm_id, uint64_t from_seq) const {
  std::vector<v1::Event> events;
  frames_decoded_ = 0;
  for (const v1::StoreIndexEntry& entry : index_) {
    const bool covers = std::any_of(entry.comms().begin(), entry.comms().end(), [&](const v1::CommRange& c) {
      return c.comm_id() == comm_id && c.max_seq() >= from_seq;
    });
    if (!covers) continue;
    ++frames_decoded_;
    absl::StatusOr<v1::StoreRecord> record =
        Decode(FrameInfo{entry.offset(), entry.length(), store::kTagEvents});
    if (!record.ok()) return record.status();
    for (const v1::Event& event : record->events().events()) {
      if (event.comm_id() == comm_id && event.seq() >= from_seq) events.push_back(event);
    }
  }
  return events;
}

// ---------------------------------------------------------------------------------------
// TraceStore

std::string RankTraceDirName(const v1::RankIdentity& identity) {
  return absl::StrCat("rank-", identity.rank(), ".", SafeName(identity.host()), ".", identity.pid(), ".",
                      identity.start_realtime_ns());
}

absl::StatusOr<std::shared_ptr<RankTraceWriter>> TraceStore::Writer(const v1::RankIdentity& identity) {
  const std::string dir = absl::StrCat(out_dir_, "/", SafeName(identity.job()), "/", RankTraceDirName(identity));
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = writers_.find(dir);
  if (found != writers_.end()) return found->second;
  absl::StatusOr<std::unique_ptr<RankTraceWriter>> writer = RankTraceWriter::Open(dir, identity, options_);
  if (!writer.ok()) return writer.status();
  std::shared_ptr<RankTraceWriter> shared = *std::move(writer);
  writers_[dir] = shared;
  return shared;
}

std::vector<std::string> ListRankTraces(const std::string& out_dir, const std::string& job) {
  std::vector<std::string> dirs;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(absl::StrCat(out_dir, "/", SafeName(job)), error)) {
    if (std::filesystem::exists(entry.path() / store::kLogFileName)) dirs.push_back(entry.path().string());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

}  // namespace collwatch
