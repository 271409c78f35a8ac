// RankTraceReader: reads a trace folder (whole, frame by frame, or one communicator from a
// sequence number through the index) in place, never changing it and stopping at a torn tail.
// Threading: see trace_store.h (single-threaded).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/arena.h"
#include "store/event_codec.h"
#include "store/trace_frames.h"
#include "store/trace_store.h"
#include "store/trace_store_format.h"

namespace collwatch {

RankTraceReader::~RankTraceReader() = default;

absl::StatusOr<std::unique_ptr<RankTraceReader>> RankTraceReader::Open(const std::string& dir) {
  std::unique_ptr<RankTraceReader> reader(new RankTraceReader());
  reader->dir_ = dir;
  const std::string log_path = absl::StrCat(dir, "/", store::kLogFileName);
  absl::StatusOr<std::unique_ptr<store::FramedFileReader>> file = store::FramedFileReader::Open(log_path);
  if (!file.ok()) return file.status();
  reader->file_ = *std::move(file);
  absl::StatusOr<LogScan> scan = store::ScanFramedFile(*reader->file_, store::kLogMagic);
  if (!scan.ok()) return scan.status();
  reader->scan_ = *std::move(scan);
  const std::vector<FrameInfo>& frames = reader->scan_.frames;
  if (frames.empty() || frames[0].tag != store::kTagIdentity) {
    return absl::DataLossError(absl::StrCat(log_path, ": no identity frame (the trace was cut "
                                                      "short before its first record)"));
  }
  uint64_t index_end = 0;
  reader->index_ = store::MatchingIndexPrefix(absl::StrCat(dir, "/", store::kIndexFileName), frames, &index_end);
  size_t indexed = 0;
  for (const FrameInfo& frame : frames) {
    if (frame.tag == store::kTagEvents) {
      if (indexed++ < reader->index_.size()) continue;
      absl::StatusOr<v1::StoreRecord> record = reader->Decode(frame);
      if (!record.ok()) return record.status();
      reader->index_.push_back(store::EntryFor(frame, record->events()));
      continue;
    }
    absl::StatusOr<v1::StoreRecord> record = reader->Decode(frame);
    if (!record.ok()) return record.status();
    if (record->has_identity()) reader->identity_ = record->identity();
    if (record->has_region()) reader->regions_[record->region().id()] = record->region().name();
    if (record->has_call_path()) reader->call_paths_[record->call_path().id()] = CallPathFromWire(record->call_path());
    if (record->has_status()) reader->status_ = record->status();
    if (record->has_stacks()) reader->stacks_.push_back(record->stacks());
  }
  return reader;
}

absl::StatusOr<v1::StoreRecord> RankTraceReader::Decode(const FrameInfo& frame) const {
  return store::DecodeFrame<v1::StoreRecord>(*file_, frame);
}

absl::Status RankTraceReader::ForEachEventsRecord(
    const std::function<absl::Status(const v1::StoreRecord&)>& each) const {
  google::protobuf::Arena arena;  // one for every frame, reset after each: no allocation per event
  for (const FrameInfo& frame : scan_.frames) {
    if (frame.tag != store::kTagEvents) continue;
    auto* record = google::protobuf::Arena::CreateMessage<v1::StoreRecord>(&arena);
    if (absl::Status decoded = store::DecodeFrameInto(*file_, frame, record); !decoded.ok()) return decoded;
    if (absl::Status status = each(*record); !status.ok()) return status;
    arena.Reset();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::Event>> RankTraceReader::ReadAll() const {
  std::vector<v1::Event> events;
  absl::Status read = ForEachEventsRecord([&](const v1::StoreRecord& record) {
    events.insert(events.end(), record.events().events().begin(), record.events().events().end());
    return absl::OkStatus();
  });
  if (!read.ok()) return read;
  return events;
}

absl::StatusOr<std::vector<IndexedRecord>> RankTraceReader::ReadAllRecords() const {
  std::vector<IndexedRecord> records;
  absl::Status read = ForEachRecord([&](const IndexedRecord& record) { records.push_back(record); });
  if (!read.ok()) return read;
  return records;
}

absl::Status RankTraceReader::ForEachRecord(const std::function<void(const IndexedRecord&)>& each) const {
  return ForEachEventsRecord([&](const v1::StoreRecord& record) {
    for (const v1::Event& event : record.events().events()) {
      each(IndexedRecord(event.lane(), event.index(), RecordFromEvent(event)));
    }
    return absl::OkStatus();
  });
}

absl::Status RankTraceReader::ForEachEventsFrame(
    const std::function<absl::Status(std::vector<v1::Event>&)>& each) const {
  std::vector<v1::Event> events;
  return ForEachEventsRecord([&](const v1::StoreRecord& record) {
    events.assign(record.events().events().begin(), record.events().events().end());
    return each(events);
  });
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

}  // namespace collwatch
