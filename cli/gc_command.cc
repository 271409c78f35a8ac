// `collwatch gc`: one pass over the ring folder; never removes a ring whose process may
// still write it (alive, or of another host). Threading: single-threaded.
#include "cli/gc_command.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ring/ring_directory.h"
#include "ring/ring_leftovers.h"
#include "ring/ring_reader.h"
#include "ring/settings.h"

namespace collwatch {
namespace {

uint64_t FileBytes(const std::string& path) {
  struct stat info{};
  return stat(path.c_str(), &info) == 0 ? static_cast<uint64_t>(info.st_size) : 0;
}

std::string MiB(uint64_t bytes) { return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20)); }

struct Kept {
  std::string path, job, why;
  int32_t pid = 0;
  uint64_t bytes = 0;
};

}  // namespace

int RunGcCommand(const GcOptions& options, std::ostream& out, std::ostream& err) {
  std::string dir = options.dir;
  if (dir.empty()) {
    char folder[512];
    RingDirSetting(folder, sizeof folder);
    dir = folder;
  }
  // Only a folder of ours: in one another user may write, their files are not ours to judge.
  const RingDirCheck check = OpenPrivateRingDir(dir.c_str(), /*create=*/false);
  if (check.fd >= 0) close(check.fd);
  if (check.verdict != RingDirVerdict::kPrivate) {
    char why[256];
    DescribeRingDirCheck(check, why, sizeof why);
    err << "collwatch gc: " << dir << ": " << why << "\n";
    return 2;
  }
  absl::StatusOr<std::vector<std::string>> rings = ListRingFiles(dir);
  if (!rings.ok()) {
    err << "collwatch gc: " << rings.status().message() << "\n";
    return 2;
  }
  int removed = 0, failed = 0;
  uint64_t freed = 0;
  std::vector<Kept> kept;
  std::set<std::string> jobs_left;  // jobs with a ring still here: their notes stay too
  char this_host[ring::kHostBytes] = {};
  gethostname(this_host, sizeof this_host - 1);
  for (const std::string& path : *rings) {
    const uint64_t bytes = FileBytes(path);
    absl::StatusOr<std::unique_ptr<RingReader>> reader = RingReader::Open(path);
    if (!reader.ok()) {
      kept.push_back({path, "?", std::string(reader.status().message()), 0, bytes});
      continue;
    }
    const RingIdentity& ring = (*reader)->identity();
    std::string why;
    if (!RingWriterEnded(**reader)) {
      why = ring.host == this_host ? absl::StrCat("its process ", ring.pid, " is running")
                              : absl::StrCat("written on ", ring.host, ": whether its process ended is not known here");
    } else if (!options.force && !MarkedShipped(ring)) {
      why = "its process ended, but nothing says its records were shipped (collwatch analyze or dump it; --force "
            "removes it)";
    }
    if (why.empty()) {
      if (absl::Status gone = RemoveRing(path); !gone.ok()) {
        err << "collwatch gc: " << gone.message() << "\n";
        ++failed;
        why = "could not be removed";
      } else {
        out << "removed " << path << " (job " << ring.job << ", pid " << ring.pid << ", " << MiB(bytes) << ")\n";
        ++removed;
        freed += bytes;
        continue;
      }
    }
    jobs_left.insert(ring.job);
    kept.push_back({path, ring.job, why, ring.pid, bytes});
  }
  // A note of a rank that made no ring matters as long as its job's rings are here to analyse.
  for (const NoRingNoteRead& note : ListNoRingNotes(dir)) {
    const bool process_gone = note.host == this_host && kill(note.pid, 0) != 0 && errno == ESRCH;
    if (process_gone && !jobs_left.count(note.job) && unlink(note.path.c_str()) == 0) {
      out << "removed " << note.path << " (job " << note.job << ", pid " << note.pid << ": a note of a rank without a ring)\n";
    }
  }
  out << "collwatch gc: removed " << removed << (removed == 1 ? " ring, " : " rings, ") << MiB(freed) << " freed";
  if (kept.empty()) {
    out << "\n";
  } else {
    out << "; kept " << kept.size() << ":\n";
    for (const Kept& ring : kept) {
      out << "  " << ring.path << " (job " << ring.job << ", pid " << ring.pid << ", " << MiB(ring.bytes)
          << "): " << ring.why << "\n";
    }
  }
  return failed > 0 ? 1 : 0;
}

}  // namespace collwatch
