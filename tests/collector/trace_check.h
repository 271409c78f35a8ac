// Shared by the collector's multi-process tests and the soak (bench/soak.cc): compares
// what a trace folder stores with what the ring files hold, lane by lane and byte for byte.
// Threading: single-threaded test code.
#ifndef COLLWATCH_TESTS_COLLECTOR_TRACE_CHECK_H_
#define COLLWATCH_TESTS_COLLECTOR_TRACE_CHECK_H_

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ring/ring_reader.h"
#include "store/event_codec.h"
#include "store/trace_store.h"

namespace collwatch::testing {

// One record as compared: its position in its lane and its payload bytes.
struct LaneRecord {
  uint64_t position = 0;
  std::string payload;
  bool operator==(const LaneRecord& other) const = default;
};
using LaneRecords = std::map<uint32_t, std::vector<LaneRecord>>;

inline std::string Payload(const ring::Record& record) {
  return std::string(reinterpret_cast<const char*>(&record) + sizeof(uint64_t), ring::kRecordBytes - sizeof(uint64_t));
}

struct TraceComparison {
  int rings = 0;
  int traces = 0;
  uint64_t ring_records = 0;
  uint64_t stored_records = 0;
  uint64_t ring_lost = 0;  // records the rings lost (overwritten, torn): the store cannot have them
  std::string mismatch;  // empty when every ring equals its trace
  std::map<int, v1::StoredStatus> status_by_rank;
};

// Every ring of the `ring_dirs` (one per node) against the trace of the same process
// under `out_dir`/`job`; the store is read once.
inline TraceComparison CompareTracesWithRings(const std::vector<std::string>& ring_dirs, const std::string& out_dir,
                                              const std::string& job) {
  TraceComparison result;
  std::map<int32_t, LaneRecords> stored_by_pid;
  for (const std::string& dir : ListRankTraces(out_dir, job)) {
    auto reader = RankTraceReader::Open(dir);
    if (!reader.ok()) {
      result.mismatch = absl::StrCat(dir, ": ", reader.status().ToString());
      return result;
    }
    ++result.traces;
    result.status_by_rank[(*reader)->identity().rank()] = (*reader)->status();
    LaneRecords& lanes = stored_by_pid[(*reader)->identity().pid()];
    absl::StatusOr<std::vector<v1::Event>> events = (*reader)->ReadAll();
    if (!events.ok()) {
      result.mismatch = absl::StrCat(dir, ": ", events.status().ToString());
      return result;
    }
    for (const v1::Event& event : *events) {
      lanes[event.lane()].push_back(LaneRecord{LanePosition(event), Payload(RecordFromEvent(event))});
      ++result.stored_records;
    }
  }
  std::vector<std::string> paths;
  for (const std::string& ring_dir : ring_dirs) {
    auto listed = ListRingFiles(ring_dir);
    if (!listed.ok()) {
      result.mismatch = listed.status().ToString();
      return result;
    }
    paths.insert(paths.end(), listed->begin(), listed->end());
  }
  for (const std::string& path : paths) {
    auto reader = RingReader::Open(path);
    if (!reader.ok()) continue;
    if ((*reader)->identity().job != job) continue;
    ++result.rings;
    const bool gone = (*reader)->writer_state() != ring::WriterState::kRunning || !(*reader)->WriterProcessAlive();
    LaneRecords lanes;
    const ReadBatch batch = (*reader)->ReadAll(gone);
    result.ring_lost += batch.lost + batch.torn;
    for (const IndexedRecord& item : batch.records) {
      lanes[item.lane].push_back(LaneRecord{LanePosition(item.lane, item.index, item.record), Payload(item.record)});
      ++result.ring_records;
    }
    const LaneRecords& stored = stored_by_pid[(*reader)->identity().pid];
    if (stored == lanes || !result.mismatch.empty()) continue;
    for (const auto& [lane, records] : lanes) {
      auto found = stored.find(lane);
      const size_t have = found == stored.end() ? 0 : found->second.size();
      if (have != records.size() || found->second != records) {
        result.mismatch = absl::StrCat(path, " lane ", lane, ": ring holds ", records.size(), " records, store ", have,
                                       have == records.size() ? " (contents differ)" : "");
        break;
      }
    }
    if (result.mismatch.empty()) result.mismatch = absl::StrCat(path, ": the store holds records the ring does not");
  }
  return result;
}

inline TraceComparison CompareTracesWithRings(const std::string& ring_dir, const std::string& out_dir,
                                              const std::string& job) {
  return CompareTracesWithRings(std::vector<std::string>{ring_dir}, out_dir, job);
}

}  // namespace collwatch::testing

#endif  // COLLWATCH_TESTS_COLLECTOR_TRACE_CHECK_H_
