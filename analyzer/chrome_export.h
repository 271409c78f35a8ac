// A job's NCCL calls as Chrome trace-event JSON, for Perfetto (ui.perfetto.dev) and
// chrome://tracing: a process per rank, a track per communicator, a slice per call from
// enter to completion, an instant event where a call never returned or completed, and each
// finding as a marker at its first bad record with arrows between the ranks' calls of its
// sequence number. Written while the records are read, in two passes over the processes
// (the first learns the job's first call, end, communicators and ranks; the second
// writes), never holding the job: memory follows one process's calls in flight.
// Threading: single-threaded; callers serialise.
#ifndef COLLWATCH_ANALYZER_CHROME_EXPORT_H_
#define COLLWATCH_ANALYZER_CHROME_EXPORT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <unordered_map>
#include <vector>

#include "analyzer/call_stream.h"
#include "analyzer/finding.h"
#include "analyzer/job_model.h"
#include "nlohmann/json.hpp"
#include "process/process_update.h"
#include "process/rank_membership.h"

namespace collwatch::analyzer {

// A call one arc of a WAIT_CYCLE or ORDER_INVERSION names: the call a rank waits in.
struct TraceCycleCall {
  uint64_t comm_id = 0;
  uint64_t seq = 0;
  int32_t comm_rank = -1;
  std::string op;     // ring_names' OpName: "all-reduce", "send"
  int32_t peer = -1;  // a send's or receive's peer (communicator rank); -1 for a collective
};
// A finding as the trace marks it.
struct TraceMarker {
  std::string kind;      // "PATH_DIVERGENCE"
  std::string headline;
  uint64_t comm_id = 0;
  uint64_t seq = 0;      // 0: the communicator's creation
  // `seq` numbers one rank's sends (or receives) to one peer: the arrow joins the send and
  // the receive of the ranks it names.
  bool point_to_point = false;
  std::vector<int32_t> ranks;  // the communicator ranks it names (its classes, the lagging)
  int64_t first_bad_ns = 0;    // CLOCK_REALTIME of its first bad record (0: not known)
  // WAIT_CYCLE, ORDER_INVERSION: each arc's call in cycle order, on communicators of their
  // own; the arrows go round them, the last back to the first.
  std::vector<TraceCycleCall> cycle;
};
TraceMarker MarkerOf(const Finding& finding);
// The findings of a report.json (docs/schema/report.schema.json: a report written by
// `collwatch run` or `analyze --json`) as markers; one whose kind, communicator or
// sequence number cannot be read is left out and counted in `*unreadable`.
std::vector<TraceMarker> MarkersFromReport(const nlohmann::json& report, size_t* unreadable);

struct ChromeExportOptions {
  // The CLOCK_REALTIME nanosecond that ts 0 stands for (0: the Unix epoch, a Kineto
  // trace's baseTimeNanoseconds, an Nsight Systems session's start). Unset: the job's
  // first call.
  std::optional<int64_t> time_base_ns;
  // Only the processes holding one of these job ranks (process_ranks.h); unset: all.
  std::optional<std::vector<int32_t>> ranks;
  // The window, in seconds from the job's first call: the calls that overlap it and the
  // markers inside it.
  double since_s = 0;
  std::optional<double> until_s;
  std::vector<TraceMarker> markers;
};

struct ChromeExportStats {
  uint64_t slices = 0;      // "X" events
  uint64_t unfinished = 0;  // calls that never returned or completed ("i" events)
  uint64_t processes = 0;   // written
  uint64_t ranks = 0;       // job ranks those processes hold (process_ranks.h)
  uint64_t processes_left_out = 0;  // by the rank filter
  uint64_t calls_outside = 0;       // outside the window
  uint64_t markers = 0;     // findings marked ("i" events of scope "g")
  uint64_t arrows = 0;      // flow arrows between calls of a finding's sequence number
};

class ChromeTraceExport {
 public:
  explicit ChromeTraceExport(ChromeExportOptions options);
  ~ChromeTraceExport();

  // Each pass visits the same processes in the same order. BeginProcess says whether the
  // process is wanted (false: left out by the rank filter; give it no pieces and no
  // EndProcess); its records then come in pieces (JobModel::Apply's form, names before
  // the records that use them), then EndProcess.
  bool BeginProcess(const ProcessInfo& info);
  void AddPiece(const ProcessUpdate& piece);
  void EndProcess();
  // Between the passes: writes the trace's head to `out`, which must outlive Finish.
  void StartWriting(std::ostream& out);
  // After the second pass: the markers, their arrows and the trace's end.
  ChromeExportStats Finish();

 private:
  // What the first pass learns of one process.
  struct Surveyed {
    ProcessInfo info;
    std::vector<CommMembership> memberships;
    std::vector<uint64_t> comms_by_first_use;
  };
  // Where an arrow of marker `marker` starts or ends.
  struct Anchor {
    size_t marker = 0;
    int64_t pid = 0;
    int64_t tid = 0;
    int64_t enter_ns = 0;
    size_t arc = 0;  // a cycle's: the arc whose call it is
  };

  void SurveyCall(const JobModel& model, uint32_t index, const Call& call);
  void WriteCall(const JobModel& model, const Call& call);
  void EndSurvey();
  void Write(const nlohmann::json& event);
  double Micros(int64_t realtime_ns) const;
  nlohmann::json CallArgs(const JobModel& model, const Call& call, const Comm& comm);

  ChromeExportOptions options_;
  bool writing_ = false;
  std::unique_ptr<CallStream> stream_;
  size_t ordinal_ = 0;  // the process being read, in the pass

  // The first pass's findings.
  std::vector<Surveyed> surveyed_;
  std::map<uint64_t, uint32_t> first_use_;  // the process being read: comm id -> first call index
  int64_t first_call_ns_ = 0;
  int64_t end_ns_ = 0;
  std::map<uint64_t, int32_t> comm_sizes_;
  std::map<uint64_t, int> comm_index_;  // 1-based creation order
  std::vector<std::vector<int32_t>> ranks_of_;

  // The second pass.
  std::ostream* out_ = nullptr;
  bool first_event_ = true;
  int64_t base_ns_ = 0;
  int64_t since_ns_ = INT64_MIN;  // the window, CLOCK_REALTIME
  int64_t until_ns_ = INT64_MAX;
  int64_t pid_ = 0;
  std::map<uint64_t, std::vector<int64_t>> lane_ends_;  // per communicator: end of each track
  std::unordered_map<CallPathId, nlohmann::json> call_path_args_;  // each path's args, made once
  std::multimap<uint64_t, size_t> markers_by_comm_;
  std::vector<Anchor> anchors_;
  ChromeExportStats stats_;
};

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_CHROME_EXPORT_H_
