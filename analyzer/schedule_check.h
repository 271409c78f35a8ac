// Check: whether a run issued the collectives its baseline says, per communicator and
// rank class, with the first difference of each failed one as a hunk; the result as
// terminal text and as JUnit XML (one testcase per communicator).
// Threading: pure functions.
#ifndef COLLWATCH_ANALYZER_SCHEDULE_CHECK_H_
#define COLLWATCH_ANALYZER_SCHEDULE_CHECK_H_

#include <string>
#include <string_view>
#include <vector>

#include "analyzer/baseline.h"
#include "analyzer/schedule.h"

namespace collwatch::analyzer {

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

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_SCHEDULE_CHECK_H_
