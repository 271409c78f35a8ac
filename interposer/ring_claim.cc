// The ring's name in the folder: a file already there is another process's (a pid reused
// under the default job name "local", another container of the same host name and pid
// sharing the folder); it is never removed. Threading: see ring_claim.h.
#include "interposer/ring_claim.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "ring/clocks.h"
#include "ring/ring_format.h"
#include "ring/ring_notes.h"

namespace collwatch {
namespace {

// A writer beats every 100 ms (ring_format.h Header::heartbeat_ns): a ring of our pid
// that beat this recently is written by a process of another pid namespace.
constexpr uint64_t kFreshBeatNs = 2'000'000'000;

enum class Occupant {
  kNone,   // no file of the name
  kEnded,  // a complete ring whose writer ended on this host
  kOther,  // a ring that may still be written, or a file we cannot judge
};

// Who wrote the ring that stands at the name (filled for kEnded and, when known, kOther).
struct OccupantIdentity {
  int32_t pid = 0;
  uint64_t start_realtime_ns = 0;
  char host[ring::kHostBytes] = {};
  char job[ring::kJobBytes] = {};
};

Occupant Judge(int dir_fd, const char* name, const char* host, pid_t pid, OccupantIdentity* who) noexcept {
  // Read only, no link followed, no wait on a FIFO: whatever it is stays as it is.
  const int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? Occupant::kNone : Occupant::kOther;
  struct stat info{};
  void* map = MAP_FAILED;
  if (fstat(fd, &info) == 0 && S_ISREG(info.st_mode) && info.st_size >= static_cast<off_t>(ring::kHeaderBytes)) {
    map = mmap(nullptr, ring::kHeaderBytes, PROT_READ, MAP_SHARED, fd, 0);
  }
  close(fd);
  // Not a complete ring: one being created right now, or no ring at all. Not ours to judge.
  if (map == MAP_FAILED) return Occupant::kOther;
  const auto* header = static_cast<const ring::Header*>(map);
  Occupant verdict = Occupant::kOther;
  if (__atomic_load_n(&header->magic, __ATOMIC_ACQUIRE) == ring::kMagic) {
    who->pid = header->pid;
    who->start_realtime_ns = header->start_realtime_ns;
    std::memcpy(who->host, header->host, sizeof who->host - 1);
    std::memcpy(who->job, header->job, sizeof who->job - 1);
    const bool this_host = std::strncmp(who->host, host, sizeof who->host) == 0;
    bool ended = false;
    if (!this_host) {
      ended = false;  // a folder shared across hosts: its writer cannot be seen from here
    } else if (header->pid == pid) {
      // Our pid, and we have no ring yet: an earlier process of our pid, unless a process
      // of another pid namespace (a container) beats in it now.
      const uint64_t beat = header->heartbeat_ns.load(std::memory_order_acquire);
      const uint32_t state = header->writer_state.load(std::memory_order_acquire);
      const uint64_t now = ClockNs(CLOCK_MONOTONIC);
      ended = state != static_cast<uint32_t>(ring::WriterState::kRunning) || now < beat || now - beat > kFreshBeatNs;
    } else {
      ended = header->pid > 0 && kill(header->pid, 0) != 0 && errno == ESRCH;
    }
    verdict = ended ? Occupant::kEnded : Occupant::kOther;
  }
  munmap(map, ring::kHeaderBytes);
  return verdict;
}

// rename without replacing: renameat2's RENAME_NOREPLACE, or link + unlink where the file
// system lacks it (link never replaces either).
bool RenameNoReplace(int dir_fd, const char* from, const char* to) noexcept {
  if (renameat2(dir_fd, from, dir_fd, to, RENAME_NOREPLACE) == 0) return true;
  if (errno != EINVAL && errno != ENOSYS) return false;
  if (linkat(dir_fd, from, dir_fd, to, 0) != 0) return false;
  unlinkat(dir_fd, from, 0);
  return true;
}

// `name` without ".ring", into `stem`.
bool StemOf(const char* name, char* stem, size_t size) noexcept {
  const size_t length = std::strlen(name);
  const size_t suffix = sizeof ring::kRingSuffix - 1;
  if (length <= suffix || std::strcmp(name + length - suffix, ring::kRingSuffix) != 0) return false;
  const int written = std::snprintf(stem, size, "%.*s", static_cast<int>(length - suffix), name);
  return written > 0 && static_cast<size_t>(written) < size;
}

}  // namespace

RingNameClaim ClaimRingName(int dir_fd, const char* dir, const char* host, pid_t pid, char* name,
                            size_t size) noexcept {
  OccupantIdentity who;
  const Occupant occupant = Judge(dir_fd, name, host, pid, &who);
  if (occupant == Occupant::kNone) return RingNameClaim::kFree;
  char stem[320];
  if (!StemOf(name, stem, sizeof stem)) return RingNameClaim::kNoName;
  if (occupant == Occupant::kEnded) {
    // Still a *.ring: the agent ships it (then removes it), gc, analyze and dump read it.
    char kept[384];
    const int length = std::snprintf(kept, sizeof kept, "%s.kept-%llu%s", stem,
                                     static_cast<unsigned long long>(who.start_realtime_ns), ring::kRingSuffix);
    if (length > 0 && static_cast<size_t>(length) < sizeof kept && RenameNoReplace(dir_fd, name, kept)) {
      // Its shipped mark names it (pid and start time): it goes along.
      char mark[320], kept_mark[400];
      if (ring::SideFileName(name, ring::kShippedSuffix, mark, sizeof mark) &&
          ring::SideFileName(kept, ring::kShippedSuffix, kept_mark, sizeof kept_mark)) {
        RenameNoReplace(dir_fd, mark, kept_mark);
      }
      std::fprintf(stderr,
                   "collwatch: kept %s/%s aside as %s: it is the ring of job %s, pid %d on %s, which ended (its "
                   "records may not have been shipped; collwatch dump reads it, the agent ships it)\n",
                   dir, name, kept, who.job, static_cast<int>(who.pid), who.host);
      return RingNameClaim::kKeptAside;
    }
  }
  // A ring that may still be written, or one that could not be moved: ours takes a name of
  // its own, never replacing a file.
  char other[384];
  const int length = std::snprintf(other, sizeof other, "%s.%llu%s", stem,
                                   static_cast<unsigned long long>(ClockNs(CLOCK_REALTIME)), ring::kRingSuffix);
  if (length <= 0 || static_cast<size_t>(length) >= size || static_cast<size_t>(length) >= sizeof other) {
    std::fprintf(stderr, "collwatch: %s/%s belongs to another process and no other name fits; NCCL calls of this "
                         "process are not recorded\n", dir, name);
    return RingNameClaim::kNoName;
  }
  if (who.pid != 0) {
    std::fprintf(stderr, "collwatch: %s/%s is the ring of job %s, pid %d on %s, %s; recording to %s instead\n", dir,
                 name, who.job, static_cast<int>(who.pid), who.host,
                 occupant == Occupant::kEnded ? "which could not be moved aside" : "which may still write it", other);
  } else {
    std::fprintf(stderr, "collwatch: %s/%s is not a ring collwatch can read (left alone); recording to %s instead\n",
                 dir, name, other);
  }
  std::memcpy(name, other, static_cast<size_t>(length) + 1);
  return RingNameClaim::kOtherName;
}

}  // namespace collwatch
