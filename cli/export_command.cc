// The Chrome trace export: options, the findings it marks, two passes over the traces,
// the output (see export_command.h).
#include "cli/export_command.h"

#include <filesystem>
#include <memory>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "analyzer/analyzer.h"
#include "analyzer/chrome_export.h"
#include "cli/analyze_command.h"
#include "cli/exit_codes.h"
#include "cli/trace_pieces.h"
#include "files/safe_files.h"
#include "files/safe_text.h"
#include "nlohmann/json.hpp"
#include "process/rank_membership.h"

namespace collwatch {
namespace {

using analyzer::TraceMarker;

constexpr uint64_t kMaxReportBytes = 256 << 20;

// Hands each process the trace readers give to the export.
class ExportVisitor final : public ProcessVisitor {
 public:
  explicit ExportVisitor(analyzer::ChromeTraceExport* exporter) : exporter_(exporter) {}
  bool Begin(const ProcessInfo& info) override { return exporter_->BeginProcess(info); }
  void Piece(const ProcessUpdate& piece) override { exporter_->AddPiece(piece); }
  void End() override { exporter_->EndProcess(); }

 private:
  analyzer::ChromeTraceExport* exporter_;
};

absl::StatusOr<std::vector<TraceMarker>> ReadReportMarkers(const std::string& file, std::ostream& err) {
  absl::StatusOr<std::string> text = ReadRegularFile(file, kMaxReportBytes);
  if (!text.ok()) return text.status();
  const nlohmann::json report = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (report.is_discarded() || !report.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": not a report (JSON of collwatch run or analyze --json)"));
  }
  size_t unreadable = 0;
  std::vector<TraceMarker> markers = analyzer::MarkersFromReport(report, &unreadable);
  if (unreadable > 0) {
    err << "collwatch export: warning: " << TerminalText(file) << ": " << unreadable
        << " findings without a kind, communicator or sequence number are not marked\n";
  }
  return markers;
}

// The findings to mark, and where they came from (words for the summary line).
struct Findings {
  std::vector<TraceMarker> markers;
  std::string source;
};

// --findings FILE, else DIR/report.json, else the analysis of the run. False (said on
// `err`) when a report named cannot be read, or the run cannot be analysed.
bool FindingsToMark(const ExportOptions& options, Findings* findings, std::ostream& err) {
  if (options.no_findings) return true;
  std::string report = options.findings_file;
  std::error_code error;
  const std::string beside = (std::filesystem::path(options.dir) / "report.json").string();
  if (report.empty() && std::filesystem::is_regular_file(beside, error)) report = beside;
  if (!report.empty()) {
    absl::StatusOr<std::vector<TraceMarker>> markers = ReadReportMarkers(report, err);
    if (markers.ok()) {
      findings->markers = *std::move(markers);
      findings->source = report;
      return true;
    }
    err << "collwatch export: " << markers.status().message() << "\n";
    if (!options.findings_file.empty()) return false;
    err << "collwatch export: the findings come from the analysis of the run instead\n";
  }
  // Warnings of the loading are said once, by the export's own reading.
  std::ostringstream said;
  analyzer::Analyzer analysis;
  LoadSummary summary;
  AnalyzeOptions analyze;
  analyze.path = options.dir;
  analyze.job = options.job;
  if (!AnalyzeTraces(analyze, &analysis, &summary, said)) {
    err << said.str();
    return false;
  }
  for (const analyzer::Finding& finding : analysis.findings()) findings->markers.push_back(analyzer::MarkerOf(finding));
  findings->source = "the analysis of the run";
  return true;
}

// The options as the export takes them; false (said on `err`) when one is not usable.
bool ExportSettings(const ExportOptions& options, analyzer::ChromeExportOptions* settings, std::ostream& err) {
  if (options.time_base_ns) {
    settings->time_base_ns = *options.time_base_ns;
  } else if (options.absolute_time) {
    settings->time_base_ns = 0;
  }
  if (!options.ranks.empty()) {
    settings->ranks = ParseRankList(options.ranks);
    if (!settings->ranks) {
      err << "collwatch export: --ranks '" << TerminalText(options.ranks) << "': not a list of ranks (e.g. 0,3-5)\n";
      return false;
    }
  }
  settings->since_s = options.since_s.value_or(0);
  settings->until_s = options.until_s;
  if (settings->since_s < 0 || (settings->until_s && *settings->until_s <= settings->since_s)) {
    err << "collwatch export: the window must have 0 <= --since < --until (seconds from the job's first call)\n";
    return false;
  }
  return true;
}

void SayWritten(const ExportOptions& options, const analyzer::ChromeExportStats& stats, const Findings& findings,
                std::ostream& out) {
  out << "collwatch export: wrote " << options.file << ": " << stats.ranks << " rank" << (stats.ranks == 1 ? "" : "s");
  if (stats.ranks != stats.processes) out << " in " << stats.processes << " processes";
  out << ", " << stats.slices << " calls";
  if (stats.unfinished > 0) out << ", " << stats.unfinished << " never finished (instant events named 'never ...')";
  if (stats.processes_left_out > 0) out << "; " << stats.processes_left_out << " processes left out by --ranks";
  if (stats.calls_outside > 0) out << "; " << stats.calls_outside << " calls outside the window";
  if (!findings.source.empty()) {
    out << "; " << stats.markers << " of " << findings.markers.size() << " findings marked, " << stats.arrows
        << " arrows between their calls (from " << findings.source << ")";
  }
  out << "; open it in https://ui.perfetto.dev or chrome://tracing\n";
}

}  // namespace

int RunExportCommand(const ExportOptions& options, std::ostream& out, std::ostream& err) {
  analyzer::ChromeExportOptions settings;
  if (!ExportSettings(options, &settings, err)) return kExitBadInput;
  absl::StatusOr<TraceSources> sources = FindTraces(options.dir, options.job);
  if (!sources.ok()) {
    err << "collwatch export: " << sources.status().message() << "\n";
    return kExitBadInput;
  }
  Findings findings;
  if (!FindingsToMark(options, &findings, err)) return kExitBadInput;
  settings.markers = findings.markers;

  analyzer::ChromeTraceExport exporter(std::move(settings));
  ExportVisitor visitor(&exporter);
  LoadSummary summary;
  const absl::Status surveyed = VisitTraces(*sources, &visitor, &summary);
  for (const std::string& warning : summary.warnings) err << "collwatch export: warning: " << warning << "\n";
  if (!surveyed.ok()) {
    err << "collwatch export: " << surveyed.message() << "\n";
    return kExitBadInput;
  }

  std::unique_ptr<ReplacingFile> file;
  if (options.file != "-") {
    absl::StatusOr<std::unique_ptr<ReplacingFile>> opened = ReplacingFile::Open(options.file);
    if (!opened.ok()) {
      err << "collwatch export: " << opened.status().message() << "\n";
      return kExitBadInput;
    }
    file = *std::move(opened);
  }
  std::ostream& trace = file != nullptr ? file->stream() : out;
  exporter.StartWriting(trace);
  LoadSummary again;  // said once, above
  if (const absl::Status written = VisitTraces(*sources, &visitor, &again); !written.ok()) {
    err << "collwatch export: " << written.message() << "\n";
    return kExitBadInput;
  }
  const analyzer::ChromeExportStats stats = exporter.Finish();
  if (file == nullptr) return kExitOk;  // standard output is checked where the command ends
  if (const absl::Status committed = file->Commit(); !committed.ok()) {
    err << "collwatch export: " << committed.message() << "\n";
    return kExitBadInput;
  }
  SayWritten(options, stats, findings, out);
  return kExitOk;
}

}  // namespace collwatch
