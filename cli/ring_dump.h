// `collwatch dump`: renders ring files as aligned text or as JSON lines.
// Threading: single-threaded.
#ifndef COLLWATCH_CLI_RING_DUMP_H_
#define COLLWATCH_CLI_RING_DUMP_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "ring/ring_reader.h"

namespace collwatch {

enum class DumpFormat { kText, kJsonLines };

// Dumps one ring file, or every ring file of a folder, to `out`. Rings that cannot be
// read are reported on `err` and skipped; the status is an error only if `path` itself
// is unusable or no ring could be read.
absl::Status DumpRings(const std::string& path, DumpFormat format, std::ostream& out,
                       std::ostream& err);

// One record as JSON (the JSON-lines schema of `collwatch dump --json`).
nlohmann::json RecordToJson(const RingReader& reader, const IndexedRecord& item);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_RING_DUMP_H_
