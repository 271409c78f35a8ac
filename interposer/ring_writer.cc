// Creates and maps the per-process ring file. Runs once per process, on the first
// recorded NCCL call; everything after creation is the lock-free Append() in the header.
#include "interposer/ring_writer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>

namespace collwatch {
namespace {

uint64_t ClockNs(clockid_t clock) noexcept {
  timespec now{};
  clock_gettime(clock, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
}

int32_t EnvInt(const char* name) noexcept {
  const char* value = std::getenv(name);
  if (value == nullptr || value[0] == '\0') return ring::kUnset;
  char* end = nullptr;
  long parsed = std::strtol(value, &end, 10);
  return (*end == '\0' && parsed >= 0 && parsed < (1l << 30)) ? static_cast<int32_t>(parsed)
                                                              : ring::kUnset;
}

// The ring folder is private to its user (0700); an existing one must be ours.
bool EnsurePrivateDirectory(const char* dir) noexcept {
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) return false;
  struct stat info{};
  if (stat(dir, &info) != 0 || !S_ISDIR(info.st_mode)) return false;
  if (info.st_uid != geteuid()) {
    errno = EACCES;
    return false;
  }
  return true;
}

void Warn(const char* what, const char* path, int error) noexcept {
  std::fprintf(stderr, "collwatch: %s %s: %s; NCCL calls of this process are not recorded\n",
               what, path, std::strerror(error));
}

}  // namespace

RingWriter::~RingWriter() {
  if (header_ != nullptr) munmap(header_, header_->file_bytes);
}

std::unique_ptr<RingWriter> RingWriter::Create(const Config& config) noexcept {
  char host[ring::kHostBytes] = {};
  gethostname(host, sizeof host - 1);
  const pid_t pid = getpid();

  std::unique_ptr<RingWriter> writer(new (std::nothrow) RingWriter());
  if (writer == nullptr) return nullptr;
  std::snprintf(writer->path_, sizeof writer->path_, "%s/%s.%s.%d.ring", config.ring_dir,
                config.job, host, static_cast<int>(pid));
  if (!EnsurePrivateDirectory(config.ring_dir)) {
    Warn("cannot use ring folder", config.ring_dir, errno);
    return nullptr;
  }

  // A file of the same name is a stale ring of a dead process with our pid: replace it.
  unlink(writer->path_);
  const int fd = open(writer->path_, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    Warn("cannot create ring", writer->path_, errno);
    return nullptr;
  }
  const uint64_t bytes = ring::RingFileBytes(config.ring_lanes, config.ring_records,
                                             ring::kDefaultStringCapacity);
  // Reserve every page now: on a full /dev/shm a sparse file would SIGBUS the job later.
  const int reserve_error = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  void* map = reserve_error == 0
                  ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                  : MAP_FAILED;
  const int map_error = reserve_error != 0 ? reserve_error : errno;
  close(fd);
  if (map == MAP_FAILED) {
    Warn("cannot reserve ring", writer->path_, map_error);
    unlink(writer->path_);
    return nullptr;
  }

  auto* base = static_cast<char*>(map);
  auto* header = reinterpret_cast<ring::Header*>(base);
  header->version = ring::kVersion;
  header->header_bytes = ring::kHeaderBytes;
  header->record_bytes = ring::kRecordBytes;
  header->string_slot_bytes = ring::kStringSlotBytes;
  header->lane_count = config.ring_lanes;
  header->lane_header_bytes = ring::kLaneHeaderBytes;
  header->lane_capacity = config.ring_records;
  header->lane_bytes = ring::LaneBytes(config.ring_records);
  header->string_capacity = ring::kDefaultStringCapacity;
  header->strings_offset = ring::kHeaderBytes;
  header->lanes_offset = ring::kHeaderBytes + ring::kDefaultStringCapacity * ring::kStringSlotBytes;
  header->file_bytes = bytes;
  header->pid = static_cast<int32_t>(pid);
  header->rank = EnvInt("RANK");
  header->local_rank = EnvInt("LOCAL_RANK");
  header->world_size = EnvInt("WORLD_SIZE");
  header->start_realtime_ns = ClockNs(CLOCK_REALTIME);
  header->start_monotonic_ns = ClockNs(CLOCK_MONOTONIC);
  std::memcpy(header->host, host, sizeof header->host);
  std::snprintf(header->job, sizeof header->job, "%s", config.job);
  header->heartbeat_ns.store(header->start_monotonic_ns, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(header->magic).store(ring::kMagic, std::memory_order_release);

  writer->header_ = header;
  writer->strings_ = reinterpret_cast<ring::StringSlot*>(base + header->strings_offset);
  writer->lanes_ = base + header->lanes_offset;
  writer->lane_bytes_ = header->lane_bytes;
  writer->lane_count_ = header->lane_count;
  writer->index_mask_ = config.ring_records - 1;
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
