// Diff: the first point where two runs' schedules differ, per communicator (matched by
// creation order, size and parent) and per pair of rank classes that share ranks, as
// hunks (schedule_hunk.h).
// Threading: pure functions.
#ifndef COLLWATCH_ANALYZER_SCHEDULE_DIFF_H_
#define COLLWATCH_ANALYZER_SCHEDULE_DIFF_H_

#include <string>
#include <string_view>
#include <vector>

#include "analyzer/schedule.h"
#include "analyzer/schedule_hunk.h"

namespace collwatch::analyzer {

struct ScheduleDiff {
  bool identical = true;
  std::vector<ScheduleDifference> differences;  // in the order the text shows them
  std::string text;  // unified-diff-like, a hunk per differing communicator / rank class
};

// The first point where two runs' schedules differ, per communicator (matched by
// creation order, size and parent), with context.
ScheduleDiff DiffSchedules(const JobSchedule& a, const JobSchedule& b, const OpTable& table,
                           std::string_view label_a, std::string_view label_b);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_SCHEDULE_DIFF_H_
