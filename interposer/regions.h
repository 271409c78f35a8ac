// NVTX regions: interned region names and the calling thread's stack of open ranges.
// Threading: the table is shared and lock-free; each thread owns its own stack.
// Everything here is noexcept, allocation-free after first use and safe inside hooks.
#ifndef COLLWATCH_INTERPOSER_REGIONS_H_
#define COLLWATCH_INTERPOSER_REGIONS_H_

#include <cstddef>
#include <cstdint>

#include "ring/ring_format.h"

namespace collwatch {

// Interns a region name and returns its id (>= 1), stable for the life of the process.
// Names longer than ring::kMaxStringBytes are truncated (distinct long names that share
// a prefix keep distinct ids: the hash covers the full name). Returns 0 when the table
// is full (counted in RegionsDropped()); lookups probe a bounded window, so the first
// names can be refused from about 80 % load, while later ones still fill the rest.
uint32_t InternRegion(const char* name, size_t length) noexcept;
// A name's slot (its id - 1) is sought among the first kRegionSmallWindow slots before the
// whole table: while a process has fewer names than about that many, every id fits a ring
// sized down to its floor (ring_writer.h kFloorStrings), which carries no slot beyond it.
inline constexpr uint64_t kRegionSmallWindow = 1024;

// The same for a name that is not one contiguous string (the NVTX injection's
// "<domain>:<message>" and wide-character names): `hash` identifies the full name and
// `text` is what is stored (truncated like any name). InternRegion(name, n) is
// InternRegionHashed(name, n, Hash64(name, n)).
uint32_t InternRegionHashed(const char* text, size_t length, uint64_t hash) noexcept;

// The calling thread's region stack. Push with id 0 is allowed (an unnamed range) so
// pushes and pops stay balanced. Depth beyond the stack's capacity is counted, not
// stored: the innermost stored region then stays current until the stack unwinds.
void PushRegion(uint32_t id) noexcept;
void PopRegion() noexcept;
uint32_t CurrentRegionId() noexcept;
// Open ranges on the calling thread, counting those beyond the stack's capacity
// (NVTX push/pop report levels).
uint32_t RegionDepth() noexcept;

// The process-wide table is created before any ring exists (NVTX ranges open long
// before the first NCCL call). Once a ring exists, every name interned so far and every
// later one is copied into the ring's string slots, at the same index (id - 1); each
// ring slot is claimed by CAS on its state, so it is written once. The slots must stay
// mapped from then on (a later call may switch to another ring: calls must not race
// each other). Ids beyond `capacity` are not copied and count in RegionsDropped().
void MirrorRegionsInto(ring::StringSlot* slots, uint64_t capacity) noexcept;

// Reads back a name by id (tests, diagnostics) into `out`, NUL-terminated and cut to
// `out_size`. Returns its stored length, 0 if unknown (or empty).
size_t RegionName(uint32_t id, char* out, size_t out_size) noexcept;

// Names or pushes the table or the stacks could not hold.
uint64_t RegionsDropped() noexcept;

}  // namespace collwatch

#endif  // COLLWATCH_INTERPOSER_REGIONS_H_
