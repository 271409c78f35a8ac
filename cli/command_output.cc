// errno is read right after the flush: when the failing write is the flush's own (stdio
// buffers standard output), it names the cause. Threading: see command_output.h.
#include "cli/command_output.h"

#include <cerrno>
#include <cstring>

#include "cli/exit_codes.h"

namespace collwatch {

int FinishStandardOutput(std::string_view command, int status, std::ostream& out, std::ostream& err) {
  errno = 0;
  out.flush();
  const int flush_errno = errno;
  if (out) return status;
  err << "collwatch " << command << ": cannot write standard output";
  if (flush_errno != 0) err << ": " << std::strerror(flush_errno);
  err << "\n";
  return kExitBadInput;
}

}  // namespace collwatch
