// Makes the fuzzers' seed files (tests/fuzz/<target>/) from the output of a real run:
//   make_seeds ring IN.ring OUT [RECORDS]
//                                      the ring with its string table cut to the ids its
//                                      records use, renumbered (a ring's table alone is
//                                      512 KiB; seeds should be a few KiB), and its lanes
//                                      cut to RECORDS slots (a power of two) holding each
//                                      lane's newest records, as a ring that size would
//   make_seeds ingest OUT TRACE_DIR... the rank traces' stored batches as the messages
//                                      their agents sent (event_ingest_fuzzer's input)
//   make_seeds store OUT TRACE_DIR     a rank trace's log and index (trace_store_fuzzer's)
// Threading: single-threaded.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "ring/ring_format.h"
#include "store/trace_store.h"
#include "store/trace_store_format.h"

namespace collwatch {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

// The ring with only the string slots its records name, as ids 1..n in order of use,
// and `records` slots per lane (0: as it is).
int RepackRing(const std::string& in_path, const std::string& out_path, uint64_t records) {
  const std::string in = ReadFile(in_path);
  ring::Header header;
  if (in.size() < sizeof header) return std::fprintf(stderr, "%s: too short\n", in_path.c_str()), 1;
  std::memcpy(static_cast<void*>(&header), in.data(), sizeof header);
  if (header.magic != ring::kMagic || header.file_bytes != in.size()) {
    return std::fprintf(stderr, "%s: not a complete ring\n", in_path.c_str()), 1;
  }
  if (records == 0) records = header.lane_capacity;
  if (records > header.lane_capacity || (records & (records - 1)) != 0) {
    return std::fprintf(stderr, "RECORDS must be a power of two up to %llu\n",
                        static_cast<unsigned long long>(header.lane_capacity)), 1;
  }
  // Record n of a lane lives in slot n % capacity: the newest `records` move to their
  // slots in the smaller lane, the older ones are what that ring would have lost.
  const uint64_t lane_bytes = ring::LaneBytes(records);
  std::string lanes(header.lane_count * lane_bytes, '\0');
  for (uint32_t lane = 0; lane < header.lane_count; ++lane) {
    const char* from = in.data() + header.lanes_offset + lane * header.lane_bytes;
    char* to = lanes.data() + lane * lane_bytes;
    std::memcpy(to, from, ring::kLaneHeaderBytes);
    uint64_t written;
    std::memcpy(&written, from, sizeof written);
    const uint64_t first = written > records ? written - records : 0;
    for (uint64_t n = first; n < written; ++n) {
      std::memcpy(to + ring::kLaneHeaderBytes + (n % records) * ring::kRecordBytes,
                  from + ring::kLaneHeaderBytes + (n % header.lane_capacity) * ring::kRecordBytes,
                  ring::kRecordBytes);
    }
  }
  header.lane_capacity = records;
  header.lane_bytes = lane_bytes;
  std::map<uint32_t, uint32_t> renumbered;
  for (uint32_t lane = 0; lane < header.lane_count; ++lane) {
    for (uint64_t slot = 0; slot < header.lane_capacity; ++slot) {
      char* at = lanes.data() + lane * lane_bytes + ring::kLaneHeaderBytes + slot * ring::kRecordBytes;
      uint32_t region;
      std::memcpy(&region, at + offsetof(ring::Record, region_id), sizeof region);
      if (region == 0 || region > header.string_capacity) continue;
      const uint32_t id = renumbered.try_emplace(region, static_cast<uint32_t>(renumbered.size() + 1)).first->second;
      std::memcpy(at + offsetof(ring::Record, region_id), &id, sizeof id);
    }
  }
  std::string strings(renumbered.size() * ring::kStringSlotBytes, '\0');
  for (const auto& [old_id, id] : renumbered) {
    std::memcpy(strings.data() + (id - 1) * ring::kStringSlotBytes,
                in.data() + header.strings_offset + (old_id - 1) * ring::kStringSlotBytes, ring::kStringSlotBytes);
  }
  header.string_capacity = renumbered.size();
  header.strings_offset = ring::kHeaderBytes;
  header.lanes_offset = ring::kHeaderBytes + (strings.size() + 63) / 64 * 64;
  // Call paths are not kept: an empty table where the lanes begin.
  header.call_path_capacity = 0;
  header.call_paths_offset = header.lanes_offset;
  strings.resize(header.lanes_offset - ring::kHeaderBytes, '\0');
  header.file_bytes = header.lanes_offset + lanes.size();
  std::string out = in.substr(0, ring::kHeaderBytes);
  std::memcpy(out.data(), static_cast<const void*>(&header), sizeof header);
  out += strings;
  out += lanes;
  return WriteFile(out_path, out) ? 0 : 1;
}

// event_ingest_fuzzer's framing: [u8 stream][u16 length][message].
void AppendMessage(int stream, const v1::StreamEventsRequest& request, std::string* out) {
  const std::string bytes = request.SerializeAsString();
  if (bytes.size() > 0xffff) {
    std::fprintf(stderr, "a message of %zu bytes does not fit the framing\n", bytes.size());
    std::exit(1);
  }
  out->push_back(static_cast<char>(stream));
  out->push_back(static_cast<char>(bytes.size() & 0xff));
  out->push_back(static_cast<char>(bytes.size() >> 8));
  out->append(bytes);
}

// Each trace's hello, then its stored batches interleaved across the ranks (one stream
// each), then each rank's final status.
int IngestSeed(const std::string& out_path, const std::vector<std::string>& traces) {
  struct Rank {
    std::unique_ptr<RankTraceReader> reader;
    std::vector<v1::StreamEventsRequest> batches;
  };
  std::vector<Rank> ranks;
  for (const std::string& trace : traces) {
    auto reader = RankTraceReader::Open(trace);
    if (!reader.ok()) return std::fprintf(stderr, "%s\n", reader.status().ToString().c_str()), 1;
    auto events = (*reader)->ReadAll();
    if (!events.ok()) return std::fprintf(stderr, "%s\n", events.status().ToString().c_str()), 1;
    Rank rank;
    rank.reader = *std::move(reader);
    // Batches as the stored frames hold them would do too; a few events each keeps the
    // interleaving of the ranks.
    for (size_t i = 0; i < events->size(); i += 8) {
      v1::StreamEventsRequest batch;
      batch.set_batch_seq(rank.batches.size() + 1);
      for (size_t k = i; k < events->size() && k < i + 8; ++k) *batch.add_events() = (*events)[k];
      batch.set_writer_status(v1::WRITER_STATUS_RUNNING);
      rank.batches.push_back(std::move(batch));
    }
    if (rank.batches.empty()) rank.batches.emplace_back();
    for (const auto& [id, name] : rank.reader->regions()) {
      v1::RegionName* region = rank.batches.front().add_regions();
      region->set_id(id);
      region->set_name(name);
    }
    v1::StreamEventsRequest& last = rank.batches.back();
    const v1::StoredStatus& status = rank.reader->status();
    last.set_writer_status(status.writer_status());
    last.set_heartbeat_ns(status.heartbeat_ns());
    last.set_lost(status.lost());
    ranks.push_back(std::move(rank));
  }
  std::string out;
  for (size_t r = 0; r < ranks.size(); ++r) {
    v1::StreamEventsRequest hello;
    *hello.mutable_rank() = ranks[r].reader->identity();
    AppendMessage(static_cast<int>(r), hello, &out);
  }
  for (size_t b = 0;; ++b) {
    bool any = false;
    for (size_t r = 0; r < ranks.size(); ++r) {
      if (b >= ranks[r].batches.size()) continue;
      AppendMessage(static_cast<int>(r), ranks[r].batches[b], &out);
      any = true;
    }
    if (!any) break;
  }
  return WriteFile(out_path, out) ? 0 : 1;
}

// trace_store_fuzzer's framing: [u8 flags = 0][u32 log length][log][index].
int StoreSeed(const std::string& out_path, const std::string& trace) {
  const std::string log = ReadFile(trace + "/" + store::kLogFileName);
  const std::string index = ReadFile(trace + "/" + store::kIndexFileName);
  std::string out(1, '\0');
  const uint32_t length = static_cast<uint32_t>(log.size());
  out.append(reinterpret_cast<const char*>(&length), 4);
  out += log;
  out += index;
  return WriteFile(out_path, out) ? 0 : 1;
}

}  // namespace
}  // namespace collwatch

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "ring" && (argc == 4 || argc == 5)) {
    return collwatch::RepackRing(argv[2], argv[3], argc == 5 ? std::strtoull(argv[4], nullptr, 10) : 0);
  }
  if (mode == "ingest" && argc >= 4 && argc <= 7) {
    return collwatch::IngestSeed(argv[2], std::vector<std::string>(argv + 3, argv + argc));
  }
  if (mode == "store" && argc == 4) return collwatch::StoreSeed(argv[2], argv[3]);
  std::fprintf(stderr,
               "usage: make_seeds ring IN.ring OUT [RECORDS] | ingest OUT TRACE_DIR... (up to 4) | store OUT TRACE_DIR\n");
  return 2;
}
