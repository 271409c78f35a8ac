// report.json and report.txt: the one place a finding is rendered.
#include "analyzer/report.h"

#include <ctime>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace collwatch::analyzer {
namespace {

std::string WallClock(int64_t realtime_ns) {
  if (realtime_ns <= 0) return "";
  const time_t seconds = static_cast<time_t>(realtime_ns / 1'000'000'000);
  tm utc{};
  gmtime_r(&seconds, &utc);
  char text[40];
  strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  return absl::StrFormat("%s.%03dZ", text, (realtime_ns / 1'000'000) % 1000);
}

// Prose folded to `width` columns with an indent.
std::string Fold(const std::string& text, size_t width, const std::string& indent) {
  std::string out = indent;
  size_t column = indent.size();
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const size_t word = end - start;
    if (column > indent.size() && column + 1 + word > width) {
      absl::StrAppend(&out, "\n", indent);
      column = indent.size();
    } else if (column > indent.size()) {
      out += ' ';
      ++column;
    }
    out.append(text, start, word);
    column += word;
    start = end + 1;
  }
  return out;
}

}  // namespace

ReportInfo DescribeJob(const JobModel& model) {
  ReportInfo info;
  info.processes = static_cast<int>(model.process_count());
  info.communicators = static_cast<int>(model.comms().size());
  for (size_t i = 0; i < model.process_count(); ++i) {
    info.calls += model.process(static_cast<ProcessId>(i)).calls.size();
    info.lost_records += model.process(static_cast<ProcessId>(i)).lost_records;
  }
  return info;
}

nlohmann::json FindingJson(const Finding& finding) {
  nlohmann::json classes = nlohmann::json::array();
  nlohmann::json labels = nlohmann::json::array();
  for (const RankClass& rank_class : finding.rank_classes) {
    classes.push_back(rank_class.ranks);
    labels.push_back(rank_class.label);
  }
  nlohmann::json context = nlohmann::json::array();
  for (const ClassContext& entry : finding.context) context.push_back({{"ranks", entry.ranks}, {"calls", entry.lines}});
  nlohmann::json other_readings = nlohmann::json::array();
  for (FindingKind kind : finding.other_readings) other_readings.push_back(FindingKindName(kind));
  return {{"kind", FindingKindName(finding.kind)},
          {"decided", finding.decided},
          {"other_readings", other_readings},
          {"comm", absl::StrFormat("%016x", finding.comm_id)},
          {"seq", finding.seq},
          {"rank_classes", classes},
          {"rank_class_labels", labels},
          {"lagging_ranks", finding.lagging_ranks},
          {"regions", finding.regions},
          {"detect_latency_s", finding.detect_latency_s},
          {"first_bad_time", WallClock(finding.first_bad_ns)},
          {"found_time", WallClock(finding.found_ns)},
          {"headline", finding.headline},
          {"summary", finding.summary},
          {"context", context}};
}

nlohmann::json ReportJson(const std::vector<Finding>& findings, const ReportInfo& info) {
  nlohmann::json list = nlohmann::json::array();
  for (const Finding& finding : findings) list.push_back(FindingJson(finding));
  return {{"findings", list},
          {"healthy", findings.empty()},
          {"job", info.job},
          {"source", info.source},
          {"online", info.online},
          {"processes", info.processes},
          {"communicators", info.communicators},
          {"calls", info.calls},
          {"lost_records", info.lost_records},
          {"notes", info.notes}};
}

std::string FindingText(const Finding& finding) {
  std::string text = absl::StrCat(finding.headline, "\n");
  absl::StrAppendFormat(&text, "  detected %.2f s after the first bad record (%s)\n", finding.detect_latency_s,
                        WallClock(finding.first_bad_ns));
  for (const RankClass& rank_class : finding.rank_classes) {
    absl::StrAppendFormat(&text, "  %-5s %-16s %s\n", rank_class.ranks.size() == 1 ? "rank" : "ranks",
                          RankListText(rank_class.ranks), rank_class.label);
  }
  if (!finding.lagging_ranks.empty()) {
    absl::StrAppendFormat(&text, "  lagging          %s\n", RankListText(finding.lagging_ranks));
  }
  if (!finding.regions.empty()) {
    absl::StrAppend(&text, "  regions          ");
    for (size_t i = 0; i < finding.regions.size(); ++i) absl::StrAppend(&text, i == 0 ? "" : ", ", finding.regions[i]);
    absl::StrAppend(&text, "\n");
  }
  absl::StrAppend(&text, "\n", Fold(finding.summary, 96, "  "), "\n");
  for (const ClassContext& context : finding.context) {
    absl::StrAppend(&text, "\n  ", context.ranks.size() == 1 ? "rank " : "ranks ", RankListText(context.ranks), ":\n");
    for (const std::string& line : context.lines) absl::StrAppend(&text, "    ", line, "\n");
  }
  return text;
}

std::string ReportJsonText(const std::vector<Finding>& findings, const ReportInfo& info) {
  return ReportJson(findings, info).dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string ReportText(const std::vector<Finding>& findings, const ReportInfo& info) {
  std::string text = absl::StrFormat("collwatch report%s%s (%s", info.job.empty() ? "" : " for job ", info.job,
                                     info.online ? "live" : "post-mortem");
  if (info.processes > 0) {
    absl::StrAppendFormat(&text, ": %d processes, %d communicators, %d NCCL calls", info.processes,
                          info.communicators, info.calls);
  }
  if (!info.source.empty()) absl::StrAppend(&text, "; from ", info.source);
  absl::StrAppend(&text, ")\n");
  if (info.lost_records > 0) {
    absl::StrAppendFormat(&text, "warning: %d records were lost before they were read; gaps are skipped\n",
                          info.lost_records);
  }
  for (const std::string& note : info.notes) absl::StrAppend(&text, "note: ", note, "\n");
  if (findings.empty()) {
    absl::StrAppend(&text, "\nNo findings: every communicator's ranks issued the same collectives in the same "
                           "order, and nothing stalled.\n");
    return text;
  }
  absl::StrAppendFormat(&text, "\n%d finding%s; the first is the cause, later ones may be its echoes.\n",
                        findings.size(), findings.size() == 1 ? "" : "s");
  for (size_t i = 0; i < findings.size(); ++i) absl::StrAppend(&text, "\n[", i + 1, "] ", FindingText(findings[i]));
  return text;
}

bool WriteReportFiles(const std::string& dir, const std::vector<Finding>& findings, const ReportInfo& info,
                      std::string* error) {
  const std::string json_path = dir + "/report.json";
  const std::string text_path = dir + "/report.txt";
  std::ofstream json(json_path);
  json << ReportJsonText(findings, info) << "\n";
  std::ofstream text(text_path);
  text << ReportText(findings, info);
  json.close();
  text.close();
  if (json.fail() || text.fail()) {
    *error = "cannot write " + json_path + " and " + text_path;
    return false;
  }
  return true;
}

}  // namespace collwatch::analyzer
