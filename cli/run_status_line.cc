// Formats a LiveSummary; the communicator id is printed in hex, as `dump` and the
// dashboard print it. Threading: see run_status_line.h.
#include "cli/run_status_line.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace collwatch {

std::string RunStatusLine(const LiveSummary& summary) {
  std::string line = absl::StrFormat("collwatch: %d/%d ranks reporting", summary.ranks_reporting, summary.ranks_known);
  // Processes holding several ranks (ncclCommInitAll, grouped init): say how many processes.
  if (summary.processes_known != summary.ranks_known) {
    absl::StrAppendFormat(&line, " (%d processes)", summary.processes_known);
  }
  absl::StrAppendFormat(&line, ", %.1f coll/s, %d events", summary.collectives_per_second, summary.events);
  if (summary.ranks_lost > 0) absl::StrAppendFormat(&line, ", %d lost", summary.ranks_lost);
  if (summary.oldest_inflight_comm != 0) {
    absl::StrAppendFormat(&line, ", oldest in flight: comm %x seq %d for %.1f s", summary.oldest_inflight_comm,
                          summary.oldest_inflight_seq, summary.oldest_inflight_age_s);
  } else {
    absl::StrAppend(&line, ", nothing in flight");
  }
  return line;
}

}  // namespace collwatch
