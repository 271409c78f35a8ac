// The end of a command that wrote to standard output: what it wrote must have reached it
// (a full disk, a closed pipe or stdout are errors said on stderr, never a silent exit 0).
// Threading: the command's thread, once it is done writing.
#ifndef COLLWATCH_CLI_COMMAND_OUTPUT_H_
#define COLLWATCH_CLI_COMMAND_OUTPUT_H_

#include <ostream>
#include <string_view>

namespace collwatch {

// Flushes `out` and returns `status`, or, when a write to `out` failed (now or before),
// says so on `err` ("collwatch COMMAND: cannot write standard output", with the cause when
// the flush's own write failed: ": No space left on device") and returns kExitBadInput, as
// a file output that cannot be written does.
int FinishStandardOutput(std::string_view command, int status, std::ostream& out, std::ostream& err);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_COMMAND_OUTPUT_H_
