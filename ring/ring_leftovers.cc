// Reading the notes and marks beside the rings. Threading: see ring_leftovers.h.
#include "ring/ring_leftovers.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "files/safe_files.h"
#include "ring/ring_notes.h"

namespace collwatch {
namespace {

constexpr uint64_t kMaxSideFileBytes = 4096;

bool EndsWith(const std::string& text, const char* suffix) {
  const size_t length = std::strlen(suffix);
  return text.size() > length && text.compare(text.size() - length, length, suffix) == 0;
}

std::optional<NoRingNoteRead> ReadNoRingNote(const std::string& path) {
  absl::StatusOr<std::string> text = ReadRegularFile(path, kMaxSideFileBytes);
  if (!text.ok()) return std::nullopt;
  std::vector<std::string> lines = absl::StrSplit(*text, '\n');
  if (lines.empty() || lines[0] != ring::kNoRingNoteFirstLine) return std::nullopt;
  NoRingNoteRead note;
  note.path = path;
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t space = lines[i].find(' ');
    if (space == std::string::npos) continue;
    const std::string key = lines[i].substr(0, space), value = lines[i].substr(space + 1);
    if (key == "pid") (void)absl::SimpleAtoi(value, &note.pid);
    if (key == "rank") (void)absl::SimpleAtoi(value, &note.rank);
    if (key == "local_rank") (void)absl::SimpleAtoi(value, &note.local_rank);
    if (key == "world_size") (void)absl::SimpleAtoi(value, &note.world_size);
    if (key == "needed_bytes") (void)absl::SimpleAtoi(value, &note.needed_bytes);
    if (key == "free_bytes") (void)absl::SimpleAtoi(value, &note.free_bytes);
    if (key == "host") note.host = value;
    if (key == "job") note.job = value;
    if (key == "why") note.why = value;
  }
  if (note.pid <= 0 || note.why.empty()) return std::nullopt;
  return note;
}

}  // namespace

std::vector<NoRingNoteRead> ListNoRingNotes(const std::string& dir) {
  std::vector<NoRingNoteRead> notes;
  DIR* handle = opendir(dir.c_str());
  if (handle == nullptr) return notes;
  while (dirent* entry = readdir(handle)) {
    const std::string name = entry->d_name;
    if (!EndsWith(name, ring::kNoRingSuffix)) continue;
    if (std::optional<NoRingNoteRead> note = ReadNoRingNote(absl::StrCat(dir, "/", name))) {
      notes.push_back(*std::move(note));
    }
  }
  closedir(handle);
  std::sort(notes.begin(), notes.end(),
            [](const NoRingNoteRead& a, const NoRingNoteRead& b) { return a.path < b.path; });
  return notes;
}

std::string NotRecordedText(const NoRingNoteRead& note) {
  const std::string who = note.rank >= 0 ? absl::StrCat("rank ", note.rank, " (", note.host, ", pid ", note.pid, ")")
                                         : absl::StrCat("pid ", note.pid, " (", note.host, ")");
  return absl::StrCat(who, " was not recorded: ", note.why);
}

std::string SideFilePath(const std::string& ring_path, const char* suffix) {
  const bool is_ring = EndsWith(ring_path, ring::kRingSuffix);
  return absl::StrCat(is_ring ? ring_path.substr(0, ring_path.size() - std::strlen(ring::kRingSuffix)) : ring_path,
                      suffix);
}

absl::Status MarkShipped(const RingIdentity& ring) {
  return WriteFileReplacing(SideFilePath(ring.path, ring::kShippedSuffix),
                            absl::StrCat(ring.pid, " ", ring.start_realtime_ns, "\n"));
}

bool MarkedShipped(const RingIdentity& ring) {
  absl::StatusOr<std::string> text = ReadRegularFile(SideFilePath(ring.path, ring::kShippedSuffix), kMaxSideFileBytes);
  if (!text.ok()) return false;
  std::istringstream fields(*text);
  int32_t pid = 0;
  uint64_t start = 0;
  return static_cast<bool>(fields >> pid >> start) && pid == ring.pid && start == ring.start_realtime_ns;
}

bool RingWriterEnded(const RingReader& reader) {
  char host[ring::kHostBytes] = {};
  gethostname(host, sizeof host - 1);
  return reader.identity().host == host && !reader.WriterProcessAlive();
}

absl::Status RemoveRing(const std::string& ring_path) {
  if (unlink(ring_path.c_str()) != 0 && errno != ENOENT) {
    return absl::InternalError(absl::StrCat("cannot remove ", ring_path, ": ", std::strerror(errno)));
  }
  unlink(SideFilePath(ring_path, ring::kShippedSuffix).c_str());
  return absl::OkStatus();
}

}  // namespace collwatch
