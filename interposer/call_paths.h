// Python call paths: the calling thread's Python frames at an NCCL call, interned into
// the ring's call path slots (ring_format.h) so that each record carries only an id.
// Threading: lock-free (CAS-claimed slots, one writer per slot), called on the job's
// threads from the hooks; noexcept, allocation-free, no system call once warm.
#ifndef COLLWATCH_INTERPOSER_CALL_PATHS_H_
#define COLLWATCH_INTERPOSER_CALL_PATHS_H_

#include <cstdint>

#include "ring/ring_format.h"

namespace collwatch {

// Where call paths are interned from now on: the ring's slots, which stay mapped. A
// Python process whose interpreter cannot be read (interposer/python_frames.h) says so
// once on stderr, and records no call paths.
void SetCallPathSlots(ring::CallPathSlot* slots, uint64_t capacity) noexcept;

// The calling thread's Python call path, interned; 0 when the thread runs no Python,
// the interpreter is not supported, or the path could not be stored (counted in
// CallPathsDropped). A path seen before costs a walk of the frames, a hash and a probe.
uint32_t CurrentCallPathId() noexcept;

// Paths that found no free slot, or whose slot another thread was still writing.
uint64_t CallPathsDropped() noexcept;

}  // namespace collwatch

#endif  // COLLWATCH_INTERPOSER_CALL_PATHS_H_
