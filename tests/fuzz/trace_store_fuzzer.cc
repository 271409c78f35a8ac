// libFuzzer target: arbitrary bytes as a rank trace's log and index (a collector that
// crashed, a disk that lied, a file someone edited). Reading it, analysing it and
// reopening it for appending must report damage, never crash; a trace the writer
// accepted reads back with what was appended; without an index, reads through the
// rebuilt index equal a whole read.
// Input: byte 0 flags (bit 0: recompute the log's frame checksums, bit 1: the index's,
// so that mutations get past the CRC to the decoding), bytes 1-4 the log's length
// (little endian, cut to what follows), the log, the rest the index.
// Build and run: the fuzz preset, scripts/fuzz.sh, docs/fuzzing.md.
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/analyze_command.h"
#include "store/crc32c.h"
#include "store/event_codec.h"
#include "store/trace_store.h"
#include "store/trace_store_format.h"
#include "tests/fuzz/fuzz_support.h"

namespace collwatch {
namespace {

// The trace's path, in a scratch folder.
class ScratchTrace {
 public:
  const std::string& trace() const { return trace_; }

 private:
  fuzz::ScratchDir scratch_{"store"};
  std::string trace_ = scratch_.root() + "/rank-0.fuzz.1.1";
};

void FixChecksums(std::string* file) {
  size_t offset = store::kFileHeaderBytes;
  while (offset + store::kFrameHeaderBytes <= file->size()) {
    uint32_t length;
    std::memcpy(&length, file->data() + offset, 4);
    if (length > file->size() - offset - store::kFrameHeaderBytes) break;
    const uint32_t crc = Crc32c(file->data() + offset + store::kFrameHeaderBytes, length);
    std::memcpy(file->data() + offset + 4, &crc, 4);
    offset += store::kFrameHeaderBytes + length;
  }
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) std::abort();
}

bool SameEvent(const v1::Event& a, const v1::Event& b) { return a.SerializeAsString() == b.SerializeAsString(); }

// Reads the trace every way the tools do; the events of a whole read, if it worked.
std::optional<std::vector<v1::Event>> ReadTrace(const std::string& dir, bool have_index) {
  absl::StatusOr<std::unique_ptr<RankTraceReader>> reader = RankTraceReader::Open(dir);
  if (!reader.ok()) return std::nullopt;
  (void)(*reader)->torn_tail_bytes();
  absl::StatusOr<std::vector<v1::Event>> events = (*reader)->ReadAll();
  std::set<uint64_t> comms;
  if (events.ok()) {
    for (const v1::Event& event : *events) {
      // Comm 0 is "no communicator": the index leaves it out, ReadComm finds none.
      if (comms.size() < 4 && event.comm_id() != 0) comms.insert(event.comm_id());
    }
  }
  for (uint64_t comm : comms) {
    for (uint64_t from : {uint64_t{0}, uint64_t{2}}) {
      absl::StatusOr<std::vector<v1::Event>> some = (*reader)->ReadComm(comm, from);
      if (have_index || !some.ok()) continue;
      // An index rebuilt from the log names exactly the frames that hold the comm.
      std::vector<v1::Event> expected;
      for (const v1::Event& event : *events) {
        if (event.comm_id() == comm && event.seq() >= from) expected.push_back(event);
      }
      if (some->size() != expected.size()) std::abort();
      for (size_t i = 0; i < expected.size(); ++i) {
        if (!SameEvent((*some)[i], expected[i])) std::abort();
      }
    }
  }
  if (!events.ok()) return std::nullopt;
  return *std::move(events);
}

v1::RankIdentity SomeIdentity() {
  v1::RankIdentity identity;
  identity.set_job("fuzz");
  identity.set_host("fuzz");
  identity.set_pid(1);
  identity.set_start_realtime_ns(1);
  identity.set_lane_count(4);
  return identity;
}

// One more event per stored lane (and lane 0), a region and a status, as a batch.
v1::StreamEventsRequest NextBatch(const std::vector<v1::LaneResume>& resume) {
  v1::StreamEventsRequest batch;
  std::set<uint32_t> lanes = {0};
  for (const v1::LaneResume& lane : resume) {
    if (lanes.size() < 4) lanes.insert(lane.lane());
  }
  for (uint32_t lane : lanes) {
    uint64_t next = 0;
    for (const v1::LaneResume& stored : resume) {
      if (stored.lane() == lane) next = stored.next_position();
    }
    if (next / 2 >= UINT64_MAX / 2 - 1) continue;  // nothing fits after it
    v1::Event* event = batch.add_events();
    event->set_lane(lane);
    event->set_index(next / 2 + 1);
    event->set_kind(v1::EVENT_KIND_ENTER);
    event->set_fn(1);
    event->set_comm_id(7);
    event->set_seq(1);
  }
  v1::RegionName* region = batch.add_regions();
  region->set_id(1);
  region->set_name("fuzz/appended");
  batch.set_writer_status(v1::WRITER_STATUS_EXITED);
  return batch;
}

}  // namespace
}  // namespace collwatch

// Protobuf logs each string that is not UTF-8; the fuzzer makes thousands a second.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace collwatch;
  static ScratchTrace scratch;
  if (size < 5) return 0;
  const uint8_t flags = data[0];
  uint32_t log_length;
  std::memcpy(&log_length, data + 1, 4);
  const std::string rest(reinterpret_cast<const char*>(data + 5), size - 5);
  std::string log = rest.substr(0, log_length);
  std::string index = rest.substr(log.size());
  if (flags & 1) FixChecksums(&log);
  if (flags & 2) FixChecksums(&index);
  std::error_code error;
  std::filesystem::remove_all(scratch.trace(), error);
  std::filesystem::create_directories(scratch.trace());
  WriteFile(scratch.trace() + "/" + store::kLogFileName, log);
  WriteFile(scratch.trace() + "/" + store::kIndexFileName, index);

  const std::optional<std::vector<v1::Event>> before = ReadTrace(scratch.trace(), !index.empty());
  {
    std::ostringstream out;
    std::ostringstream err;
    AnalyzeOptions options;
    options.path = scratch.trace();
    options.json = (flags & 4) != 0;
    (void)RunAnalyzeCommand(options, out, err);
  }

  // Reopened for appending, as a collector restarting on the folder does.
  v1::RankIdentity identity = SomeIdentity();
  if (auto reader = RankTraceReader::Open(scratch.trace()); reader.ok()) identity = (*reader)->identity();
  absl::StatusOr<std::unique_ptr<RankTraceWriter>> writer = RankTraceWriter::Open(scratch.trace(), identity);
  if (!writer.ok()) return 0;
  const v1::StreamEventsRequest batch = NextBatch((*writer)->Resume());
  absl::StatusOr<AppendResult> appended = (*writer)->Append(batch);
  if (!appended.ok() || appended->stored != static_cast<uint64_t>(batch.events_size())) std::abort();
  writer->reset();
  if (!before.has_value()) return 0;  // its old frames did not decode before either
  // What read before reads again, then the appended events, unchanged.
  const std::optional<std::vector<v1::Event>> after = ReadTrace(scratch.trace(), true);
  if (!after.has_value() || after->size() != before->size() + batch.events().size()) std::abort();
  for (size_t i = 0; i < after->size(); ++i) {
    const v1::Event& expected =
        i < before->size() ? (*before)[i] : batch.events(static_cast<int>(i - before->size()));
    if (!SameEvent((*after)[i], expected)) std::abort();
  }
  return 0;
}
