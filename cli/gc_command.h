// `collwatch gc [DIR] [--force]`: frees a ring folder (RAM, on /dev/shm) of the rings whose
// writer ended: those an agent marked shipped, or every one with --force; says what it
// removed, the bytes freed, and why it kept the others. Threading: called from main.
#ifndef COLLWATCH_CLI_GC_COMMAND_H_
#define COLLWATCH_CLI_GC_COMMAND_H_

#include <ostream>
#include <string>

namespace collwatch {

struct GcOptions {
  std::string dir;     // empty: the default ring folder (COLLWATCH_RING_DIR, else /dev/shm/collwatch-$UID)
  bool force = false;  // also rings whose records nothing says were shipped
};

// Exit status 0 (also when it kept rings), 1 when a ring could not be removed, 2 when
// the folder cannot be read.
int RunGcCommand(const GcOptions& options, std::ostream& out, std::ostream& err);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_GC_COMMAND_H_
