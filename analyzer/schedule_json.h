// `collwatch diff --json` and `check --json`: the differences diff and check find, as the
// objects docs/schema/diff.schema.json and check.schema.json describe.
// Threading: pure functions.
#ifndef COLLWATCH_ANALYZER_SCHEDULE_JSON_H_
#define COLLWATCH_ANALYZER_SCHEDULE_JSON_H_

#include <string>

#include "analyzer/schedule_check.h"
#include "analyzer/schedule_diff.h"
#include "nlohmann/json.hpp"

namespace collwatch::analyzer {

// A run as diff and check read it.
struct ScheduleRun {
  std::string dir;        // the trace folder named on the command line
  std::string job;        // the job read there ("" when the folder named none)
  std::string data_gaps;  // DataGapText of what was read: "" when it is the whole run's
};

nlohmann::json DiffJson(const ScheduleDiff& diff, const ScheduleRun& a, const ScheduleRun& b);
nlohmann::json CheckJson(const CheckResult& result, const std::string& baseline_file, const ScheduleRun& run);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_SCHEDULE_JSON_H_
