// `collwatch analyze` of one input run several ways: folding the ranks that agree into their
// classes, as it does by default, and with --keep-every-call; each rank trace built into a
// model of its own and adopted (COLLWATCH_BUILD_APART=on), and applied on one thread (=off).
// Issue 39 promises them all the same report byte for byte and the same exit status; every
// test that analyses a recorded or stored job checks that promise here. Threading: the
// caller's thread (it sets the variable for the runs and puts it back).
#ifndef COLLWATCH_TESTS_SUPPORT_ANALYZE_BOTH_WAYS_H_
#define COLLWATCH_TESTS_SUPPORT_ANALYZE_BOTH_WAYS_H_

#include <stdlib.h>

#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>

#include "cli/analyze_command.h"
#include "gtest/gtest.h"

namespace collwatch::testing {

struct AnalyzedBothWays {
  int exit_code = -1;
  std::string out;  // the report (text or JSON, as `options` asks)
  std::string err;  // warnings
};

// The folded run's exit status, report and warnings; a failure is added where the run
// that keeps every call differs from it.
inline AnalyzedBothWays AnalyzeBothWays(AnalyzeOptions options) {
  AnalyzedBothWays folded;
  options.keep_every_call = false;
  std::ostringstream out, err;
  folded.exit_code = RunAnalyzeCommand(options, out, err);
  folded.out = out.str();
  folded.err = err.str();
  options.keep_every_call = true;
  std::ostringstream kept_out, kept_err;
  const int kept_exit_code = RunAnalyzeCommand(options, kept_out, kept_err);
  EXPECT_EQ(kept_exit_code, folded.exit_code) << "--keep-every-call changed the verdict";
  EXPECT_EQ(kept_out.str(), folded.out) << "--keep-every-call changed the report";
  options.keep_every_call = false;
  const char* set_before = std::getenv("COLLWATCH_BUILD_APART");
  const std::optional<std::string> before = set_before ? std::optional<std::string>(set_before) : std::nullopt;
  for (const char* build_apart : {"on", "off"}) {
    setenv("COLLWATCH_BUILD_APART", build_apart, /*overwrite=*/1);
    std::ostringstream way_out, way_err;
    const int way_exit_code = RunAnalyzeCommand(options, way_out, way_err);
    EXPECT_EQ(way_exit_code, folded.exit_code) << "COLLWATCH_BUILD_APART=" << build_apart << " changed the verdict";
    EXPECT_EQ(way_out.str(), folded.out) << "COLLWATCH_BUILD_APART=" << build_apart << " changed the report";
  }
  if (before) {
    setenv("COLLWATCH_BUILD_APART", before->c_str(), 1);
  } else {
    unsetenv("COLLWATCH_BUILD_APART");
  }
  return folded;
}

}  // namespace collwatch::testing

#endif  // COLLWATCH_TESTS_SUPPORT_ANALYZE_BOTH_WAYS_H_
