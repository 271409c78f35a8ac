// CRC-32C: hardware path (SSE4.2 crc32 instruction) with a bytewise table fallback.
// Threading: pure; the table is built once, thread-safely, on first use.
#include "store/crc32c.h"

#include <array>
#include <cstring>

namespace collwatch {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u;  // Castagnoli, reflected

std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t value = i;
    for (int bit = 0; bit < 8; ++bit) value = (value >> 1) ^ ((value & 1) ? kPolynomial : 0);
    table[i] = value;
  }
  return table;
}

uint32_t TableCrc(const uint8_t* bytes, size_t size, uint32_t state) {
  static const std::array<uint32_t, 256> table = MakeTable();
  for (size_t i = 0; i < size; ++i) state = table[(state ^ bytes[i]) & 0xff] ^ (state >> 8);
  return state;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t HardwareCrc(const uint8_t* bytes, size_t size,
                                                        uint32_t state) {
  uint64_t wide = state;
  while (size >= 8) {
    uint64_t word;
    std::memcpy(&word, bytes, 8);
    wide = __builtin_ia32_crc32di(wide, word);
    bytes += 8;
    size -= 8;
  }
  state = static_cast<uint32_t>(wide);
  while (size > 0) {
    state = __builtin_ia32_crc32qi(state, *bytes++);
    --size;
  }
  return state;
}
#endif

}  // namespace

uint32_t Crc32c(const void* data, size_t size, uint32_t crc) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  const uint32_t state = ~crc;
#if defined(__x86_64__)
  static const bool hardware = __builtin_cpu_supports("sse4.2");
  if (hardware) return ~HardwareCrc(bytes, size, state);
#endif
  return ~TableCrc(bytes, size, state);
}

}  // namespace collwatch
