// `collwatch dump`: the records of rings or of a trace store, as aligned text or as JSON
// lines, in the words `analyze` uses (ring/ring_names.h). Threading: single-threaded.
#ifndef COLLWATCH_CLI_DUMP_COMMAND_H_
#define COLLWATCH_CLI_DUMP_COMMAND_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"

namespace collwatch {

enum class DumpFormat { kText, kJsonLines };

// Dumps what `path` holds, found as `analyze` finds it (cli/trace_loader.h FindTraces): a
// ring file or a folder of rings; a `collwatch run` output folder, a job folder or one
// rank trace of the trace store. Inputs that cannot be read are reported on `err` and
// skipped; the status is an error only if `path` holds no traces or none could be read.
// `job` picks one job where `path` holds several. A ring folder's notes of ranks that
// made no ring are printed too ("no_ring" objects in JSON).
absl::Status DumpTraces(const std::string& path, const std::string& job, DumpFormat format, std::ostream& out,
                        std::ostream& err);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_DUMP_COMMAND_H_
