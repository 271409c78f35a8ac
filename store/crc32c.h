// CRC-32C (Castagnoli), the checksum of the trace store's frames: SSE4.2 instructions
// where the CPU has them, a table otherwise. Threading: pure functions.
#ifndef COLLWATCH_STORE_CRC32C_H_
#define COLLWATCH_STORE_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace collwatch {

// CRC-32C of `size` bytes, continuing from `crc` (0 to start). Crc32c("123456789") is
// 0xE3069283.
uint32_t Crc32c(const void* data, size_t size, uint32_t crc = 0);

}  // namespace collwatch

#endif  // COLLWATCH_STORE_CRC32C_H_
