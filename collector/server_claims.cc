// A collector's exclusive claims: its store's path lock and its unix socket path (see
// server_claims.h for the rule). Threading: see server_claims.h.
#include "collector/server_claims.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "process/log_line.h"
#include "ring/hash.h"
#include "ring/ring_directory.h"

namespace collwatch {
namespace {

absl::Status Errno(const std::string& what, int error) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(error)));
}

// What the holder wrote into the lock file: "pid PATH".
std::string HolderWords(int fd) {
  char text[64] = {};
  const ssize_t got = pread(fd, text, sizeof text - 1, 0);
  if (got <= 0) return "";
  const std::string line(text, static_cast<size_t>(got));
  const std::string pid = line.substr(0, line.find(' '));
  return pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos ? "" : absl::StrCat(" (pid ", pid, ")");
}

}  // namespace

absl::StatusOr<StorePathLock> StorePathLock::Take(const std::string& folder, bool log) {
  std::error_code error;
  const std::string path = std::filesystem::weakly_canonical(std::filesystem::absolute(folder), error).string();
  const std::string registry = absl::StrFormat("/dev/shm/collwatch-%u", static_cast<unsigned>(geteuid()));
  const RingDirCheck dir = OpenPrivateRingDir(registry.c_str(), /*create=*/true);
  if (dir.verdict != RingDirVerdict::kPrivate || error) {
    if (dir.fd >= 0) close(dir.fd);
    if (log) {
      char why[256] = "cannot resolve the store's path";
      if (dir.verdict != RingDirVerdict::kPrivate) DescribeRingDirCheck(dir, why, sizeof why);
      LogLine(LogLevel::kError, "collwatch collector")
          << "the store is locked by its folder only (" << registry << ": " << why
          << "): a second collector on a folder removed and made again at " << folder << " is not seen";
    }
    return StorePathLock(-1, -1, "");
  }
  const std::string name = absl::StrFormat("collector-store.%016x.lock", Hash64(path.data(), path.size()));
  // The holder removes the file when it lets go: a lock taken on a file that was removed
  // meanwhile is no lock, so it is taken again on the file the name holds now.
  int fd = -1;
  for (int attempt = 0; attempt < 10 && fd < 0; ++attempt) {
    fd = openat(dir.fd, name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
      const int open_error = errno;
      close(dir.fd);
      return Errno(absl::StrCat("cannot lock ", folder, " (", registry, "/", name, ")"), open_error);
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int lock_error = errno;
      const std::string holder = HolderWords(fd);
      close(fd);
      close(dir.fd);
      if (lock_error != EWOULDBLOCK) return Errno(absl::StrCat("cannot lock ", folder), lock_error);
      return absl::FailedPreconditionError(absl::StrCat(
          folder, ": another collector", holder,
          " writes there already (its folder was removed or replaced since it started, and it still runs: stop it "
          "first)"));
    }
    struct stat held {}, named {};
    if (fstat(fd, &held) != 0 || fstatat(dir.fd, name.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0 ||
        held.st_ino != named.st_ino || held.st_dev != named.st_dev) {
      close(fd);
      fd = -1;
    }
  }
  if (fd < 0) {
    close(dir.fd);
    return absl::UnavailableError(absl::StrCat("cannot lock ", folder, ": ", registry, "/", name, " keeps changing"));
  }
  const std::string text = absl::StrCat(getpid(), " ", path, "\n");
  // Only the pid in a second collector's message depends on it: the lock holds either way.
  const bool named = ftruncate(fd, 0) == 0 && pwrite(fd, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size());
  static_cast<void>(named);
  return StorePathLock(fd, dir.fd, name);
}

StorePathLock& StorePathLock::operator=(StorePathLock&& other) noexcept {
  if (this != &other) {
    Release();
    fd_ = other.fd_;
    dir_fd_ = other.dir_fd_;
    name_ = std::move(other.name_);
    other.fd_ = other.dir_fd_ = -1;
  }
  return *this;
}

void StorePathLock::Release() {
  // Removed while still held, so that nobody takes a lock on a name about to go.
  if (fd_ >= 0) unlinkat(dir_fd_, name_.c_str(), 0);
  if (fd_ >= 0) close(fd_);
  if (dir_fd_ >= 0) close(dir_fd_);
  fd_ = dir_fd_ = -1;
}

absl::Status ClaimUnixSocketPath(const std::string& path) {
  struct stat info {};
  if (lstat(path.c_str(), &info) != 0 || !S_ISSOCK(info.st_mode)) return absl::OkStatus();
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof address.sun_path) return absl::OkStatus();  // the bind says it is too long
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  const int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe < 0) return Errno("cannot look at unix:" + path, errno);
  const int answered = connect(probe, reinterpret_cast<const sockaddr*>(&address), sizeof address);
  const int connect_error = errno;
  close(probe);
  if (answered == 0 || connect_error == EAGAIN) {  // EAGAIN: a live server with a full backlog
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot listen on unix:", path, ": a server (another collector?) answers there; stop it, or give another path"));
  }
  if (connect_error != ECONNREFUSED) {
    return Errno(absl::StrCat("cannot listen on unix:", path, ": cannot tell whether a server answers there"),
                 connect_error);
  }
  // Nobody listens: the socket of a collector that ended without removing it.
  if (unlink(path.c_str()) != 0 && errno != ENOENT) return Errno("cannot remove the stale socket " + path, errno);
  return absl::OkStatus();
}

}  // namespace collwatch
