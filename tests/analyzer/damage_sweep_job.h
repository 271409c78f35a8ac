// Test-only: the small clean job the damage sweep spoils (damage_sweep_test.cc): two
// ranks of one communicator, 16 collectives named by NVTX regions or by Python call
// paths, written as ring files by hand (ring_format.h, every byte where the spec puts
// it) and as the trace store the collector would make of them; and where in those files
// each field the sweep overwrites lives. Header-only; single-threaded.
#ifndef COLLWATCH_TESTS_ANALYZER_DAMAGE_SWEEP_JOB_H_
#define COLLWATCH_TESTS_ANALYZER_DAMAGE_SWEEP_JOB_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "proto/collwatch.pb.h"
#include "ring/hash.h"
#include "ring/ring_format.h"
#include "ring/ring_reader.h"
#include "store/event_codec.h"
#include "store/trace_store.h"

namespace collwatch::damage_sweep {

inline constexpr uint32_t kLanes = 2;
inline constexpr uint64_t kLaneCapacity = 64;
inline constexpr uint64_t kStringCapacity = 32;
inline constexpr uint64_t kCallPathCapacity = 8;
inline constexpr uint64_t kStringsOffset = ring::kHeaderBytes;
inline constexpr uint64_t kCallPathsOffset = kStringsOffset + kStringCapacity * ring::kStringSlotBytes;
inline constexpr uint64_t kLanesOffset = kCallPathsOffset + kCallPathCapacity * ring::kCallPathSlotBytes;
inline constexpr uint64_t kFileBytes = ring::RingFileBytes(kLanes, kLaneCapacity, kStringCapacity, kCallPathCapacity);
inline constexpr uint64_t kCommId = 0xc0ffee;
inline constexpr char kJob[] = "sweep";
// A string slot id no write used: empty in every ring of the job.
inline constexpr uint32_t kEmptyStringId = 30;
inline constexpr uint32_t kEmptyCallPathId = 7;

// The string table: NVTX region names (ids 1-6), then the files and functions of the
// call paths (7-10).
inline const std::vector<std::string>& Names() {
  static const std::vector<std::string> names = {"fwd/embed",      "fwd/layer0",   "fwd/layer1",
                                                 "bwd/layer1",     "bwd/layer0",   "bwd/embed",
                                                 "/work/train.py", "Trainer.step", "Model.forward",
                                                 "Model.backward"};
  return names;
}
// Call paths (ids 1-2): {function id, line} innermost first, all in file 7.
inline const std::vector<std::vector<std::pair<uint32_t, int32_t>>>& Paths() {
  static const std::vector<std::vector<std::pair<uint32_t, int32_t>>> paths = {{{9, 40}, {8, 90}},
                                                                               {{10, 60}, {8, 91}}};
  return paths;
}

struct SweepOp {
  ring::ApiFn fn;
  uint64_t count;
  int32_t redop;
  uint32_t region_id;     // 0: named by its call path alone
  uint32_t call_path_id;
};
// One step of the job; it runs twice.
inline const std::vector<SweepOp>& Step() {
  static const std::vector<SweepOp> step = {
      {ring::ApiFn::kAllGather, 1024, ring::kUnset, 1, 1}, {ring::ApiFn::kAllGather, 1024, ring::kUnset, 2, 1},
      {ring::ApiFn::kAllGather, 1024, ring::kUnset, 3, 1}, {ring::ApiFn::kAllReduce, 16, 0, 0, 1},
      {ring::ApiFn::kReduceScatter, 256, 4, 4, 2},         {ring::ApiFn::kReduceScatter, 256, 4, 5, 2},
      {ring::ApiFn::kReduceScatter, 256, 4, 6, 2},         {ring::ApiFn::kAllReduce, 16, 0, 0, 2}};
  return step;
}

// Byte offsets of a ring's parts, for the sweep's edits.
inline uint64_t RecordOffset(uint64_t index) {  // lane 1
  return kLanesOffset + ring::LaneBytes(kLaneCapacity) + ring::kLaneHeaderBytes + index * ring::kRecordBytes;
}
inline uint64_t StringSlotOffset(uint32_t id) { return kStringsOffset + (id - 1) * ring::kStringSlotBytes; }
inline uint64_t CallPathSlotOffset(uint32_t id) { return kCallPathsOffset + (id - 1) * ring::kCallPathSlotBytes; }
// Records of lane 1: a comm init enter and return, then each collective's enter and return.
inline uint64_t RecordCount() { return 2 + 4 * Step().size(); }
inline bool IsCollectiveEnter(uint64_t index) { return index >= 2 && index % 2 == 0; }
inline const SweepOp& OpOfRecord(uint64_t index) { return Step()[((index - 2) / 2) % Step().size()]; }

inline std::string RingPath(const std::string& dir, int32_t rank) {
  return dir + "/rank" + std::to_string(rank) + ".ring";
}

// Writes rank `rank`'s ring, its writer exited with 0.
inline void WriteRing(const std::string& path, int32_t rank) {
  std::vector<uint64_t> words(kFileBytes / sizeof(uint64_t), 0);  // zero means empty; aligned
  char* base = reinterpret_cast<char*>(words.data());
  auto* header = reinterpret_cast<ring::Header*>(base);
  header->version = ring::kVersion;
  header->header_bytes = ring::kHeaderBytes;
  header->record_bytes = ring::kRecordBytes;
  header->string_slot_bytes = ring::kStringSlotBytes;
  header->lane_count = kLanes;
  header->lane_header_bytes = ring::kLaneHeaderBytes;
  header->lane_capacity = kLaneCapacity;
  header->lanes_offset = kLanesOffset;
  header->lane_bytes = ring::LaneBytes(kLaneCapacity);
  header->string_capacity = kStringCapacity;
  header->strings_offset = kStringsOffset;
  header->file_bytes = kFileBytes;
  header->pid = 5000 + rank;
  header->rank = rank;
  header->local_rank = rank;
  header->world_size = 2;
  header->start_realtime_ns = 1'700'000'000'000'000'000;
  header->start_monotonic_ns = 1'000'000'000;
  std::strcpy(header->host, "node0");
  std::strcpy(header->job, kJob);
  header->call_path_slot_bytes = ring::kCallPathSlotBytes;
  header->call_path_capacity = kCallPathCapacity;
  header->call_paths_offset = kCallPathsOffset;
  header->writer_state.store(static_cast<uint32_t>(ring::WriterState::kExited));
  header->exit_code.store(0);
  for (size_t i = 0; i < Names().size(); ++i) {
    auto* slot = reinterpret_cast<ring::StringSlot*>(base + StringSlotOffset(static_cast<uint32_t>(i + 1)));
    const std::string& name = Names()[i];
    slot->length = static_cast<uint32_t>(name.size());
    slot->hash = Hash64(name.data(), name.size());
    std::memcpy(slot->text, name.data(), name.size());
    slot->state.store(ring::kStringReady);
  }
  for (size_t i = 0; i < Paths().size(); ++i) {
    auto* slot = reinterpret_cast<ring::CallPathSlot*>(base + CallPathSlotOffset(static_cast<uint32_t>(i + 1)));
    slot->frame_count = static_cast<uint16_t>(Paths()[i].size());
    slot->hash = 0x1000 + i;
    for (size_t f = 0; f < Paths()[i].size(); ++f) {
      slot->frames[f] = ring::CallPathFrame{7, Paths()[i][f].first, Paths()[i][f].second, 0};
    }
    slot->state.store(ring::kStringReady);
  }
  uint64_t t_ns = 2'000'000'000;
  auto put = [&](uint64_t index, ring::Record record) {
    record.commit = index + 1;
    std::memcpy(base + RecordOffset(index), &record, sizeof record);
  };
  auto returned = [](ring::Record record, uint64_t enter_index, uint64_t at_ns) {
    record.kind = static_cast<uint16_t>(ring::RecordKind::kReturn);
    record.ref_lane = 1;
    record.ref_index = enter_index;
    record.t_ns = at_ns;
    record.flags = ring::kFlagCompletesAtReturn;
    return record;
  };
  ring::Record init{};
  init.kind = static_cast<uint16_t>(ring::RecordKind::kEnter);
  init.fn = static_cast<uint16_t>(ring::ApiFn::kCommInitRank);
  init.dtype = ring::kNoDtype;
  init.redop = ring::kUnset;
  init.root_or_peer = ring::kUnset;
  init.comm_id = kCommId;
  init.rank = rank;
  init.nranks = 2;
  init.aux0 = kCommId;
  init.tid = 77;
  init.t_ns = t_ns;
  put(0, init);
  put(1, returned(init, 0, t_ns += 1'000'000));
  uint64_t seq = 0;
  for (uint64_t index = 2; index < RecordCount(); index += 2) {
    const SweepOp& op = OpOfRecord(index);
    ring::Record call = init;
    call.fn = static_cast<uint16_t>(op.fn);
    call.dtype = 7;  // float32
    call.redop = op.redop;
    call.seq = ++seq;
    call.count = op.count;
    call.aux0 = 0;
    call.region_id = op.region_id;
    call.call_path_id = op.call_path_id;
    call.t_ns = t_ns += 1'000'000;
    put(index, call);
    put(index + 1, returned(call, index, t_ns += 500'000));
  }
  reinterpret_cast<ring::LaneHeader*>(base + kLanesOffset + ring::LaneBytes(kLaneCapacity))->write_index.store(RecordCount());
  header->heartbeat_ns.store(t_ns);
  header->magic = ring::kMagic;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(base, static_cast<std::streamsize>(kFileBytes));
  ASSERT_TRUE(out.good()) << path;
}

// The trace store the collector makes of the ring at `ring_path` (one batch, as an agent
// sends a finished ring): events, the names its records use, its call paths, its exit.
inline void StoreRing(const std::string& ring_path, const std::string& out_dir) {
  absl::StatusOr<std::unique_ptr<RingReader>> reader = RingReader::Open(ring_path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  v1::StreamEventsRequest batch;
  *batch.mutable_rank() = RankIdentityFromRing((*reader)->identity());
  batch.set_batch_seq(1);
  std::set<uint32_t> named, pathed;  // each name and path once, as the agent sends them
  for (const IndexedRecord& item : (*reader)->ReadAll(/*writer_gone=*/true).records) {
    EventFromRecord(item, batch.add_events());
    if (item.record.region_id != 0 && named.insert(item.record.region_id).second) {
      *batch.add_regions() = RegionNameFromRing(**reader, item.record.region_id);
    }
    if (item.record.call_path_id != 0 && pathed.insert(item.record.call_path_id).second) {
      if (std::optional<CallPath> path = (*reader)->ReadCallPath(item.record.call_path_id)) {
        *batch.add_call_paths() = CallPathToWire(item.record.call_path_id, *path);
      }
    }
  }
  batch.set_heartbeat_ns((*reader)->heartbeat_ns());
  batch.set_writer_status(v1::WRITER_STATUS_EXITED);
  batch.set_exit_recorded(true);
  batch.set_exit_code(0);
  TraceStore store(out_dir, StoreOptions{});
  absl::StatusOr<std::shared_ptr<RankTraceWriter>> writer = store.Writer(batch.rank());
  ASSERT_TRUE(writer.ok()) << writer.status();
  absl::StatusOr<AppendResult> appended = (*writer)->Append(batch);
  ASSERT_TRUE(appended.ok()) << appended.status();
}

}  // namespace collwatch::damage_sweep

#endif  // COLLWATCH_TESTS_ANALYZER_DAMAGE_SWEEP_JOB_H_
