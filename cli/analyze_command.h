// `collwatch analyze DIR [--json]`: the post-mortem report of a trace folder or of
// rings alone. Threading: called from main.
#ifndef COLLWATCH_CLI_ANALYZE_COMMAND_H_
#define COLLWATCH_CLI_ANALYZE_COMMAND_H_

#include <ostream>
#include <string>

#include "analyzer/analyzer.h"
#include "cli/trace_loader.h"

namespace collwatch {

struct AnalyzeOptions {
  std::string path;
  bool json = false;
  double stall_after_s = 0;  // 0: run.json's value, else the analyzer's default
  std::string job;  // the job to analyse where the path holds several (trace_loader.h FindTraces)
  // Where the report may read the source lines call paths name (--source-root): only files
  // under it. Empty: collwatch's own traces as they name them; imported dumps, none.
  std::string source_root;
  // Every rank's calls kept in memory (--keep-every-call), none folded into its class:
  // the same report for more memory, to check that folding changes nothing.
  bool keep_every_call = false;
};

// The analysis `analyze` reports, into `analyzer`: the traces loaded, analysed as of the
// end of the trace (or of the moment collwatch stopped the job), the stacks attached.
// False (said on `err`) when nothing could be read.
bool AnalyzeTraces(const AnalyzeOptions& options, analyzer::Analyzer* analyzer, LoadSummary* summary,
                   std::ostream& err);

// Prints the report on `out`, problems on `err`. Exit code: 0 healthy, 1 findings or
// not healthy (a rank died or exited non-zero, the command failed), 2 nothing readable
// at `path`.
int RunAnalyzeCommand(const AnalyzeOptions& options, std::ostream& out, std::ostream& err);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_ANALYZE_COMMAND_H_
