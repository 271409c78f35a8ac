// What a ring folder holds beside the rings (ring_notes.h): the preload's notes of ranks
// that made no ring, and the agent's marks of rings whose records are all stored; and the
// one judgement of whether a ring may go. Threading: pure functions of the file system.
#ifndef COLLWATCH_RING_RING_LEFTOVERS_H_
#define COLLWATCH_RING_RING_LEFTOVERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ring/ring_reader.h"

namespace collwatch {

// A rank the preload made no ring for (ring_notes.h), as read back.
struct NoRingNoteRead {
  std::string path;
  std::string host, job;
  int32_t pid = 0;
  int32_t rank = ring::kUnset, local_rank = ring::kUnset, world_size = ring::kUnset;
  uint64_t needed_bytes = 0, free_bytes = 0;
  std::string why;
};

// The notes directly in `dir` (of every job), sorted by path; unreadable ones are skipped.
std::vector<NoRingNoteRead> ListNoRingNotes(const std::string& dir);
// "rank 2 (node0, pid 7) was not recorded: <why>", for warnings and a report's gaps.
std::string NotRecordedText(const NoRingNoteRead& note);

// `ring_path` with ".ring" replaced by `suffix` (ring_notes.h kShippedSuffix, ...).
std::string SideFilePath(const std::string& ring_path, const char* suffix);

// The agent's mark that every record of `ring` is stored (written when it keeps the ring).
absl::Status MarkShipped(const RingIdentity& ring);
// Whether a shipped mark beside the ring names this very ring (its pid and start time: a
// later process of the same pid makes a new ring the old mark does not name).
bool MarkedShipped(const RingIdentity& ring);

// Whether the process that wrote `reader` has ended: on this host, its pid is gone or a
// zombie. A ring of another host cannot be judged from here: not ended.
bool RingWriterEnded(const RingReader& reader);

// Removes the ring and what lies beside it of the same name (its shipped mark).
absl::Status RemoveRing(const std::string& ring_path);

}  // namespace collwatch

#endif  // COLLWATCH_RING_RING_LEFTOVERS_H_
