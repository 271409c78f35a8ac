// The version of collwatch this binary is: stamped on everything it writes for machines
// (report.json, run.json, the Chrome trace) and printed by `collwatch --version`.
// Threading: constants, any thread.
#ifndef COLLWATCH_FILES_VERSION_H_
#define COLLWATCH_FILES_VERSION_H_

#include <string_view>

namespace collwatch {

// project()'s VERSION in CMakeLists.txt, e.g. "0.1.0".
std::string_view CollwatchVersion();

// The git commit the build was configured at (7 hex digits), "" where there was none.
std::string_view CollwatchCommit();

// "0.1.0 (commit abc1234)", or "0.1.0" without a commit: the value of every
// "collwatch_version" field, and what `collwatch --version` prints after "collwatch ".
std::string_view CollwatchVersionText();

}  // namespace collwatch

#endif  // COLLWATCH_FILES_VERSION_H_
