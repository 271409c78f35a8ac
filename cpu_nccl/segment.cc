// Segment files: naming, creation, mapping; futex wake-ups of sleeping ranks.
// Threading: see segment.h. No allocation; system calls only at map/unmap and on wakes.
#include "cpu_nccl/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>

#include "cpu_nccl/futex.h"

namespace collwatch::cpu_nccl {

bool SegmentPath(const char* dir, uint64_t key, char* out, size_t capacity) noexcept {
  const int n = std::snprintf(out, capacity, "%s/collwatch-nccl-%u-%016" PRIx64, dir,
                              static_cast<unsigned>(getuid()), key);
  return n > 0 && static_cast<size_t>(n) < capacity;
}

int MapSegment(const char* path, const Geometry& geo, Segment* out) noexcept {
  const int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return errno;
  struct stat st {};
  int err = 0;
  if (fstat(fd, &st) != 0) {
    err = errno;
  } else if (static_cast<uint64_t>(st.st_size) < geo.total_bytes &&
             ftruncate(fd, static_cast<off_t>(geo.total_bytes)) != 0) {
    err = errno;  // a larger file belongs to another geometry: the header check hangs
  }
  void* base = MAP_FAILED;
  if (err == 0) {
    base = mmap(nullptr, geo.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) err = errno;
  }
  close(fd);
  if (err != 0) return err;
  out->base = static_cast<uint8_t*>(base);
  out->geo = geo;
  return 0;
}

void UnmapSegment(Segment* seg) noexcept {
  if (seg->base != nullptr) munmap(seg->base, seg->geo.total_bytes);
  seg->base = nullptr;
}

void RingDoorbell(RankControl* rc) noexcept {
  rc->doorbell.fetch_add(1, std::memory_order_seq_cst);
  FutexWakeAll(&rc->doorbell);
}

void WakeRankIfWaiting(const Segment& seg, int target, int from) noexcept {
  RankControl* rc = seg.Rank(target);
  const int32_t w = rc->wait_on.load(std::memory_order_seq_cst);
  if (w == from || w == kWaitAny) RingDoorbell(rc);
}

void WakeWaitersOf(const Segment& seg, int from) noexcept {
  const int n = static_cast<int>(seg.geo.nranks);
  for (int r = 0; r < n; ++r) {
    if (r != from) WakeRankIfWaiting(seg, r, from);
  }
}

}  // namespace collwatch::cpu_nccl
