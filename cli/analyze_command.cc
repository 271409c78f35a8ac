// Post-mortem analysis: load, analyse as of the end of the trace, report.
#include "cli/analyze_command.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "analyzer/analyzer.h"
#include "analyzer/report.h"
#include "cli/exit_codes.h"
#include "cli/trace_loader.h"
#include "files/safe_text.h"

namespace collwatch {

bool AnalyzeTraces(const AnalyzeOptions& options, analyzer::Analyzer* analyzer, LoadSummary* summary,
                   std::ostream& err) {
  std::error_code error;
  if (!options.source_root.empty() && !std::filesystem::is_directory(options.source_root, error)) {
    err << "collwatch analyze: --source-root " << TerminalText(options.source_root) << ": not a folder\n";
    return false;
  }
  // Each process's agreeing windows are folded as soon as its trace is in: a large job's
  // model holds its rank classes' calls, not every rank's.
  TraceApplied fold = [analyzer](analyzer::ProcessId process) { analyzer->FoldLoadedProcess(process); };
  if (options.keep_every_call) fold = nullptr;
  // Workers that build a rank's model apart fold it there against the classes published so far.
  if (fold) analyzer->model().ShareFoldReferences();
  if (!LoadTracesForCommand("analyze", options.path, &analyzer->model(), summary, err, options.job, fold)) return false;
  analyzer::AnalyzerOptions analyzer_options;
  // Source lines: under the root the user names; for dumps handed over, nowhere without
  // one (their call paths would choose which local files the report shows).
  analyzer_options.source_access.root = options.source_root;
  analyzer_options.source_access.read = !summary->imported || !options.source_root.empty();
  analyzer_options.read_threads = std::max(1u, std::thread::hardware_concurrency());
  if (options.stall_after_s > 0) {
    analyzer_options.stall_after_s = options.stall_after_s;
  } else if (summary->stall_after_s > 0) {
    analyzer_options.stall_after_s = summary->stall_after_s;
  }
  analyzer->set_options(analyzer_options);
  // As of the end of the trace (the last record or heartbeat of any rank), or of the
  // moment `collwatch run --kill-on-hang` stopped the job: the deaths it caused are not
  // the job's.
  int64_t as_of = analyzer->model().LatestTimeNs();
  if (summary->stopped_at_ns > 0) {
    as_of = summary->stopped_at_ns;
    analyzer->model().ForgetDeathsAfter(summary->stopped_at_ns);
  }
  analyzer->Analyze(as_of, /*final_pass=*/true);
  analyzer->AttachStacks();  // the stacks the trace store kept from the stalls
  return true;
}

int RunAnalyzeCommand(const AnalyzeOptions& options, std::ostream& out, std::ostream& err) {
  analyzer::Analyzer analyzer;
  LoadSummary summary;
  if (!AnalyzeTraces(options, &analyzer, &summary, err)) return kExitBadInput;
  const analyzer::AnalyzerOptions& analyzer_options = analyzer.options();
  const std::vector<analyzer::Finding>& findings = analyzer.findings();
  analyzer::ReportInfo info = analyzer::DescribeJob(analyzer.model());
  info.job = summary.job;
  info.source = options.path + " (" + summary.source + ")";
  // Inputs skipped or damaged, records lost before shipped; then the model's own
  // (DescribeJob: labels that could not be read).
  info.data_gaps.insert(info.data_gaps.begin(), summary.warnings.begin(), summary.warnings.end());
  info.notes = summary.notes;
  // Cut histories: a divergence found where the ranks' kept entries begin to overlap may
  // have begun before, among entries some ranks no longer held.
  for (const analyzer::Finding& finding : findings) {
    auto cut = summary.compared_from_seq.find(finding.comm_id);
    if (cut == summary.compared_from_seq.end() || finding.seq > cut->second) continue;
    info.notes.push_back(absl::StrCat(analyzer::CommText(finding.comm_id), " #", finding.seq,
                                      ": the ranks' kept histories overlap only from #", cut->second,
                                      ", so the ranks may have parted earlier, in entries some had already "
                                      "dropped; the first difference seen is named"));
  }
  if (!analyzer_options.source_access.read &&
      std::any_of(findings.begin(), findings.end(), [](const analyzer::Finding& finding) {
        return finding.branch_point.has_value() || finding.first_parted.has_value();
      })) {
    info.notes.push_back("source lines not shown: the call paths come from Flight Recorder dumps, so the files "
                         "they name are not opened (give --source-root DIR to read them from under DIR)");
  }
  info.command_exit_status = summary.command_exit_status;
  if (summary.stopped_at_ns > 0) analyzer::NoteStoppedByCollwatch(&info);
  if (options.json) {
    out << analyzer::ReportJsonText(findings, info) << "\n";
  } else {
    out << analyzer::ReportText(findings, info);
  }
  return analyzer::Healthy(findings, info) ? kExitOk : kExitFindings;
}

}  // namespace collwatch
