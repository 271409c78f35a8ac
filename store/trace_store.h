// The durable per-rank trace store (format: trace_store_format.h). RankTraceWriter
// appends deduplicated events of one rank stream and recovers after a crash;
// RankTraceReader reads a trace (whole, frame by frame, or from a communicator's sequence
// number) in place, holding one frame at a time;
// TraceStore maps rank identities to their writers under an output folder.
// Threading: RankTraceWriter and TraceStore are thread-safe (one mutex each);
// RankTraceReader is single-threaded.
#ifndef COLLWATCH_STORE_TRACE_STORE_H_
#define COLLWATCH_STORE_TRACE_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/collwatch.pb.h"
#include "ring/call_path.h"
#include "ring/ring_reader.h"  // IndexedRecord

namespace collwatch {

namespace store {
class FramedFileReader;  // trace_frames.h
}  // namespace store

struct StoreOptions {
  bool fsync = false;  // fdatasync each append before it returns (before the ack)
};

// What an append did.
struct AppendResult {
  uint64_t stored = 0;      // events written
  uint64_t duplicates = 0;  // events dropped: already stored
  // Indexes into the batch's events of those written: the one place resends are told
  // apart (the online analysis takes only these).
  std::vector<int> stored_events;
};

// One frame found by a scan of a log.
struct FrameInfo {
  uint64_t offset = 0;
  uint64_t length = 0;  // header included
  uint8_t tag = 0;      // store::kTag*
};

// The result of checking a log (or index) file frame by frame.
struct LogScan {
  std::vector<FrameInfo> frames;  // the good ones, damage skipped
  uint64_t valid_end = 0;   // end of the last good frame
  uint64_t file_bytes = 0;  // torn tail: file_bytes - valid_end
  // Damage inside the file (bad bytes with good frames after them), skipped: how many
  // bytes, in how many places, the first where.
  uint64_t damaged_bytes = 0;
  uint32_t damaged_regions = 0;
  uint64_t first_damage_offset = 0;
};

// Checks every frame of `path` (magic `magic`), reading on past damage from the next good
// frame (LogScan says what was skipped); a torn tail ends the scan. `bytes` receives the
// file's contents. An error only for a file that is no trace file or cannot be read.
absl::StatusOr<LogScan> ScanFramedFile(const std::string& path, uint64_t magic, std::string* bytes);

class RankTraceWriter {
 public:
  // Opens (creating if needed) the trace in `dir` for `identity`. An existing trace of
  // another process is FAILED_PRECONDITION; damage is DATA_LOSS; a torn tail is cut.
  static absl::StatusOr<std::unique_ptr<RankTraceWriter>> Open(const std::string& dir,
                                                               const v1::RankIdentity& identity,
                                                               StoreOptions options = {});
  ~RankTraceWriter();
  RankTraceWriter(const RankTraceWriter&) = delete;
  RankTraceWriter& operator=(const RankTraceWriter&) = delete;

  // Appends the batch's events not stored yet (by (lane, position)), its new region
  // names and its status when it changed, in one write. On error nothing counts as
  // stored (a partial frame is cut on the next open).
  absl::StatusOr<AppendResult> Append(const v1::StreamEventsRequest& batch);

  // Per lane, the first position not stored (for the hello answer).
  std::vector<v1::LaneResume> Resume() const;
  uint64_t events_stored() const;
  uint64_t torn_bytes_cut() const { return torn_bytes_cut_; }
  const std::string& dir() const { return dir_; }

 private:
  RankTraceWriter() = default;
  absl::Status Recover(const v1::RankIdentity& identity);
  void NoteIndexEntry(const v1::StoreIndexEntry& entry);

  mutable std::mutex mutex_;
  std::string dir_;
  StoreOptions options_;
  int log_fd_ = -1;
  int index_fd_ = -1;
  uint64_t log_end_ = 0;
  uint64_t index_end_ = 0;
  uint64_t events_ = 0;
  uint64_t torn_bytes_cut_ = 0;
  std::map<uint32_t, uint64_t> next_position_;  // lane -> first position not stored
  std::map<uint32_t, std::string> regions_;
  std::map<uint32_t, std::string> call_paths_;  // id -> the stored CallPath message, to skip repeats
  std::set<uint64_t> stacks_requests_;          // answers stored, to skip a resent batch's
  v1::StoredStatus status_;
};

// Reads a trace folder. Never changes it; stops at a torn tail. Open scans the log once
// (checksums, names, status); events are decoded when asked, frame by frame, read in place.
class RankTraceReader {
 public:
  static absl::StatusOr<std::unique_ptr<RankTraceReader>> Open(const std::string& dir);
  ~RankTraceReader();
  RankTraceReader(const RankTraceReader&) = delete;
  RankTraceReader& operator=(const RankTraceReader&) = delete;

  const v1::RankIdentity& identity() const { return identity_; }
  const std::map<uint32_t, std::string>& regions() const { return regions_; }
  const std::map<uint32_t, CallPath>& call_paths() const { return call_paths_; }
  // Its stacks, each time they were taken (at stalls), oldest first.
  const std::vector<v1::ProcessStacks>& stacks() const { return stacks_; }
  const v1::StoredStatus& status() const { return status_; }  // the latest
  uint64_t torn_tail_bytes() const { return scan_.file_bytes - scan_.valid_end; }
  // Damage inside the log, skipped (LogScan).
  uint64_t damaged_bytes() const { return scan_.damaged_bytes; }
  uint32_t damaged_regions() const { return scan_.damaged_regions; }

  // Every event, in stored order.
  absl::StatusOr<std::vector<v1::Event>> ReadAll() const;
  // Every event as the ring record it stands for, in stored order: what a reader of the
  // whole trace into a model needs, without a message kept per event (each frame is
  // decoded on one arena, reused).
  absl::StatusOr<std::vector<IndexedRecord>> ReadAllRecords() const;
  // The same records one at a time, none kept: a reader building from a trace of any size
  // holds one decoded frame. Stops at the first error.
  absl::Status ForEachRecord(const std::function<void(const IndexedRecord&)>& each) const;
  // The same events one stored frame at a time (`each` may move them away): a reader of a
  // trace of any size holds one frame. Stops at the first error, `each`'s included.
  absl::Status ForEachEventsFrame(const std::function<absl::Status(std::vector<v1::Event>&)>& each) const;
  // Events of communicator `comm_id` with seq >= `from_seq`, in stored order, decoding
  // only the frames whose index entry covers them.
  absl::StatusOr<std::vector<v1::Event>> ReadComm(uint64_t comm_id, uint64_t from_seq) const;
  // Frames decoded by the last ReadComm (to show the index works).
  size_t frames_decoded() const { return frames_decoded_; }

 private:
  RankTraceReader() = default;
  // Each events frame of the log in stored order, decoded on one arena reused from frame to
  // frame (the record given to `each` lives until `each` returns); stops at the first error.
  absl::Status ForEachEventsRecord(const std::function<absl::Status(const v1::StoreRecord&)>& each) const;
  absl::StatusOr<v1::StoreRecord> Decode(const FrameInfo& frame) const;

  std::string dir_;
  std::unique_ptr<store::FramedFileReader> file_;  // the log, read in place
  LogScan scan_;
  std::vector<v1::StoreIndexEntry> index_;  // one per events frame, in log order
  v1::RankIdentity identity_;
  std::map<uint32_t, std::string> regions_;
  std::map<uint32_t, CallPath> call_paths_;
  std::vector<v1::ProcessStacks> stacks_;
  v1::StoredStatus status_;
  mutable size_t frames_decoded_ = 0;
};

// The folder a job's traces are written to under `out_dir` (the job id cut as SafeJobName
// cuts it, a hash of the whole id kept, and every character but letters, digits, '-' and
// '_' made '_').
std::string JobTracesDir(const std::string& out_dir, const std::string& job);
// Folder name of a rank's trace under JobTracesDir.
std::string RankTraceDirName(const v1::RankIdentity& identity);

// The writers of every rank stream under one output folder, opened on first use.
class TraceStore {
 public:
  TraceStore(std::string out_dir, StoreOptions options) : out_dir_(std::move(out_dir)), options_(options) {}
  // The writer of `identity`'s trace (shared by every stream of that identity).
  absl::StatusOr<std::shared_ptr<RankTraceWriter>> Writer(const v1::RankIdentity& identity);
  const std::string& out_dir() const { return out_dir_; }

 private:
  std::mutex mutex_;
  std::string out_dir_;
  StoreOptions options_;
  std::map<std::string, std::shared_ptr<RankTraceWriter>> writers_;
};

// Trace folders (those holding a trace.cwlog) under JobTracesDir(out_dir, job), sorted.
std::vector<std::string> ListRankTraces(const std::string& out_dir, const std::string& job);

}  // namespace collwatch

#endif  // COLLWATCH_STORE_TRACE_STORE_H_
