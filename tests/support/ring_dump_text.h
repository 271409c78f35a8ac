// Test-only: reads the text of `collwatch dump` (cli/ring_dump.cc) back into each ring's
// process and records, and feeds them to an analyzer::JobModel, whole (post-mortem) or as
// of a time (online). Strict: a line it cannot read is an error naming its number.
// Threading: single-threaded.
#ifndef COLLWATCH_TESTS_SUPPORT_RING_DUMP_TEXT_H_
#define COLLWATCH_TESTS_SUPPORT_RING_DUMP_TEXT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "analyzer/job_model.h"
#include "ring/ring_format.h"

namespace collwatch::testing {

// The dump gives each record's time relative to its ring's creation (t_ms), not the clock
// readings: every ring is placed at one origin, a writer clock reading 1000 s at
// 2026-11-23 12:00:00 UTC. Rings created at different moments are skewed by that gap.
inline constexpr uint64_t kDumpMonotonicOriginNs = 1'000'000'000'000;
inline constexpr int64_t kDumpRealtimeOriginNs = 1'795'435'200'000'000'000;

struct DumpedRecord {
  uint32_t lane = 0;
  uint64_t index = 0;
  ring::Record record{};
  int line = 0;  // in the dump
};

// What the dump loses, and what is put in its place: the stream (0), tid, aux words, the
// writer's region ids (numbered by first use), the size of a communicator on a record
// without a rank ("-": both unset), heartbeats and the clock readings (see above).
// kFlagReturnsInPlace, the one flag FlagNames does not name, is restored where the dump
// shows it: a return at its own enter's position (the ring reader's view of a return
// written in place) and an enter whose flags field is there but names nothing.
struct DumpedRing {
  std::string path;
  int line = 0;  // of its `ring` line
  ProcessInfo info;
  std::string job;         // the job id its header names
  int32_t local_rank = 0;  // LOCAL_RANK, as its header names it
  uint32_t lanes = 0;      // lanes of the ring
  ProcessStatus status = ProcessStatus::kRunning;
  std::optional<int32_t> exit_code;              // what it passed to exit(), when its ring recorded it
  uint64_t lost_records = 0;                     // lost + torn + dropped
  std::map<uint32_t, std::string> region_names;  // by writer id
  std::vector<DumpedRecord> records;             // in dump order: each lane in its order
};

struct DumpedJob {
  std::vector<DumpedRing> rings;
};

// kDrop: the job as it would be without NVTX ranges (every region id 0, no names).
enum class DumpRegions { kKeep, kDrop };

absl::StatusOr<DumpedJob> ParseRingDumpText(std::string_view text, DumpRegions regions);
// The same from a file; errors name the file too.
absl::StatusOr<DumpedJob> ReadRingDumpText(const std::string& path, DumpRegions regions);

// A record's time on the analyzer's clock (CLOCK_REALTIME ns).
int64_t RecordRealtimeNs(const DumpedRing& ring, const DumpedRecord& record);
// The earliest and latest record times of the job (0 when it has none).
int64_t FirstRecordNs(const DumpedJob& job);
int64_t LastRecordNs(const DumpedJob& job);

// Feeds a job into a model: its processes and region names at once, its records as of a
// time, each ring's records in their order, as an agent tailing the rings ships them.
class DumpedJobFeeder {
 public:
  // `job` and `model` must outlive the feeder.
  DumpedJobFeeder(const DumpedJob& job, analyzer::JobModel* model);

  // Adds each ring's records stamped at or before `realtime_ns` not added yet.
  void FeedUntil(int64_t realtime_ns);
  // Adds every record left, then each ring's final status (how the dump found its writer).
  void FeedRest();

 private:
  const DumpedJob& job_;
  analyzer::JobModel* model_;
  std::vector<analyzer::ProcessId> processes_;  // by ring
  std::vector<size_t> next_;                    // by ring: its first record not added
};

}  // namespace collwatch::testing

#endif  // COLLWATCH_TESTS_SUPPORT_RING_DUMP_TEXT_H_
