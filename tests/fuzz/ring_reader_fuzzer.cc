// libFuzzer target: arbitrary bytes as a ring file, through everything that reads rings
// written by a process we do not trust to have finished (or to be a ring at all): the
// reader (open, whole and incremental reads), what the agent sends for it, `collwatch
// dump` (text and JSON) and `collwatch analyze` on the ring alone. Never a crash; and
// an incremental read (as the agent does it) sees what one whole read sees, and what
// the agent builds from a ring always decodes at the collector.
// Build and run: the fuzz preset, scripts/fuzz.sh, docs/fuzzing.md.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>

#include "cli/analyze_command.h"
#include "cli/dump_command.h"
#include "ring/ring_reader.h"
#include "store/event_codec.h"
#include "tests/fuzz/fuzz_support.h"

namespace collwatch {
namespace {

// The input lives in a memory file reached through /proc, so no disk is touched and the
// reader maps it like a ring in /dev/shm.
class MemoryFile {
 public:
  MemoryFile() : fd_(memfd_create("collwatch-ring-fuzz", MFD_CLOEXEC)) {
    if (fd_ < 0) std::abort();
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  void Fill(const uint8_t* data, size_t size) {
    if (ftruncate(fd_, 0) != 0 || ftruncate(fd_, static_cast<off_t>(size)) != 0) std::abort();
    if (size > 0 && pwrite(fd_, data, size, 0) != static_cast<ssize_t>(size)) std::abort();
  }
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

bool SameRecords(const ReadBatch& a, const ReadBatch& b) {
  if (a.records.size() != b.records.size() || a.lost != b.lost || a.torn != b.torn ||
      a.damaged != b.damaged) {
    return false;
  }
  for (size_t i = 0; i < a.records.size(); ++i) {
    if (a.records[i].lane != b.records[i].lane || a.records[i].index != b.records[i].index ||
        std::memcmp(&a.records[i].record, &b.records[i].record, sizeof(ring::Record)) != 0) {
      return false;
    }
  }
  return true;
}

void ReadEveryWay(const RingReader& reader) {
  (void)reader.records_written();
  (void)reader.heartbeat_ns();
  (void)reader.dropped();
  (void)reader.writer_state();
  (void)reader.WriterProcessAlive();
  (void)reader.ReadAll(/*writer_gone=*/false);
  const ReadBatch all = reader.ReadAll(/*writer_gone=*/true);

  // The agent's way: a few records at a time from a cursor, lane by lane; once the
  // writer is gone nothing waits, so the pieces add up to one whole read of the lane.
  v1::StreamEventsRequest batch;
  *batch.mutable_rank() = RankIdentityFromRing(reader.identity());
  for (uint32_t lane = 0; lane < reader.identity().lane_count; ++lane) {
    ReadBatch whole;
    LaneCursor whole_cursor;
    reader.ReadLane(lane, &whole_cursor, std::numeric_limits<size_t>::max(), true, &whole);
    ReadBatch pieces;
    LaneCursor cursor;
    for (int reads = 0; reads < 1'000'000 && cursor.next < whole_cursor.next; ++reads) {
      reader.ReadLane(lane, &cursor, 3, true, &pieces);
    }
    if (!SameRecords(whole, pieces)) std::abort();
    for (const IndexedRecord& item : whole.records) {
      v1::Event* event = batch.add_events();
      EventFromRecord(item, event);
      // Every payload field survives the trip through the wire format (the commit word is
      // the ring's, not the record's).
      ring::Record sent = item.record;
      sent.commit = 0;
      const ring::Record back = RecordFromEvent(*event);
      if (std::memcmp(&back, &sent, sizeof sent) != 0) std::abort();
      if (item.record.region_id != 0 && batch.regions_size() < 64) {
        *batch.add_regions() = RegionNameFromRing(reader, item.record.region_id);
      }
    }
  }
  if (all.records.size() != static_cast<size_t>(batch.events_size())) std::abort();
  // What the agent sends must decode at the collector, or the rank's stream breaks.
  v1::StreamEventsRequest received;
  if (!received.ParseFromString(batch.SerializeAsString())) std::abort();
}

void ReadAsEveryCommand(const std::string& path) {
  std::ostringstream out;
  std::ostringstream err;
  (void)DumpTraces(path, "", DumpFormat::kText, out, err);
  (void)DumpTraces(path, "", DumpFormat::kJsonLines, out, err);
  for (bool json : {false, true}) {
    AnalyzeOptions options;
    options.path = path;
    options.json = json;
    (void)RunAnalyzeCommand(options, out, err);
  }
}

}  // namespace
}  // namespace collwatch

// Protobuf logs each string that is not UTF-8; the fuzzer makes thousands a second.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace collwatch;
  static MemoryFile file;
  file.Fill(data, size);
  auto reader = RingReader::Open(file.path());
  constexpr size_t kSizeField = offsetof(ring::Header, file_bytes);
  if (!reader.ok() && size >= ring::kHeaderBytes) {
    // Inputs that grew or shrank fail the size check first; say their size in the header
    // so that mutations of the layout reach the code behind that check too.
    std::string resized(reinterpret_cast<const char*>(data), size);
    const uint64_t file_bytes = size;
    std::memcpy(resized.data() + kSizeField, &file_bytes, sizeof file_bytes);
    file.Fill(reinterpret_cast<const uint8_t*>(resized.data()), resized.size());
    reader = RingReader::Open(file.path());
  }
  if (reader.ok()) ReadEveryWay(**reader);
  reader = absl::UnavailableError("closed");
  ReadAsEveryCommand(file.path());
  return 0;
}
