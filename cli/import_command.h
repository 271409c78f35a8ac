// `collwatch import --flight-recorder FILE... --out DIR`: PyTorch Flight Recorder dumps
// made into a trace folder that analyze, diff, export and the rest read
// (flight_recorder/trace_import.h). Threading: the caller's thread.
#ifndef COLLWATCH_CLI_IMPORT_COMMAND_H_
#define COLLWATCH_CLI_IMPORT_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

namespace collwatch {

struct ImportCommandOptions {
  std::vector<std::string> flight_recorder;  // dump files or folders of them
  std::string out_dir;
  std::string job = "flight-recorder";
};

// Exit status 0 imported, 2 bad input (nothing written).
int RunImportCommand(const ImportCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_IMPORT_COMMAND_H_
