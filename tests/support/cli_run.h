// `collwatch ARGS...` as a child process for the CLI's end-to-end tests: its exit status,
// standard output and error, and how long it took. Header-only (COLLWATCH_CLI_PATH comes
// from each test target). Threading: single-threaded test code.
#ifndef COLLWATCH_TESTS_SUPPORT_CLI_RUN_H_
#define COLLWATCH_TESTS_SUPPORT_CLI_RUN_H_

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "tests/support/read_files.h"
#include "tests/support/run_env.h"
#include "tests/support/subprocess.h"

namespace collwatch::testing {

struct CliOutcome {
  int exit_code = -1;
  std::string out, err;  // out: "" when the caller named its own `stdout_path`
  double seconds = 0;
};

// Runs `collwatch ARGS...` with `env` added, its output in files of `dir` (standard output
// in `stdout_path` when one is named), killed after `wait_s` (scaled like every limit).
inline CliOutcome RunCollwatch(const TempDir& dir, const std::vector<std::string>& args,
                               const std::map<std::string, std::string>& env = {}, double wait_s = 30,
                               std::string stdout_path = "") {
  std::vector<std::string> argv = {COLLWATCH_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  const bool own_stdout = stdout_path.empty();
  if (own_stdout) stdout_path = dir.path() + "/stdout";
  const std::string err_path = dir.path() + "/stderr";
  const auto start = std::chrono::steady_clock::now();
  Subprocess cli(argv, CollwatchRunEnv(env), stdout_path, err_path);
  CliOutcome outcome;
  outcome.exit_code = cli.Wait(wait_s);
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (own_stdout) outcome.out = ReadFile(stdout_path);
  outcome.err = ReadFile(err_path);
  return outcome;
}

}  // namespace collwatch::testing

#endif  // COLLWATCH_TESTS_SUPPORT_CLI_RUN_H_
