// The one 64-bit hash of collwatch: communicator ids, region names, shared-memory
// names. Header-only, dependency-free, noexcept; the values are part of the ring ABI
// (communicator ids must agree between ranks and builds), so never change them.
// Threading: pure functions, any thread.
#ifndef COLLWATCH_RING_HASH_H_
#define COLLWATCH_RING_HASH_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace collwatch {

// splitmix64's finaliser: a bijective mix with full avalanche.
constexpr uint64_t Mix64(uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// Combines a hash with one more value (order matters).
constexpr uint64_t HashCombine(uint64_t seed, uint64_t value) noexcept {
  return Mix64(seed ^ (value + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2)));
}

// Hashes bytes word by word; the length is mixed in so prefixes differ.
inline uint64_t Hash64(const void* data, size_t length, uint64_t seed = 0) noexcept {
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint64_t h = Mix64(seed ^ (length * 0xff51afd7ed558ccdull));
  size_t i = 0;
  for (; i + 8 <= length; i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes + i, 8);
    h = HashCombine(h, word);
  }
  if (i < length) {
    uint64_t tail = 0;
    std::memcpy(&tail, bytes + i, length - i);
    h = HashCombine(h, tail);
  }
  return h;
}

}  // namespace collwatch

#endif  // COLLWATCH_RING_HASH_H_
