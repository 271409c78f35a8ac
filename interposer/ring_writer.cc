// Creates and maps the per-process ring file. Runs once per process, on the first
// recorded NCCL call; everything after creation is the lock-free Append() in the header.
// Threading: see ring_writer.h.
#include "interposer/ring_writer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>

#include "interposer/ring_claim.h"
#include "interposer/regions.h"
#include "ring/clocks.h"
#include "ring/ring_directory.h"
#include "ring/ring_notes.h"
#include "ring/settings.h"

namespace collwatch {
namespace {

// A launcher's rank variable, or kUnset when unset or not a plain non-negative number.
int32_t RankSetting(const LauncherRankVariables* launcher, Setting LauncherRankVariables::*which) noexcept {
  if (launcher == nullptr) return ring::kUnset;
  const char* value = SettingIfSet(launcher->*which);
  if (value == nullptr) return ring::kUnset;
  char* end = nullptr;
  long parsed = std::strtol(value, &end, 10);
  return (*end == '\0' && parsed >= 0 && parsed < (1l << 30)) ? static_cast<int32_t>(parsed)
                                                              : ring::kUnset;
}

void Warn(const char* what, const char* path, const char* why) noexcept {
  std::fprintf(stderr, "collwatch: %s %s: %s; NCCL calls of this process are not recorded\n",
               what, path, why);
}

double MiB(uint64_t bytes) noexcept { return static_cast<double>(bytes) / (1 << 20); }

// Free bytes of the file system of the folder `dir_fd` (unknown: as good as unlimited).
uint64_t FreeBytes(int dir_fd) noexcept {
  struct statvfs info{};
  if (fstatvfs(dir_fd, &info) != 0) return UINT64_MAX;
  return static_cast<uint64_t>(info.f_bavail) * info.f_frsize;
}

// The preload's one word to the readers about a rank that has no ring (ring_notes.h).
void LeaveNoRingNote(int dir_fd, const char* name, const char* host, const char* job, uint64_t needed,
                     uint64_t free_bytes, const char* why) noexcept {
  const LauncherRankVariables* launcher = LauncherOf([](const char* variable) { return std::getenv(variable); });
  ring::NoRingNote note;
  note.pid = static_cast<int32_t>(getpid());
  note.rank = RankSetting(launcher, &LauncherRankVariables::rank);
  note.local_rank = RankSetting(launcher, &LauncherRankVariables::local_rank);
  note.world_size = RankSetting(launcher, &LauncherRankVariables::world_size);
  note.needed_bytes = needed;
  note.free_bytes = free_bytes;
  note.host = host;
  note.job = job;
  note.why = why;
  ring::WriteNoRingNote(dir_fd, name, note);
}

// A region's id is its name table slot: the smallest ring must hold the slots most names get.
static_assert(kFloorStrings >= kRegionSmallWindow, "a ring at the floor must carry the names' first window");

constexpr char kRaiseShm[] =
    "raise the container's shm size (docker --shm-size, a Kubernetes emptyDir with medium: Memory) or free it "
    "(collwatch gc)";

}  // namespace

RingGeometry SizeRing(const Config& config, uint64_t free_bytes) noexcept {
  RingGeometry geometry;
  geometry.lane_capacity = config.ring_records;
  geometry.string_capacity = ring::kDefaultStringCapacity;
  geometry.call_path_capacity = ring::kDefaultCallPathCapacity;
  auto bytes = [&config](const RingGeometry& g) {
    return ring::RingFileBytes(config.ring_lanes, g.lane_capacity, g.string_capacity, g.call_path_capacity);
  };
  geometry.floor_bytes = bytes(geometry);
  if (!config.ring_records_set) {
    const uint64_t budget = free_bytes / kFreeSpaceShare;
    auto halve = [](uint64_t* value, uint64_t floor) {
      if (*value > floor) *value = *value / 2 < floor ? floor : *value / 2;
    };
    while (bytes(geometry) > budget && (geometry.lane_capacity > kFloorLaneRecords ||
                                        geometry.string_capacity > kFloorStrings ||
                                        geometry.call_path_capacity > kFloorCallPaths)) {
      halve(&geometry.lane_capacity, kFloorLaneRecords);
      halve(&geometry.string_capacity, kFloorStrings);
      halve(&geometry.call_path_capacity, kFloorCallPaths);
    }
    RingGeometry floor = geometry;
    floor.lane_capacity = config.ring_records < kFloorLaneRecords ? config.ring_records : kFloorLaneRecords;
    floor.string_capacity = kFloorStrings;
    floor.call_path_capacity = kFloorCallPaths;
    geometry.floor_bytes = bytes(floor);
  }
  geometry.bytes = bytes(geometry);
  geometry.fits = geometry.bytes <= free_bytes;
  return geometry;
}

RingWriter::~RingWriter() {
  if (header_ != nullptr) munmap(header_, header_->file_bytes);
}

std::unique_ptr<RingWriter> RingWriter::Create(const Config& config) noexcept {
  char host[ring::kHostBytes] = {};
  gethostname(host, sizeof host - 1);
  const pid_t pid = getpid();

  std::unique_ptr<RingWriter> writer(new (std::nothrow) RingWriter());
  if (writer == nullptr) return nullptr;
  // The host name becomes part of a file name: no slash may take it out of the folder.
  char host_in_name[ring::kHostBytes];
  std::memcpy(host_in_name, host, sizeof host_in_name);
  for (char* c = host_in_name; *c != '\0'; ++c) {
    if (*c == '/') *c = '_';
  }
  char name[320];
  std::snprintf(name, sizeof name, "%s.%s.%d%s", config.job, host_in_name, static_cast<int>(pid), ring::kRingSuffix);
  std::snprintf(writer->path_, sizeof writer->path_, "%s/%s", config.ring_dir, name);
  const RingDirCheck dir = OpenPrivateRingDir(config.ring_dir, /*create=*/true);
  if (dir.verdict != RingDirVerdict::kPrivate) {
    char why[256];
    DescribeRingDirCheck(dir, why, sizeof why);
    Warn("cannot use ring folder", config.ring_dir, why);
    return nullptr;
  }
  // A file of the same name is another process's ring (a reused pid, a container's): never
  // removed, kept aside or left alone (ring_claim.h). Relative to the checked folder.
  if (ClaimRingName(dir.fd, config.ring_dir, host, pid, name, sizeof name) == RingNameClaim::kNoName) {
    close(dir.fd);
    return nullptr;
  }
  std::snprintf(writer->path_, sizeof writer->path_, "%s/%s", config.ring_dir, name);
  const uint64_t free_bytes = FreeBytes(dir.fd);
  const RingGeometry geometry = SizeRing(config, free_bytes);
  const uint64_t bytes = geometry.bytes;
  if (!geometry.fits) {
    char why[512];
    std::snprintf(why, sizeof why, "no ring: %s has %.1f MiB free, a ring needs at least %.1f MiB; %s",
                  config.ring_dir, MiB(free_bytes), MiB(config.ring_records_set ? bytes : geometry.floor_bytes),
                  config.ring_records_set ? "lower COLLWATCH_RING_RECORDS, or raise the free space" : kRaiseShm);
    Warn("cannot create ring", writer->path_, why);
    LeaveNoRingNote(dir.fd, name, host, config.job, geometry.floor_bytes, free_bytes, why);
    close(dir.fd);
    return nullptr;
  }
  // Past the file size limit (ulimit -f) the kernel answers SIGXFSZ, which kills the job.
  rlimit file_limit{};
  if (getrlimit(RLIMIT_FSIZE, &file_limit) == 0 && file_limit.rlim_cur != RLIM_INFINITY &&
      file_limit.rlim_cur < bytes) {
    char why[160];
    std::snprintf(why, sizeof why, "needs %llu bytes, over the file size limit of %llu (ulimit -f)",
                  static_cast<unsigned long long>(bytes),
                  static_cast<unsigned long long>(file_limit.rlim_cur));
    Warn("cannot create ring", writer->path_, why);
    LeaveNoRingNote(dir.fd, name, host, config.job, bytes, free_bytes, why);
    close(dir.fd);
    return nullptr;
  }

  const int fd = openat(dir.fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    Warn("cannot create ring", writer->path_, std::strerror(errno));
    close(dir.fd);
    return nullptr;
  }
  // Reserve every page now: on a full /dev/shm a sparse file would SIGBUS the job later.
  const int reserve_error = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  void* map = reserve_error == 0
                  ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                  : MAP_FAILED;
  const int map_error = reserve_error != 0 ? reserve_error : errno;
  close(fd);
  if (map == MAP_FAILED) {
    Warn("cannot reserve ring", writer->path_, std::strerror(map_error));
    unlinkat(dir.fd, name, 0);
    if (map_error == ENOSPC) {
      // Other ranks' rings took the space between the look and the reservation.
      char why[512];
      std::snprintf(why, sizeof why, "no ring: %s filled up while this rank reserved its %.1f MiB ring (%.1f MiB had "
                    "been free); %s", config.ring_dir, MiB(bytes), MiB(free_bytes), kRaiseShm);
      LeaveNoRingNote(dir.fd, name, host, config.job, bytes, free_bytes, why);
    }
    close(dir.fd);
    return nullptr;
  }
  // A note of an earlier process with our pid would name a reason that is not ours.
  char note_name[320];
  if (ring::SideFileName(name, ring::kNoRingSuffix, note_name, sizeof note_name)) unlinkat(dir.fd, note_name, 0);
  close(dir.fd);

  auto* base = static_cast<char*>(map);
  auto* header = reinterpret_cast<ring::Header*>(base);
  header->version = ring::kVersion;
  header->header_bytes = ring::kHeaderBytes;
  header->record_bytes = ring::kRecordBytes;
  header->string_slot_bytes = ring::kStringSlotBytes;
  header->lane_count = config.ring_lanes;
  header->lane_header_bytes = ring::kLaneHeaderBytes;
  header->lane_capacity = geometry.lane_capacity;
  header->lane_bytes = ring::LaneBytes(geometry.lane_capacity);
  header->string_capacity = geometry.string_capacity;
  header->strings_offset = ring::kHeaderBytes;
  header->call_path_slot_bytes = ring::kCallPathSlotBytes;
  header->call_path_capacity = geometry.call_path_capacity;
  header->call_paths_offset = header->strings_offset + geometry.string_capacity * ring::kStringSlotBytes;
  header->lanes_offset = header->call_paths_offset + geometry.call_path_capacity * ring::kCallPathSlotBytes;
  header->file_bytes = bytes;
  header->pid = static_cast<int32_t>(pid);
  const LauncherRankVariables* launcher = LauncherOf([](const char* variable) { return std::getenv(variable); });
  header->rank = RankSetting(launcher, &LauncherRankVariables::rank);
  header->local_rank = RankSetting(launcher, &LauncherRankVariables::local_rank);
  header->world_size = RankSetting(launcher, &LauncherRankVariables::world_size);
  header->start_realtime_ns = ClockNs(CLOCK_REALTIME);
  header->start_monotonic_ns = ClockNs(CLOCK_MONOTONIC);
  std::memcpy(header->host, host, sizeof header->host);
  std::snprintf(header->job, sizeof header->job, "%s", config.job);
  header->heartbeat_ns.store(header->start_monotonic_ns, std::memory_order_relaxed);
  header->exit_code.store(ring::kUnset, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(header->magic).store(ring::kMagic, std::memory_order_release);

  writer->header_ = header;
  writer->strings_ = reinterpret_cast<ring::StringSlot*>(base + header->strings_offset);
  writer->call_paths_ = reinterpret_cast<ring::CallPathSlot*>(base + header->call_paths_offset);
  writer->lanes_ = base + header->lanes_offset;
  writer->lane_bytes_ = header->lane_bytes;
  writer->lane_count_ = header->lane_count;
  writer->index_mask_ = geometry.lane_capacity - 1;
  return writer;
}

uint32_t RingWriter::ClaimLane(uint32_t tid) noexcept {
  for (uint32_t lane = 1; lane < lane_count_; ++lane) {
    uint32_t free_owner = 0;
    if (LaneHead(lane)->owner_tid.compare_exchange_strong(free_owner, tid,
                                                          std::memory_order_acquire)) {
      return lane;
    }
  }
  return kSharedLane;
}

void RingWriter::ReleaseLane(uint32_t lane) noexcept {
  if (lane != kSharedLane) LaneHead(lane)->owner_tid.store(0, std::memory_order_release);
}

}  // namespace collwatch
