// Collective schedules: what each communicator's ranks issued, in order, as lines that
// compare across runs; the repeating training step of a schedule; the CI baseline file
// (writer, parser, check) and the first difference between two runs.
// Threading: plain values and pure functions; callers serialise use of one OpTable.
#ifndef COLLWATCH_ANALYZER_SCHEDULE_H_
#define COLLWATCH_ANALYZER_SCHEDULE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
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
  bool operator==(const ScheduleOp&) const = default;
};

// One baseline line: `all-gather 1056 float32 "fwd/embed"`,
// `reduce-scatter 264 float32 avg "bwd/mtp.head0"`, `broadcast 1 int32 root=0 -` (no
// region), `?` (not reported). The only rendering of an op the schedule tools print.
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

// Every communicator's collectives, rank classes formed by identical sequences.
JobSchedule ExtractSchedule(const JobModel& model, OpTable* table);

// "comm 2 (size 2, split from comm 1)"
std::string CommLabel(int index, int32_t size, int parent);

// ---- The repeating step --------------------------------------------------------------

// A schedule as written in a baseline: literal lines before the steps, one step that
// repeats, literal lines after. `steps` is false for the literal parts.
struct Segment {
  std::vector<uint32_t> ops;
  bool steps = false;     // the repeating step
  uint64_t repeat = 1;    // steps: times seen (Fold) or required (baseline; 0 = any, >= 1)
  std::vector<int> lines; // baseline line of each op (parsed baselines only)
};

// Finds the repeating step: the period p and start s that hide the most lines, i.e.
// that maximise (k - 1) * p where ops[s, s + k*p) is k copies of ops[s, s + p), k >= 2;
// ties go to the earliest start, then the shortest period. The result is prologue,
// step (repeat = k), epilogue, empty parts left out; without a repeat, one literal part.
// Runs of the same code with more or fewer identical steps fold to the same step.
std::vector<Segment> FoldSchedule(const std::vector<uint32_t>& ops);

// ---- The baseline file ---------------------------------------------------------------

struct BaselineSection {
  std::vector<int32_t> ranks;     // ascending
  std::vector<Segment> segments;  // at most one with steps = true
  int line = 0;                   // of its `ranks` line
};

struct BaselineComm {
  int index = 0;
  int parent = 0;
  int32_t size = 0;
  std::vector<BaselineSection> sections;
  int line = 0;                   // of its `comm` line
};

struct Baseline {
  int version = 1;
  std::vector<BaselineComm> comms;
};

inline constexpr int kBaselineVersion = 1;
// Limits of the parser: longer files, lines, or more ranks in all are rejected.
inline constexpr size_t kMaxBaselineBytes = 64u << 20;
inline constexpr size_t kMaxBaselineLineBytes = 64u << 10;
inline constexpr uint64_t kMaxBaselineRanks = 1u << 22;  // in all sizes, and in all rank lists
inline constexpr uint64_t kMaxStepRepeat = 1'000'000'000'000ull;

// The baseline of a run: each class folded, the step's count left open ("x N") so that
// runs with any number of identical steps give the same file. Fails when a rank reported
// nothing (a baseline needs every rank) or there is no communicator.
absl::StatusOr<Baseline> MakeBaseline(const JobSchedule& schedule);
// The file text. Nothing in it depends on the run beyond its schedule (no ids, times,
// paths or step counts): regenerating it from an unchanged program changes no byte.
std::string FormatBaseline(const Baseline& baseline, const OpTable& table);
// Reads a baseline; the error names the line and what is wrong with it. Never allocates
// more than a small multiple of the text's size (rank lists are capped in all).
absl::StatusOr<Baseline> ParseBaseline(std::string_view text, OpTable* table);

// ---- Check and diff ------------------------------------------------------------------

struct CommCheck {
  std::string name;     // CommLabel of the baseline's (or the run's) communicator
  bool passed = false;
  std::string message;  // what changed: a readable diff (empty when passed)
};

struct CheckResult {
  bool passed = false;
  std::vector<CommCheck> comms;  // baseline communicators in order, then the run's extra ones
};

// Whether each communicator of the run issued what the baseline says, rank class by
// rank class (a representative rank per class). The run may repeat the step any
// number of times (at least once) unless the baseline pins the count.
CheckResult CheckSchedule(const Baseline& baseline, const JobSchedule& run, const OpTable& table);
// Text for the terminal: one line per communicator, the diffs of the failed ones.
std::string CheckReportText(const CheckResult& result, std::string_view baseline_name,
                            std::string_view run_name);
// JUnit XML: one testcase per communicator, the diff as the failure message.
std::string CheckJunitXml(const CheckResult& result, std::string_view suite_name);

struct ScheduleDiff {
  bool identical = true;
  std::string text;  // unified-diff-like, a hunk per differing communicator / rank class
};

// The first point where two runs' schedules differ, per communicator (matched by
// creation order, size and parent), with context.
ScheduleDiff DiffSchedules(const JobSchedule& a, const JobSchedule& b, const OpTable& table,
                           std::string_view label_a, std::string_view label_b);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_SCHEDULE_H_
