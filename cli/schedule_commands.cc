// The schedule commands (see schedule_commands.h): loading, files, exit statuses.
#include "cli/schedule_commands.h"

#include <chrono>
#include <iostream>
#include <sstream>
#include <utility>

#include "analyzer/baseline.h"
#include "analyzer/report.h"
#include "analyzer/schedule.h"
#include "analyzer/schedule_check.h"
#include "analyzer/schedule_diff.h"
#include "analyzer/schedule_json.h"
#include "cli/trace_loader.h"
#include "files/safe_files.h"
#include "files/safe_text.h"

namespace collwatch {
namespace {

using analyzer::JobModel;
using analyzer::JobSchedule;
using analyzer::OpTable;

// What `model`'s data lacks of the job's (analyzer::DataGapText), "" when it is whole.
std::string DataGaps(const JobModel& model, const LoadSummary& summary) {
  analyzer::ReportInfo info = analyzer::DescribeJob(model);
  info.data_gaps.insert(info.data_gaps.begin(), summary.warnings.begin(), summary.warnings.end());
  return analyzer::DataGapText(info);
}

std::string RunLabel(const std::string& dir, const LoadSummary& summary) {
  return summary.job.empty() ? dir : dir + " (job " + summary.job + ")";
}

// Writes `text` as `file` (files/safe_files.h: whole, through an exclusive temporary;
// "-": `out`).
bool WriteTextFile(const std::string& command, const std::string& file, const std::string& text, std::ostream& out,
                   std::ostream& err) {
  if (file == "-") {
    out << text;
    return static_cast<bool>(out);
  }
  if (absl::Status written = WriteFileReplacing(file, text); !written.ok()) {
    err << "collwatch " << command << ": " << written.message() << "\n";
    return false;
  }
  return true;
}

// The baseline file's text; false (with a message) when it cannot be read or is too large.
bool ReadBaselineFile(const std::string& file, std::string* text, std::ostream& err) {
  absl::StatusOr<std::string> read = ReadRegularFile(file, analyzer::kMaxBaselineBytes);
  if (!read.ok()) {
    err << "collwatch check: baseline " << read.status().message() << "\n";
    return false;
  }
  *text = *std::move(read);
  return true;
}

}  // namespace

int RunDiffCommand(const DiffCommandOptions& options, std::ostream& out, std::ostream& err) {
  const std::string& dir_a = options.dir_a;
  const std::string& dir_b = options.dir_b;
  JobModel model_a, model_b;
  LoadSummary summary_a, summary_b;
  if (!LoadTracesForCommand("diff", dir_a, &model_a, &summary_a, err) ||
      !LoadTracesForCommand("diff", dir_b, &model_b, &summary_b, err)) {
    return kExitBadInput;
  }
  OpTable table(options.ignore_regions);
  const analyzer::CodeLines lines = options.code_lines ? analyzer::CodeLines::kShown : analyzer::CodeLines::kLeftOut;
  const JobSchedule a = analyzer::ExtractSchedule(model_a, &table, lines);
  const JobSchedule b = analyzer::ExtractSchedule(model_b, &table, lines);
  if (a.comms.empty() && b.comms.empty()) {
    err << "collwatch diff: neither run recorded an NCCL communicator\n";
    return kExitBadInput;
  }
  const analyzer::ScheduleDiff diff =
      analyzer::DiffSchedules(a, b, table, RunLabel(dir_a, summary_a), RunLabel(dir_b, summary_b));
  const analyzer::ScheduleRun run_a{dir_a, summary_a.job, DataGaps(model_a, summary_a)};
  const analyzer::ScheduleRun run_b{dir_b, summary_b.job, DataGaps(model_b, summary_b)};
  if (options.json) {
    out << SafeJsonText(analyzer::DiffJson(diff, run_a, run_b), 2) << "\n";
  } else {
    out << diff.text;
  }
  if (!diff.identical) return kExitChanged;
  // The same schedules over incomplete data prove nothing: the missing part may differ.
  for (const auto& [dir, gaps] : {std::pair{dir_a, run_a.data_gaps}, std::pair{dir_b, run_b.data_gaps}}) {
    if (gaps.empty()) continue;
    err << "collwatch diff: " << dir << ": " << gaps << "; no difference in what there is\n";
    return kExitBadInput;
  }
  return kExitSame;
}

int RunBaselineCommand(const BaselineCommandOptions& options, std::ostream& out, std::ostream& err) {
  const std::string& dir = options.dir;
  const std::string& file = options.file;
  JobModel model;
  LoadSummary summary;
  if (!LoadTracesForCommand("baseline", dir, &model, &summary, err)) return kExitBadInput;
  if (const std::string gaps = DataGaps(model, summary); !gaps.empty()) {
    err << "collwatch baseline: " << dir << ": " << gaps << "; no baseline is made of part of a run\n";
    return kExitBadInput;
  }
  OpTable table;
  const JobSchedule schedule = analyzer::ExtractSchedule(
      model, &table, options.code_lines ? analyzer::CodeLines::kShown : analyzer::CodeLines::kLeftOut);
  absl::StatusOr<analyzer::Baseline> baseline = analyzer::MakeBaseline(schedule);
  if (!baseline.ok()) {
    err << "collwatch baseline: " << dir << ": " << baseline.status().message() << "\n";
    return kExitBadInput;
  }
  baseline->code_lines = options.code_lines;
  if (!WriteTextFile("baseline", file, analyzer::FormatBaseline(*baseline, table), out, err)) return kExitBadInput;
  if (file != "-") {
    size_t sections = 0, steps = 0;
    for (const analyzer::BaselineComm& comm : baseline->comms) {
      sections += comm.sections.size();
      for (const analyzer::BaselineSection& section : comm.sections) {
        for (const analyzer::Segment& segment : section.segments) steps += segment.steps ? 1 : 0;
      }
    }
    out << "collwatch baseline: wrote " << file << ": " << baseline->comms.size() << " communicator"
        << (baseline->comms.size() == 1 ? "" : "s") << ", " << sections << " rank class"
        << (sections == 1 ? "" : "es") << ", " << steps << " with a repeating step; review it and commit it\n";
  }
  return kExitSame;
}

namespace {

// `check` up to its exit status: `result` holds what was compared, where it came to that.
int CheckAgainstBaseline(const CheckCommandOptions& options, analyzer::CheckResult* result, std::ostream& out,
                         std::ostream& err) {
  std::string text;
  if (!ReadBaselineFile(options.baseline_file, &text, err)) return kExitBadInput;
  OpTable table(options.ignore_regions);
  absl::StatusOr<analyzer::Baseline> baseline = analyzer::ParseBaseline(text, &table);
  if (!baseline.ok()) {
    err << "collwatch check: " << options.baseline_file << ": " << baseline.status().message() << "\n";
    return kExitBadInput;
  }
  JobModel model;
  LoadSummary summary;
  if (!LoadTracesForCommand("check", options.dir, &model, &summary, err)) return kExitBadInput;
  const JobSchedule run = analyzer::ExtractSchedule(
      model, &table, baseline->code_lines ? analyzer::CodeLines::kShown : analyzer::CodeLines::kLeftOut);
  *result = analyzer::CheckSchedule(*baseline, run, table);
  const std::string gaps = DataGaps(model, summary);
  if (options.json) {
    const analyzer::ScheduleRun checked{options.dir, summary.job, gaps};
    out << SafeJsonText(analyzer::CheckJson(*result, options.baseline_file, checked), 2) << "\n";
  } else {
    out << analyzer::CheckReportText(*result, options.baseline_file, RunLabel(options.dir, summary));
  }
  if (!result->passed) return kExitChanged;
  if (!gaps.empty()) {
    err << "collwatch check: " << options.dir << ": " << gaps << "; what there is matches the baseline, which "
        << "proves nothing of the rest\n";
    return kExitBadInput;
  }
  return kExitSame;
}

}  // namespace

int RunCheckCommand(const CheckCommandOptions& options, std::ostream& out, std::ostream& err) {
  const auto start = std::chrono::steady_clock::now();
  // What the check says on `err` is also the JUnit report's error case, when it could not
  // check (as pytest --junitxml writes one for a collection error).
  std::ostringstream said;
  analyzer::CheckResult result;
  const int status = CheckAgainstBaseline(options, &result, out, said);
  err << said.str();
  if (options.junit_file.empty()) return status;
  analyzer::JunitRun junit;
  junit.suite_name = "collwatch check " + options.baseline_file;
  junit.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (status == kExitBadInput) {
    junit.error = said.str();
    while (!junit.error.empty() && junit.error.back() == '\n') junit.error.pop_back();
    if (junit.error.empty()) junit.error = "collwatch check: bad input";
  }
  if (!WriteTextFile("check", options.junit_file, analyzer::CheckJunitXml(result, junit), out, err)) {
    return kExitBadInput;
  }
  return status;
}

}  // namespace collwatch
