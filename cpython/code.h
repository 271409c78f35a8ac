// Reading a CPython code object: the line an instruction offset is on (the 3.10 PEP 626
// table and the 3.11+ location table) and its strings as UTF-8. The caller vouches for the
// memory (the preload: a validated layout, the calling thread's own frames; stacks/: its
// copies of another process's memory).
// Threading: pure functions; noexcept, no allocation.
#ifndef COLLWATCH_CPYTHON_CODE_H_
#define COLLWATCH_CPYTHON_CODE_H_

#include <cstddef>
#include <cstdint>

#include "cpython/layouts.h"

namespace collwatch::cpython {

// The line of the instruction at byte `offset`, from `table` (`size` bytes) of a code
// object whose first line is `first_line`; 0 when the table says none or ends first.
int32_t LineFromPep626Table(const uint8_t* table, int64_t size, int32_t first_line, int32_t offset) noexcept;
int32_t LineFromLocationTable(const uint8_t* table, int64_t size, int32_t first_line, int32_t offset) noexcept;

// Where a compact str's characters start and their width in bytes (1, 2, 4), from its
// header (`state` and `length` already read); false for anything else.
bool CompactStringData(const Layout& layout, uintptr_t string, uint32_t state, int64_t length, uintptr_t* data,
                       uint32_t* kind) noexcept;

// Copies the str object at `string` (its type must be `unicode_type`) into `out` as UTF-8,
// NUL-terminated and cut to `size` without splitting a character; characters UTF-8 cannot
// carry become '?'. False when it is not a compact str of plausible length.
bool CopyString(const Layout& layout, uintptr_t unicode_type, uintptr_t string, char* out, size_t size) noexcept;
// The same from a copy of the characters (`length` of `kind` bytes each, CompactStringData).
void EncodeUtf8(const void* characters, uint32_t kind, int64_t length, char* out, size_t size) noexcept;

}  // namespace collwatch::cpython

#endif  // COLLWATCH_CPYTHON_CODE_H_
