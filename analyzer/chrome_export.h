// A job's NCCL calls as Chrome trace-event JSON, for Perfetto (ui.perfetto.dev) and
// chrome://tracing: a process per rank, a track per communicator, a slice per call from
// enter to completion, and an instant event where a call never returned or completed.
// Threading: reads the model; callers serialise.
#ifndef COLLWATCH_ANALYZER_CHROME_EXPORT_H_
#define COLLWATCH_ANALYZER_CHROME_EXPORT_H_

#include <cstdint>
#include <ostream>

#include "analyzer/job_model.h"

namespace collwatch::analyzer {

struct ChromeExportStats {
  uint64_t slices = 0;     // "X" events
  uint64_t unfinished = 0; // calls that never returned or completed ("i" events)
  uint64_t processes = 0;
  uint64_t ranks = 0;      // job ranks those processes hold (process_ranks.h)
};

// Writes {"traceEvents": [...], ...} to `out`, one event per line. Times are microseconds
// from the first call of the job; the realtime origin is in "otherData". Calls on the same
// communicator that overlap in time (asynchronous GPU collectives) go to extra tracks of
// that communicator, so that every track's slices nest. Region names that are not UTF-8
// are written with replacement characters.
ChromeExportStats WriteChromeTrace(const JobModel& model, std::ostream& out);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_CHROME_EXPORT_H_
