// Which file name this process's ring takes in the ring folder, and what becomes of a
// file already there under that name (another process's ring: never removed).
// Threading: runs once per process, at ring creation, in the creating thread; no heap.
#ifndef COLLWATCH_INTERPOSER_RING_CLAIM_H_
#define COLLWATCH_INTERPOSER_RING_CLAIM_H_

#include <sys/types.h>

#include <cstddef>

namespace collwatch {

// What stood at the ring's name and what was done about it.
enum class RingNameClaim {
  kFree,         // nothing there: `name` is ours
  kKeptAside,    // an ended writer's ring: renamed to <stem>.kept-<its start ns>.ring, one line said
  kOtherName,    // a ring that may still be written (another host or pid namespace), or a
                 // file that is no complete ring: left alone; we take <stem>.<now ns>.ring
  kNoName,       // neither could be done: no ring (said on stderr)
};

// Makes `name` (in the folder `dir_fd`, `size` bytes of room) a name no other file holds.
// `name` comes in as "<job>.<host>.<pid>.ring"; it may come back changed (kOtherName).
// `host` is this host's name as the header holds it, `pid` ours.
RingNameClaim ClaimRingName(int dir_fd, const char* dir, const char* host, pid_t pid, char* name,
                            size_t size) noexcept;

}  // namespace collwatch

#endif  // COLLWATCH_INTERPOSER_RING_CLAIM_H_
