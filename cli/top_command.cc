// A run's folder is read only for where to connect; every word of a refusal or an
// unreachable collector comes from the dashboard (dashboard/top_command.h).
// Threading: see top_command.h.
#include "cli/top_command.h"

#include <signal.h>

#include <cerrno>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/exit_codes.h"
#include "cli/secrets.h"
#include "files/safe_text.h"
#include "process/process_sample.h"

namespace collwatch {
namespace {

// "80x24" -> columns and rows, each within what a terminal may have.
bool ParseFrameSize(const std::string& text, int* columns, int* rows) {
  const std::vector<std::string> parts = absl::StrSplit(text, 'x');
  return parts.size() == 2 && absl::SimpleAtoi(parts[0], columns) && absl::SimpleAtoi(parts[1], rows) &&
         *columns >= 20 && *columns <= 10000 && *rows >= 5 && *rows <= 10000;
}

}  // namespace

absl::StatusOr<RunRecord> LiveRunIn(const std::string& run_dir) {
  absl::StatusOr<RunRecord> record = ReadRunRecordOrWhy(run_dir);
  if (absl::IsNotFound(record.status())) {
    return absl::NotFoundError(absl::StrCat(
        run_dir, " holds no run record (run.json): it is not the --out folder of a `collwatch run`, or its command "
                 "has not started yet. A standalone collector: `collwatch top --collector ADDR --token-file FILE`"));
  }
  if (!record.ok()) {
    return absl::Status(record.status().code(),
                        absl::StrCat(record.status().message(), ": where its collector listens is not known"));
  }
  const std::string analyze = absl::StrCat("`collwatch analyze ", run_dir, "`");
  if (!record->running) {
    const std::string how =
        record->exit_status >= 0 ? absl::StrCat(" (its command exited ", record->exit_status, ")") : "";
    return absl::FailedPreconditionError(absl::StrCat("the run in ", run_dir, " has ended", how,
                                                      ": nothing live to watch. Its report: ", analyze, " (or ",
                                                      run_dir, "/report.txt)"));
  }
  // A `collwatch run` killed before its last word leaves its first one.
  if (record->collwatch_pid > 0 && record->collwatch_host == ThisHostName() && kill(record->collwatch_pid, 0) != 0 &&
      errno == ESRCH) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the run in ", run_dir, " has ended without finishing its record (its `collwatch run`, pid ",
        record->collwatch_pid, ", is gone: killed?): nothing live to watch. What it stored: ", analyze));
  }
  if (record->collector.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(run_dir, "/run.json names no collector"));
  }
  return record;
}

int RunTopCommand(TopCommandOptions options, std::ostream& out, std::ostream& err) {
  dashboard::TopOptions& top = options.top;
  if (!options.size.empty() && !ParseFrameSize(options.size, &top.columns, &top.rows)) {
    err << "collwatch top: --size " << TerminalText(options.size)
        << ": expected COLUMNSxROWS, from 20x5 up (e.g. 80x24)\n";
    return kExitBadInput;
  }
  if (!options.run_dir.empty()) {
    absl::StatusOr<RunRecord> run = LiveRunIn(options.run_dir);
    if (!run.ok()) {
      err << "collwatch top: " << TerminalText(std::string(run.status().message())) << "\n";
      return kExitBadInput;
    }
    top.watch.address = run->collector;
    top.watch.job = run->job;
    options.token_file = run->token_file;
    options.tls_ca_file = run->tls_ca_file;
    if (!run->token_file.empty()) top.token_source = absl::StrCat("the run folder ", options.run_dir, " (", run->token_file, ")");
  } else if (!options.token_file.empty()) {
    top.token_source = absl::StrCat("--token-file ", options.token_file);
  }
  if (const absl::Status read = ReadSecretFiles({{options.token_file, &top.watch.token, SecretKind::kToken},
                                                 {options.tls_ca_file, &top.watch.tls_ca_pem}});
      !read.ok()) {
    err << "collwatch top: " << TerminalText(std::string(read.message())) << "\n";
    return kExitBadInput;
  }
  const dashboard::TopResult result = dashboard::RunTop(top, out);
  if (!result.message.empty()) err << "collwatch top: " << TerminalText(result.message) << "\n";
  switch (result.end) {
    case dashboard::TopEnd::kDone: return kExitOk;
    case dashboard::TopEnd::kUnreachable: return kExitFindings;  // the work failed
    case dashboard::TopEnd::kNoTerminal:
    case dashboard::TopEnd::kRefused: return kExitBadInput;
  }
  return kExitBadInput;
}

}  // namespace collwatch
