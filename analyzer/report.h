// Reports: findings rendered for people (report.txt, the terminal) and for programs
// (report.json, the contract docs/findings.md describes). One function renders a finding in each form.
// Threading: pure functions.
#ifndef COLLWATCH_ANALYZER_REPORT_H_
#define COLLWATCH_ANALYZER_REPORT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/finding.h"
#include "analyzer/job_model.h"
#include "analyzer/liveness.h"
#include "nlohmann/json.hpp"

namespace collwatch::analyzer {

// "2026-11-26T08:02:22.006Z" (UTC, milliseconds; "" for 0): the one form of a time in
// the reports and on the dashboard.
std::string WallClock(int64_t realtime_ns);
// WallClock's inverse: CLOCK_REALTIME ns of "2026-11-26T08:02:22.006Z" (to the
// millisecond it keeps); nullopt for "" or any other text.
std::optional<int64_t> ParseWallClock(std::string_view text);

// How one process of the job ended (report.json `ranks`).
struct RankEnding {
  int32_t global_rank = -1;  // RANK, -1 unknown
  int32_t pid = 0;
  std::string host;
  ProcessEnd end = ProcessEnd::kRunning;
  std::string ended_text;              // EndedText: "exited with 3", ... ("" running)
  bool failed = false;                 // EndedBadly: died, was killed, exited non-zero
  std::optional<int32_t> exit_code;    // the status it passed to exit(), when recorded
  std::optional<std::string> last_call;  // its last NCCL call, when any is known
  // When it ended (exited, killed or crashed): its ring's last sign of life, a heartbeat
  // (every 100 ms) or a record, CLOCK_REALTIME. 0: running, or not known.
  int64_t ended_ns = 0;
  // Its last collective's communicator and sequence number (0: none known): with ends too
  // close to order, the ranks the others waited for in NCCL show who stopped first.
  uint64_t last_collective_comm = 0;
  uint64_t last_collective_seq = 0;
  // Why the preload made no ring for it (its .noring note), "" when it had one or none
  // is known: its calls were never checked, so no verdict is healthy with it.
  std::string not_recorded;
};

// What the report covers, beside the findings.
struct ReportInfo {
  std::string job;
  std::string source;             // folder or rings analysed
  bool online = false;            // found while the job ran (collector) or post-mortem
  int processes = 0;
  int rank_count = 0;             // job ranks those processes hold (analyzer/process_ranks.h)
  int communicators = 0;
  uint64_t calls = 0;
  uint64_t lost_records = 0;      // records the rings lost before they were read
  std::vector<std::string> notes; // what the report says of its source
  // What the data read lacks of the job's, one phrase each (a rank's trace skipped as
  // damaged, a torn tail, records lost before they were shipped or analysed), and the
  // ranks of the world size with no trace at all: a verdict over such data is never
  // "healthy" (the missing part may hold the problem).
  std::vector<std::string> data_gaps;
  std::vector<int32_t> missing_ranks;
  int32_t world_size = 0;         // when known (missing_ranks is empty otherwise)
  std::vector<RankEnding> ranks;  // one per process, by global rank
  std::optional<int> command_exit_status;  // the job's command (collwatch run), when known
  bool stopped_by_collwatch = false;       // collwatch run --kill-on-hang stopped the job
  // False where `calls` is not known here (`collwatch run` with an external collector).
  // Known and 0: nothing was checked, which is never healthy.
  bool calls_counted = true;
  // Streams the collector refused as another job's: data of this job that never came in.
  std::vector<RefusedStream> refused_streams;
};
ReportInfo DescribeJob(const JobModel& model);
// `collwatch run --kill-on-hang` stopped the job (the model was frozen then): the
// processes still running at that moment ended by its hand, not the job's.
void NoteStoppedByCollwatch(ReportInfo* info);
// What the data lacks, in words: "the data is incomplete, and the missing part may hold
// the problem: rank 3 of world size 4 left no trace; ..." ("" when it is whole). A rank
// the preload made no ring for is named with its reason ("rank 2 (pid 7) was not
// recorded (no ring: ...)"), not as one that left no trace.
std::string DataGapText(const ReportInfo& info);
// report.json's `healthy`: no finding, no process that died, was killed or exited with a
// status other than 0, the command exited with 0 (when known; a job collwatch stopped has
// its finding), the data is the whole job's (no data gap, no missing rank, no refused
// stream), and at least one NCCL call was recorded (where counted).
// Resolved stalls (stragglers, Finding::resolution) are kept in the report and left out.
bool Healthy(const std::vector<Finding>& findings, const ReportInfo& info);
// Why not, in words: "1 finding; 2 ranks were killed or crashed; ..." ("" when healthy).
std::string WhyNotHealthy(const std::vector<Finding>& findings, const ReportInfo& info);
// When every rank ended badly: which ended first, how, and that the others followed
// (launchers such as torchrun stop the rest when one fails), or that the records cannot
// tell the first apart. Ends too close to order are told apart by NCCL progress (the
// ranks the others waited for) only where no finding says the ranks' schedules differ:
// after a divergence the ranks' sequence numbers say nothing of who stopped first. ""
// unless every rank (two or more) failed (job_description.cc).
std::string WhoEndedFirstText(const ReportInfo& info, const std::vector<Finding>& findings);
// The findings that are not resolved stalls: the problems.
size_t UnresolvedCount(const std::vector<Finding>& findings);
// Of those, the ones that hold the job up now (an ORDER_INVERSION that got through does
// not): what `run --kill-on-hang` stops the job for.
size_t HangCount(const std::vector<Finding>& findings);

// A WAIT_CYCLE's or ORDER_INVERSION's arcs (report.json `wait_cycle`; null for others),
// and every such finding as one Graphviz graph, DIR/wait-for.dot ("" when none)
// (wait_graph.cc).
nlohmann::json WaitCycleJson(const Finding& finding);
std::string WaitForGraphDot(const std::vector<Finding>& findings);

nlohmann::json FindingJson(const Finding& finding);
// A call path's frames, innermost first: [{"file", "function", "line"}, ...] (report.json,
// `collwatch dump --json`).
nlohmann::json CallFramesJson(const CallPath& path);
// {"findings": [...], "healthy": bool, "ranks": [...], "job": ..., ...}
nlohmann::json ReportJson(const std::vector<Finding>& findings, const ReportInfo& info);
// report.json's text. Names from rings (NVTX regions, job ids) and paths may be any bytes:
// those that are not UTF-8 are written as U+FFFD, as JSON requires.
std::string ReportJsonText(const std::vector<Finding>& findings, const ReportInfo& info);

// A finding for a terminal: headline, summary, rank classes, the aligned context. Its
// prose (the summary) is folded at `prose_width` columns as report.txt has it; 0 leaves it
// on one line, for a screen that wraps it at its own width (the dashboard).
inline constexpr size_t kReportProseWidth = 96;
std::string FindingText(const Finding& finding, size_t prose_width = kReportProseWidth);
std::string ReportText(const std::vector<Finding>& findings, const ReportInfo& info);

// Writes DIR/report.json and DIR/report.txt (and DIR/wait-for.dot for a wait cycle); false (and `error`) when they cannot be written.
bool WriteReportFiles(const std::string& dir, const std::vector<Finding>& findings, const ReportInfo& info,
                      std::string* error);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_REPORT_H_
