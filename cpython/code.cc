// Reading a code object's line and names (API: code.h). Threading: pure functions
// over memory the caller vouches for.
#include "cpython/code.h"

namespace collwatch::cpython {

// ---- Line tables ---------------------------------------------------------------------

// 3.10 (PEP 626): pairs of (bytecode bytes covered: unsigned, line delta: signed, -128 for
// "no line"); the range holding `offset` gives the line.
int32_t LineFromPep626Table(const uint8_t* table, int64_t size, int32_t first_line, int32_t offset) noexcept {
  int64_t end = 0;
  int32_t line = first_line;
  int32_t range_line = -1;
  int64_t at = 0;
  while (end <= offset) {
    if (at + 1 >= size) return 0;
    end += table[at];
    const int8_t delta = static_cast<int8_t>(table[at + 1]);
    at += 2;
    if (delta == -128) {
      range_line = -1;
    } else {
      line += delta;
      range_line = line;
    }
  }
  return range_line > 0 ? range_line : 0;
}

namespace {

// A location table's varint: 6 bits a byte, least significant first, 0x40 = more follow.
uint32_t ReadVarint(const uint8_t* table, int64_t size, int64_t* at) noexcept {
  uint32_t value = 0;
  for (uint32_t shift = 0; *at < size && shift < 32; shift += 6) {
    const uint8_t byte = table[(*at)++];
    value |= static_cast<uint32_t>(byte & 0x3f) << shift;
    if ((byte & 0x40) == 0) break;
  }
  return value;
}

}  // namespace

// 3.11+: entries open with a byte 1cccclll (code c, covering l+1 code units). Codes 0-10
// stay on the line, 11 and 12 move it by 1 and 2, 13 and 14 by a signed varint that
// follows, 15 means "no line". Further bytes of an entry have the top bit clear.
int32_t LineFromLocationTable(const uint8_t* table, int64_t size, int32_t first_line, int32_t offset) noexcept {
  int64_t end = 0;
  int32_t line = first_line;
  int32_t range_line = -1;
  int64_t at = 0;
  while (end <= offset) {
    if (at >= size || (table[at] & 0x80) == 0) return 0;
    const uint8_t head = table[at++];
    const int code = (head >> 3) & 15;
    end += 2 * ((head & 7) + 1);
    int32_t delta = 0;
    if (code == 11 || code == 12) {
      delta = code - 10;
    } else if (code == 13 || code == 14) {
      const uint32_t raw = ReadVarint(table, size, &at);
      delta = (raw & 1) != 0 ? -static_cast<int32_t>(raw >> 1) : static_cast<int32_t>(raw >> 1);
    }
    line += delta;
    range_line = code == 15 ? -1 : line;
    while (at < size && (table[at] & 0x80) == 0) ++at;
  }
  return range_line > 0 ? range_line : 0;
}

// ---- Strings -----------------------------------------------------------------------

namespace {

// Appends `code_point` as UTF-8 if it fits (with the NUL); surrogates and values beyond
// Unicode become '?'. False when full.
bool AppendUtf8(uint32_t code_point, char* out, size_t size, size_t* used) noexcept {
  char bytes[4];
  size_t count;
  if (code_point < 0x80) {
    bytes[0] = static_cast<char>(code_point);
    count = 1;
  } else if (code_point < 0x800) {
    bytes[0] = static_cast<char>(0xc0 | (code_point >> 6));
    bytes[1] = static_cast<char>(0x80 | (code_point & 0x3f));
    count = 2;
  } else if ((code_point >= 0xd800 && code_point < 0xe000) || code_point > 0x10ffff) {
    bytes[0] = '?';
    count = 1;
  } else if (code_point < 0x10000) {
    bytes[0] = static_cast<char>(0xe0 | (code_point >> 12));
    bytes[1] = static_cast<char>(0x80 | ((code_point >> 6) & 0x3f));
    bytes[2] = static_cast<char>(0x80 | (code_point & 0x3f));
    count = 3;
  } else {
    bytes[0] = static_cast<char>(0xf0 | (code_point >> 18));
    bytes[1] = static_cast<char>(0x80 | ((code_point >> 12) & 0x3f));
    bytes[2] = static_cast<char>(0x80 | ((code_point >> 6) & 0x3f));
    bytes[3] = static_cast<char>(0x80 | (code_point & 0x3f));
    count = 4;
  }
  if (*used + count >= size) return false;
  std::memcpy(out + *used, bytes, count);
  *used += count;
  return true;
}

}  // namespace

bool CompactStringData(const Layout& layout, uintptr_t string, uint32_t state, int64_t length,
                       uintptr_t* data, uint32_t* kind) noexcept {
  *kind = (state >> kStateKindShift) & 7;
  if ((state & kStateCompactBit) == 0 || length < 0 || length > kMaxStringLength) return false;
  if ((state & kStateAsciiBit) != 0) {
    if (*kind != 1) return false;
    *data = string + layout.ascii_data;
    return true;
  }
  if (*kind != 1 && *kind != 2 && *kind != 4) return false;
  *data = string + layout.compact_data;
  return true;
}

bool CopyString(const Layout& layout, uintptr_t unicode_type, uintptr_t string, char* out, size_t size) noexcept {
  if (size == 0) return false;
  out[0] = '\0';
  if (string == 0 || Load<uintptr_t>(string + kObType) != unicode_type) return false;
  const uint32_t state = Load<uint32_t>(string + kUnicodeState);
  const int64_t length = Load<int64_t>(string + kUnicodeLength);
  uintptr_t data = 0;
  uint32_t kind = 0;
  if (!CompactStringData(layout, string, state, length, &data, &kind)) return false;
  EncodeUtf8(reinterpret_cast<const void*>(data), kind, length, out, size);
  return true;
}

void EncodeUtf8(const void* characters, uint32_t kind, int64_t length, char* out, size_t size) noexcept {
  if (size == 0) return;
  const auto data = reinterpret_cast<uintptr_t>(characters);
  size_t used = 0;
  for (int64_t i = 0; i < length; ++i) {
    uint32_t code_point;
    if (kind == 1) {
      code_point = Load<uint8_t>(data + i);
    } else if (kind == 2) {
      code_point = Load<uint16_t>(data + 2 * i);
    } else {
      code_point = Load<uint32_t>(data + 4 * i);
    }
    if (!AppendUtf8(code_point, out, size, &used)) break;
  }
  out[used] = '\0';
}

}  // namespace collwatch::cpython
