// Human names of the ring's enumerations (record kinds, NCCL entry points, data types,
// reduce ops, flags): the one place every tool renders them from.
// Threading: pure functions.
#ifndef COLLWATCH_RING_RING_NAMES_H_
#define COLLWATCH_RING_RING_NAMES_H_

#include <cstdint>
#include <string>

#include "ring/ring_format.h"

namespace collwatch {

const char* RecordKindName(ring::RecordKind kind);   // "enter", "return", ...
const char* ApiFnName(ring::ApiFn fn);               // "AllReduce", "CommSplit", ...
const char* DtypeName(uint8_t dtype);                // "float32", "bfloat16", "" for none
int DtypeBytes(uint8_t dtype);                       // bytes per element, 0 if unknown
std::string RedOpName(int32_t redop);                // "sum", ..., "premulsum#5", ""
std::string FlagNames(uint8_t flags);                // "captured|completes_at_return"

}  // namespace collwatch

#endif  // COLLWATCH_RING_RING_NAMES_H_
