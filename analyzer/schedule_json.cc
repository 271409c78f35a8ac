// diff and check as JSON (see schedule_json.h): each field read from the differences'
// data, the words taken as the text shows them. Threading: pure functions.
#include "analyzer/schedule_json.h"

#include "files/json_contract.h"
#include "files/version.h"

namespace collwatch::analyzer {
namespace {

using nlohmann::json;

json DifferencesJson(const std::vector<ScheduleDifference>& differences) {
  json list = json::array();
  for (const ScheduleDifference& difference : differences) {
    list.push_back({{"kind", std::string(DifferenceKindName(difference.kind))},
                    {"communicator", difference.communicator},
                    {"ranks", difference.ranks},
                    {"collective", difference.collective == 0 ? json(nullptr) : json(difference.collective)},
                    {"headline", difference.headline},
                    {"text", difference.text}});
  }
  return list;
}

json RunJson(const ScheduleRun& run) {
  return {{"dir", run.dir}, {"job", run.job}, {"data_gaps", run.data_gaps}};
}

}  // namespace

json DiffJson(const ScheduleDiff& diff, const ScheduleRun& a, const ScheduleRun& b) {
  return {{kSchemaVersionKey, kDiffSchemaVersion},
          {"collwatch_version", std::string(CollwatchVersionText())},
          {"a", RunJson(a)},
          {"b", RunJson(b)},
          {"identical", diff.identical},
          {"complete", a.data_gaps.empty() && b.data_gaps.empty()},
          {"differences", DifferencesJson(diff.differences)}};
}

json CheckJson(const CheckResult& result, const std::string& baseline_file, const ScheduleRun& run) {
  json comms = json::array();
  for (const CommCheck& comm : result.comms) {
    comms.push_back({{"name", comm.name},
                     {"passed", comm.passed},
                     {"seconds", comm.seconds},
                     {"differences", DifferencesJson(comm.differences)}});
  }
  return {{kSchemaVersionKey, kCheckSchemaVersion},
          {"collwatch_version", std::string(CollwatchVersionText())},
          {"baseline", baseline_file},
          {"run", RunJson(run)},
          {"passed", result.passed},
          {"complete", run.data_gaps.empty()},
          {"communicators", comms}};
}

}  // namespace collwatch::analyzer
