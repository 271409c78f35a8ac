// What every JSON collwatch writes promises its readers: a `schema_version` (one small
// integer per schema under docs/schema/, defined here and nowhere else) and 64-bit ids
// written as strings of 16 hex digits, which jq and JavaScript read without rounding.
// Threading: constants and pure functions.
#ifndef COLLWATCH_FILES_JSON_CONTRACT_H_
#define COLLWATCH_FILES_JSON_CONTRACT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "nlohmann/json.hpp"

namespace collwatch {

// The key every output carries at its top (the first line of each process in `dump --json`).
inline constexpr char kSchemaVersionKey[] = "schema_version";

// A version goes up when a field changes its meaning or type, or goes away; a new field
// leaves it as it is. A file without one was written before the schemas (read it as 0).
inline constexpr int kReportSchemaVersion = 1;        // report.json, `analyze --json`
inline constexpr int kRunSchemaVersion = 1;           // run.json
inline constexpr int kDumpSchemaVersion = 1;          // `dump --json` lines
inline constexpr int kStacksSchemaVersion = 1;        // `stacks --json`
inline constexpr int kImportSchemaVersion = 1;        // flight_recorder.json (`import`)
inline constexpr int kChromeTraceSchemaVersion = 1;   // `export --chrome`, in otherData
inline constexpr int kDiffSchemaVersion = 1;          // `diff --json`
inline constexpr int kCheckSchemaVersion = 1;         // `check --json`
inline constexpr int kTopSchemaVersion = 1;           // `top --once --json`
inline constexpr int kEventLogSchemaVersion = 1;      // each `--event-log` line

// "3f2a9c0100000001": a communicator id, a hash, a stream handle.
std::string JsonId(uint64_t id);

// JsonId's inverse; also the bare number that files written before schema version 1 hold
// where an id fits a JSON number. nullopt for anything else.
std::optional<uint64_t> JsonIdValue(const nlohmann::json& value);

}  // namespace collwatch

#endif  // COLLWATCH_FILES_JSON_CONTRACT_H_
