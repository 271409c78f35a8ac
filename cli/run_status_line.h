// The one line `collwatch run` prints about its job while it runs (rewritten in place on a
// terminal) and once after: ranks reporting, rate, events, what has waited longest.
// Threading: any thread (a pure function of the summary).
#ifndef COLLWATCH_CLI_RUN_STATUS_LINE_H_
#define COLLWATCH_CLI_RUN_STATUS_LINE_H_

#include <string>

#include "collector/live_state.h"

namespace collwatch {

// "collwatch: 2/4 ranks reporting (2 processes), 3.5 coll/s, 10 events, 1 lost, oldest in
// flight: comm 1f seq 7 for 2.0 s"; the process count only when processes and ranks
// differ, the lost count only when some are, "nothing in flight" when nothing is.
std::string RunStatusLine(const LiveSummary& summary);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_RUN_STATUS_LINE_H_
