// Reports: findings rendered for people (report.txt, the terminal) and for programs
// (report.json, DESIGN.md's contract). One function renders a finding in each form.
// Threading: pure functions.
#ifndef COLLWATCH_ANALYZER_REPORT_H_
#define COLLWATCH_ANALYZER_REPORT_H_

#include <string>
#include <vector>

#include "analyzer/finding.h"
#include "analyzer/job_model.h"
#include "nlohmann/json.hpp"

namespace collwatch::analyzer {

// What the report covers, beside the findings.
struct ReportInfo {
  std::string job;
  std::string source;             // folder or rings analysed
  bool online = false;            // found while the job ran (collector) or post-mortem
  int processes = 0;
  int communicators = 0;
  uint64_t calls = 0;
  uint64_t lost_records = 0;      // records the rings lost before they were read
  std::vector<std::string> notes; // e.g. damaged traces skipped, torn tails
};
ReportInfo DescribeJob(const JobModel& model);

nlohmann::json FindingJson(const Finding& finding);
// {"findings": [...], "healthy": bool, "job": ..., ...}
nlohmann::json ReportJson(const std::vector<Finding>& findings, const ReportInfo& info);
// report.json's text. Names from rings (NVTX regions, job ids) and paths may be any bytes:
// those that are not UTF-8 are written as U+FFFD, as JSON requires.
std::string ReportJsonText(const std::vector<Finding>& findings, const ReportInfo& info);

// A finding for a terminal: headline, summary, rank classes, the aligned context.
std::string FindingText(const Finding& finding);
std::string ReportText(const std::vector<Finding>& findings, const ReportInfo& info);

// Writes DIR/report.json and DIR/report.txt; false (and `error`) when they cannot be written.
bool WriteReportFiles(const std::string& dir, const std::vector<Finding>& findings, const ReportInfo& info,
                      std::string* error);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_REPORT_H_
