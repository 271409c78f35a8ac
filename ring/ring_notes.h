// Small files beside the rings, named after the ring they speak of: the preload's note of
// why it made no ring, and the agent's mark that a ring's records are all stored. Names
// and the note's writing live here, dependency-free, for the preload; reading them is
// ring_leftovers.h. Threading: pure functions of the file system; no allocation, noexcept.
#ifndef COLLWATCH_RING_RING_NOTES_H_
#define COLLWATCH_RING_RING_NOTES_H_

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace collwatch::ring {

// In the ring folder, for the ring `<job>.<host>.<pid>.ring`:
//   <job>.<host>.<pid>.noring   written by the preload when it could make no ring (the
//                               folder's file system too full, the file size limit, ...):
//                               "key value" lines (kNoRingNoteKeys), `why` last, in words
//                               a user can act on. Readers report the rank with it.
//   <job>.<host>.<pid>.kept-<start ns>.ring   a ring another process left at a new
//                               process's name (a reused pid), moved aside by the new
//                               process once its writer ended; a ring like any other to
//                               every reader (interposer/ring_claim.h). A ring that may
//                               still be written is never moved: the new one takes
//                               <job>.<host>.<pid>.<now ns>.ring instead.
//   <job>.<host>.<pid>.shipped  written by an agent that keeps shipped rings (--keep-rings):
//                               "pid start_realtime_ns" of the ring whose every record the
//                               collector acknowledged; `collwatch gc` removes a ring whose
//                               writer ended only with a mark that names it.
inline constexpr char kRingSuffix[] = ".ring";
inline constexpr char kNoRingSuffix[] = ".noring";
inline constexpr char kShippedSuffix[] = ".shipped";
inline constexpr char kNoRingNoteFirstLine[] = "collwatch-noring 1";

// Who had no ring and why (the note's lines, in this order).
struct NoRingNote {
  int32_t pid = 0;
  int32_t rank = -1;  // RANK, LOCAL_RANK, WORLD_SIZE as the ring header would have had them
  int32_t local_rank = -1;
  int32_t world_size = -1;
  uint64_t needed_bytes = 0;  // the smallest ring the preload would make
  uint64_t free_bytes = 0;    // what the folder's file system had free
  const char* host = "";
  const char* job = "";
  const char* why = "";       // one line
};

// Replaces `ring_name`'s ".ring" with `suffix` into `out`; false when it does not fit.
inline bool SideFileName(const char* ring_name, const char* suffix, char* out, size_t size) noexcept {
  const size_t length = std::strlen(ring_name);
  const size_t stem = length >= sizeof kRingSuffix - 1 ? length - (sizeof kRingSuffix - 1) : length;
  const int written = std::snprintf(out, size, "%.*s%s", static_cast<int>(stem), ring_name, suffix);
  return written > 0 && static_cast<size_t>(written) < size;
}

// Writes the note for `ring_name` into the folder `dir_fd` (replacing an older one of a
// process that had our pid). Best effort: a folder too full for a page holds no note.
inline void WriteNoRingNote(int dir_fd, const char* ring_name, const NoRingNote& note) noexcept {
  char name[320];
  if (!SideFileName(ring_name, kNoRingSuffix, name, sizeof name)) return;
  char text[1024];
  const int length = std::snprintf(
      text, sizeof text,
      "%s\npid %d\nrank %d\nlocal_rank %d\nworld_size %d\nneeded_bytes %llu\nfree_bytes %llu\nhost %s\njob %s\nwhy %s\n",
      kNoRingNoteFirstLine, note.pid, note.rank, note.local_rank, note.world_size,
      static_cast<unsigned long long>(note.needed_bytes), static_cast<unsigned long long>(note.free_bytes), note.host,
      note.job, note.why);
  if (length <= 0) return;
  unlinkat(dir_fd, name, 0);
  const int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  const size_t bytes = static_cast<size_t>(length) < sizeof text ? static_cast<size_t>(length) : sizeof text - 1;
  const bool whole = write(fd, text, bytes) == static_cast<ssize_t>(bytes);
  close(fd);
  if (!whole) unlinkat(dir_fd, name, 0);  // half a note would name the wrong reason
}

}  // namespace collwatch::ring

#endif  // COLLWATCH_RING_RING_NOTES_H_
