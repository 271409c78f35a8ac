// The one name table of the ring's enumerations (record kinds, NCCL entry points, data
// types, reduce ops, flags) and their parsers: `analyze`, `dump`, schedules and reports
// all speak these words, so a name read anywhere parses back to its value.
// Threading: pure functions.
#ifndef COLLWATCH_RING_RING_NAMES_H_
#define COLLWATCH_RING_RING_NAMES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ring/ring_format.h"

namespace collwatch {

const char* RecordKindName(ring::RecordKind kind);  // "enter", "return", ...; "unknown"

// "all-reduce", "reduce-scatter", "comm-split", "get-unique-id"; "unknown" for a value
// no entry point has.
std::string_view OpName(ring::ApiFn fn);
std::optional<ring::ApiFn> OpByName(std::string_view name);

// "float32", "bfloat16", "none" (kNoDtype), "dtype=N" for a value NCCL 2.28 does not name.
std::string DtypeName(uint8_t dtype);
std::optional<uint8_t> DtypeByName(std::string_view name);
int DtypeBytes(uint8_t dtype);  // bytes per element, 0 if unknown or none

// "sum", "prod", "max", "min", "avg", "none" (kUnset), "redop=N" for an op made by
// ncclRedOpCreatePreMulSum (or any other value).
std::string RedOpName(int32_t redop);
std::optional<int32_t> RedOpByName(std::string_view name);

std::string FlagNames(uint8_t flags);  // "captured|completes_at_return", "" for none named

}  // namespace collwatch

#endif  // COLLWATCH_RING_RING_NAMES_H_
