// Check: whether a run issued the collectives its baseline says, per communicator and
// rank class, with the first difference of each failed one as a hunk; the result as
// terminal text and as JUnit XML (one testcase per communicator).
// Threading: pure functions (CheckSchedule reads the clock to time each communicator).
#ifndef COLLWATCH_ANALYZER_SCHEDULE_CHECK_H_
#define COLLWATCH_ANALYZER_SCHEDULE_CHECK_H_

#include <string>
#include <string_view>
#include <vector>

#include "analyzer/baseline.h"
#include "analyzer/schedule.h"
#include "analyzer/schedule_hunk.h"

namespace collwatch::analyzer {

struct CommCheck {
  std::string name;     // CommLabel of the baseline's (or the run's) communicator
  bool passed = false;
  std::vector<ScheduleDifference> differences;  // empty when passed
  std::string message;  // what changed: the differences' texts (empty when passed)
  double seconds = 0;   // the comparison's time (JUnit's testcase time)
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
// What the JUnit report says beside the result.
struct JunitRun {
  std::string suite_name;  // "collwatch check FILE"
  double seconds = 0;      // the whole command's time
  // Why the check could not be made or trusted (unreadable input, data missing), as
  // `collwatch check` said it; "" when none. It becomes a testcase with an <error>, as
  // pytest --junitxml writes one for a collection error.
  std::string error;
};
// JUnit XML: one testcase per communicator, a failure's first difference as its one-line
// message and every difference in its body; the error's testcase after them.
std::string CheckJunitXml(const CheckResult& result, const JunitRun& run);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_SCHEDULE_CHECK_H_
