// RankTraceWriter: appends one rank's deduplicated events, region names and status to its
// trace in one write per batch, and recovers after a crash (a torn tail cut, the index
// repaired from the log). Threading: see trace_store.h (one mutex per writer).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ring/clocks.h"
#include "store/event_codec.h"
#include "store/trace_frames.h"
#include "store/trace_store.h"
#include "store/trace_store_format.h"

namespace collwatch {
namespace {


bool SameProcess(const v1::RankIdentity& a, const v1::RankIdentity& b) {
  return a.job() == b.job() && a.host() == b.host() && a.pid() == b.pid() &&
         a.start_realtime_ns() == b.start_realtime_ns();
}

}  // namespace

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
  if (writer->log_fd_ < 0) return store::Errno(absl::StrCat("open ", log_path));
  writer->index_fd_ = open(index_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (writer->index_fd_ < 0) return store::Errno(absl::StrCat("open ", index_path));
  if (absl::Status recovered = writer->Recover(identity); !recovered.ok()) return recovered;
  return writer;
}

absl::Status RankTraceWriter::Recover(const v1::RankIdentity& identity) {
  const std::string log_path = absl::StrCat(dir_, "/", store::kLogFileName);
  const std::string index_path = absl::StrCat(dir_, "/", store::kIndexFileName);
  std::string bytes;
  absl::StatusOr<LogScan> scan = ScanFramedFile(log_path, store::kLogMagic, &bytes);
  if (!scan.ok()) return scan.status();
  // Readers read around damage; the writer appends to no damaged file (the records of
  // this stream stay in its ring until someone looks).
  if (scan->damaged_bytes > 0) {
    return absl::DataLossError(absl::StrCat(
        log_path, ": ", scan->damaged_bytes, " damaged bytes from offset ", scan->first_damage_offset,
        " with good frames after them: the file is damaged, not cut short by a crash. It was left as it is; "
        "move the folder aside to start a new trace for this rank"));
  }
  const bool fresh = scan->frames.empty() || scan->frames[0].tag != store::kTagIdentity;
  if (fresh) {
    // Nothing usable yet (new, or torn before its identity frame was whole): start over.
    if (ftruncate(log_fd_, 0) != 0 || ftruncate(index_fd_, 0) != 0) return store::Errno("truncate " + dir_);
    torn_bytes_cut_ = scan->file_bytes;
    std::string head = store::FileHeader(store::kLogMagic);
    v1::StoreRecord record;
    *record.mutable_identity() = identity;
    store::AppendFrame(record, &head);
    if (absl::Status wrote = store::WriteAll(log_fd_, head, 0, log_path); !wrote.ok()) return wrote;
    if (options_.fsync && fdatasync(log_fd_) != 0) return store::Errno("fdatasync " + log_path);
    log_end_ = head.size();
    const std::string index_head = store::FileHeader(store::kIndexMagic);
    if (absl::Status wrote = store::WriteAll(index_fd_, index_head, 0, index_path); !wrote.ok()) return wrote;
    index_end_ = index_head.size();
    return absl::OkStatus();
  }
  absl::StatusOr<v1::StoreRecord> first = store::DecodeFrame<v1::StoreRecord>(bytes, scan->frames[0], log_path);
  if (!first.ok()) return first.status();
  if (!SameProcess(first->identity(), identity)) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir_, " holds the trace of job ", first->identity().job(), " pid ", first->identity().pid(),
        " on ", first->identity().host(), ", not of this stream's process"));
  }
  if (scan->valid_end < scan->file_bytes) {
    if (ftruncate(log_fd_, static_cast<off_t>(scan->valid_end)) != 0) return store::Errno("truncate " + log_path);
    torn_bytes_cut_ = scan->file_bytes - scan->valid_end;
  }
  log_end_ = scan->valid_end;

  std::vector<v1::StoreIndexEntry> entries = store::MatchingIndexPrefix(index_path, scan->frames, &index_end_);
  if (index_end_ == 0) {
    const std::string index_head = store::FileHeader(store::kIndexMagic);
    if (absl::Status wrote = store::WriteAll(index_fd_, index_head, 0, index_path); !wrote.ok()) return wrote;
    index_end_ = index_head.size();
  }
  if (ftruncate(index_fd_, static_cast<off_t>(index_end_)) != 0) return store::Errno("truncate " + index_path);
  for (const v1::StoreIndexEntry& entry : entries) NoteIndexEntry(entry);

  size_t indexed = 0;
  std::string missing_entries;
  for (const FrameInfo& frame : scan->frames) {
    if (frame.tag == store::kTagEvents) {
      if (indexed < entries.size()) {
        ++indexed;
        continue;
      }
      absl::StatusOr<v1::StoreRecord> record = store::DecodeFrame<v1::StoreRecord>(bytes, frame, log_path);
      if (!record.ok()) return record.status();
      v1::StoreIndexEntry entry = store::EntryFor(frame, record->events());
      NoteIndexEntry(entry);
      store::AppendFrame(entry, &missing_entries);
    } else if (frame.tag == store::kTagRegion || frame.tag == store::kTagStatus || frame.tag == store::kTagCallPath ||
               frame.tag == store::kTagStacks) {
      absl::StatusOr<v1::StoreRecord> record = store::DecodeFrame<v1::StoreRecord>(bytes, frame, log_path);
      if (!record.ok()) return record.status();
      if (record->has_region()) regions_[record->region().id()] = record->region().name();
      if (record->has_call_path()) call_paths_[record->call_path().id()] = record->call_path().SerializeAsString();
      if (record->has_status()) status_ = record->status();
      if (record->has_stacks()) stacks_requests_.insert(record->stacks().request_id());
    }
  }
  if (!missing_entries.empty()) {
    if (absl::Status wrote = store::WriteAll(index_fd_, missing_entries, index_end_, index_path); !wrote.ok()) {
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
    store::AppendFrame(events_record, &frames);
    events_frame.length = frames.size();
    events_frame.tag = store::kTagEvents;
  }
  std::vector<std::pair<uint32_t, std::string>> new_regions;
  for (const v1::RegionName& region : batch.regions()) {
    auto known = regions_.find(region.id());
    if (known != regions_.end() && known->second == region.name()) continue;
    v1::StoreRecord record;
    *record.mutable_region() = region;
    store::AppendFrame(record, &frames);
    new_regions.emplace_back(region.id(), region.name());
  }
  std::vector<std::pair<uint32_t, std::string>> new_call_paths;
  for (const v1::CallPath& path : batch.call_paths()) {
    std::string bytes = path.SerializeAsString();
    auto known = call_paths_.find(path.id());
    if (known != call_paths_.end() && known->second == bytes) continue;
    v1::StoreRecord record;
    *record.mutable_call_path() = path;
    store::AppendFrame(record, &frames);
    new_call_paths.emplace_back(path.id(), std::move(bytes));
  }
  const bool new_stacks = batch.has_stacks() && !stacks_requests_.count(batch.stacks().request_id());
  if (new_stacks) {
    v1::StoreRecord record;
    *record.mutable_stacks() = batch.stacks();
    store::AppendFrame(record, &frames);
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
    store::AppendFrame(record, &frames);
  }
  if (frames.empty()) return result;

  const std::string log_path = absl::StrCat(dir_, "/", store::kLogFileName);
  if (absl::Status wrote = store::WriteAll(log_fd_, frames, log_end_, log_path); !wrote.ok()) {
    // Leave no partial frame behind for the next append to follow.
    (void)!ftruncate(log_fd_, static_cast<off_t>(log_end_));
    return wrote;
  }
  if (options_.fsync && fdatasync(log_fd_) != 0) {
    (void)!ftruncate(log_fd_, static_cast<off_t>(log_end_));
    return store::Errno("fdatasync " + log_path);
  }
  log_end_ += frames.size();
  next_position_ = std::move(next);
  events_ += result.stored;
  for (auto& [id, name] : new_regions) regions_[id] = std::move(name);
  for (auto& [id, bytes] : new_call_paths) call_paths_[id] = std::move(bytes);
  if (new_stacks) stacks_requests_.insert(batch.stacks().request_id());
  if (status_changed) status_ = status;

  if (result.stored > 0) {
    // The index is derived data: a failed write here is repaired on the next open.
    std::string entry_frame;
    store::AppendFrame(store::EntryFor(events_frame, *stored), &entry_frame);
    const std::string index_path = absl::StrCat(dir_, "/", store::kIndexFileName);
    if (store::WriteAll(index_fd_, entry_frame, index_end_, index_path).ok()) {
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

}  // namespace collwatch
