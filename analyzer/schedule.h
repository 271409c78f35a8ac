// Collective schedules: what each communicator's ranks issued, in order, as lines that
// compare across runs (one op, its line, the table that interns them, a run's schedule).
// The step (step_folding.h), the baseline file (baseline.h), check (schedule_check.h) and
// diff (schedule_diff.h) are built on it.
// Threading: plain values and pure functions; callers serialise use of one OpTable.
#ifndef COLLWATCH_ANALYZER_SCHEDULE_H_
#define COLLWATCH_ANALYZER_SCHEDULE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "analyzer/call_sites.h"
#include "analyzer/job_model.h"

namespace collwatch::analyzer {

// ---- One collective, as the schedule tools compare it --------------------------------

// What must stay the same from run to run at one position of a schedule. Communicator
// ids and times are left out: they differ between runs of the same code.
struct ScheduleOp {
  ring::ApiFn fn = ring::ApiFn::kNone;  // kNone: not reported (its records were lost)
  uint64_t count = 0;
  uint8_t dtype = ring::kNoDtype;
  int32_t redop = ring::kUnset;
  int32_t root = ring::kUnset;
  std::string region;  // innermost NVTX range ("" when none)
  // Its region could not be read (Call::region_damaged) and no other rank's call at its
  // place says it: unknown, matching an op of any region (OpTable::Matches). Never in a
  // baseline (no baseline is made of damaged data).
  bool region_damaged = false;
  bool operator==(const ScheduleOp&) const = default;
};

// One baseline line: `all-gather 1056 float32 "fwd/embed"`,
// `reduce-scatter 264 float32 avg "bwd/mtp.head0"`, `broadcast 1 int32 root=0 -` (no
// region), `?` (not reported); `all-gather 1056 float32 (region-damaged)` in hunks only.
// The only rendering of an op the schedule tools print.
std::string FormatScheduleOp(const ScheduleOp& op);
// The inverse of FormatScheduleOp; the error says what is wrong with `line`.
absl::StatusOr<ScheduleOp> ParseScheduleOp(std::string_view line);

// Interns ops, so that schedules are vectors of small ids that compare across every run
// and baseline read through the same table.
class OpTable {
 public:
  // With `ignore_regions`, ops that differ only in their region get one id.
  explicit OpTable(bool ignore_regions = false) : ignore_regions_(ignore_regions) {}
  uint32_t Intern(ScheduleOp op);
  const ScheduleOp& op(uint32_t id) const { return ops_[id]; }
  // Whether two ops are the same collective as far as the data can tell: equal, or equal
  // but for the region where one's region is damaged (unknown matches any region).
  bool Matches(uint32_t a, uint32_t b) const;
  std::string Line(uint32_t id) const { return FormatScheduleOp(ops_[id]); }
  size_t size() const { return ops_.size(); }

 private:
  bool ignore_regions_;
  std::vector<ScheduleOp> ops_;
  std::unordered_map<std::string, uint32_t> ids_;  // by formatted line
};

// ---- A run's schedule ----------------------------------------------------------------

// Ranks of one communicator that issued the same collectives in the same order.
struct ClassSchedule {
  std::vector<int32_t> ranks;  // ascending
  std::vector<uint32_t> ops;   // OpTable ids, by sequence number
};

struct CommSchedule {
  int index = 0;      // 1-based creation order (see CommsInCreationOrder)
  int parent = 0;     // index of the communicator it was split from (0: none)
  int32_t size = 0;
  uint64_t id = 0;    // this run's id; differs between runs
  std::vector<ClassSchedule> classes;  // by lowest rank
  std::vector<int32_t> absent_ranks;   // ranks that reported nothing
};

struct JobSchedule {
  std::vector<CommSchedule> comms;  // by index
};

// The model's communicators in creation order: ordered by how many communicators their
// lowest global rank (its process's lowest, process_ranks.h) had created before them,
// then by that rank. Deterministic however the ranks' clocks and the concurrent creations
// (splits by color) interleave.
std::vector<CommIndex> CommsInCreationOrder(const JobModel& model);

// The same rule over what it reads, for callers that never hold a whole model (the Chrome
// trace export): per process its job ranks and the communicators it used, as indexes into
// `comm_sizes`, in the order of its first call on each. Returns those indexes in creation
// order.
struct CommFirstUses {
  std::vector<int32_t> ranks;  // ascending (process_ranks.h)
  std::vector<size_t> comms;
};
std::vector<size_t> CreationOrder(const std::vector<CommFirstUses>& processes, const std::vector<int32_t>& comm_sizes);

// Every communicator's collectives, rank classes formed by identical sequences. A call
// whose region is its Python call path's (no NVTX range) names its lines only when asked
// (`--code-lines`): edits move lines, and a schedule should not change with them.
JobSchedule ExtractSchedule(const JobModel& model, OpTable* table, CodeLines lines = CodeLines::kLeftOut);

// "comm 2 (size 2, split from comm 1)"
std::string CommLabel(int index, int32_t size, int parent);

// Keys that match communicators across runs (and a run to its baseline), one per
// (parent index, size) in creation order: the n-th communicator of its size among its
// parent's children (roots: among the roots).
std::vector<std::string> CommMatchKeys(const std::vector<std::pair<int, int32_t>>& parent_and_size);

// The ranks in both ascending lists (a run's rank class and a baseline's section, or a
// rank class of each run), ascending.
std::vector<int32_t> SharedRanks(const std::vector<int32_t>& a, const std::vector<int32_t>& b);

// Ranks written in full ("0-3", "0,2,5-7"), as baselines and hunks name them.
std::string ScheduleRanksText(const std::vector<int32_t>& ranks);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_SCHEDULE_H_
