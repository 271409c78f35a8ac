// What a collector holds for its life so that no second collector takes it over: its
// store, by folder and by path, and its unix socket path.
// Threading: called once, from CollectorServer::Start; the claims are plain objects.
//
// The rule for a store (docs/reliability.md, collector/README.md):
//   1. an flock of the store folder itself, through a descriptor held for the collector's
//      life (files/safe_files.h FolderLock): the folder stays locked wherever it is moved;
//   2. an flock of a lock file named for the folder's absolute path (hashed), in the
//      user's private folder /dev/shm/collwatch-<uid>: a folder removed and made again at
//      that path is a new folder, which (1) cannot see, but its path is still taken.
// A second collector is refused when either is held, naming the holder's pid. Both locks
// go with the process, crash or not (a lock file a crash leaves is taken by the next). Where the
// private folder cannot be used (another user's, no /dev/shm), (2) is skipped with a
// line on stderr: (1) still holds while the folder is not replaced.
#ifndef COLLWATCH_COLLECTOR_SERVER_CLAIMS_H_
#define COLLWATCH_COLLECTOR_SERVER_CLAIMS_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace collwatch {

// The lock of rule (2) above, held while the object lives.
class StorePathLock {
 public:
  // `folder` exists (PrepareOutputFolder). `log`: say on stderr when (2) is skipped.
  static absl::StatusOr<StorePathLock> Take(const std::string& folder, bool log);
  StorePathLock(StorePathLock&& other) noexcept : fd_(other.fd_), dir_fd_(other.dir_fd_), name_(std::move(other.name_)) {
    other.fd_ = other.dir_fd_ = -1;
  }
  StorePathLock& operator=(StorePathLock&& other) noexcept;
  StorePathLock(const StorePathLock&) = delete;
  StorePathLock& operator=(const StorePathLock&) = delete;
  ~StorePathLock() { Release(); }

 private:
  StorePathLock(int fd, int dir_fd, std::string name) : fd_(fd), dir_fd_(dir_fd), name_(std::move(name)) {}
  void Release();
  int fd_ = -1;      // the locked file; -1: rule (2) skipped
  int dir_fd_ = -1;  // the private folder holding it
  std::string name_;
};

// Before listening on unix:PATH: gRPC would remove whatever socket is at PATH and bind
// anew, taking the path from a live collector. A socket that answers a connect is a live
// server's: refused. One that refuses the connect is stale: removed. Anything else is
// left for the bind to judge.
absl::Status ClaimUnixSocketPath(const std::string& path);

}  // namespace collwatch

#endif  // COLLWATCH_COLLECTOR_SERVER_CLAIMS_H_
