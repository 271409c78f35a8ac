// Which ring folders are safe to write rings into (the interposer) and to ship rings
// from (the agent): a real directory, not a symlink, owned by this user, closed to
// everyone else (no group or other permission bits), in a parent nobody else can swap
// it in. The default /dev/shm is shared by every user of the node, so another user may
// have planted a folder or a symlink of that name first. Threading: pure functions of
// the file system; no allocation, noexcept (the interposer calls them once per process).
#ifndef COLLWATCH_RING_RING_DIRECTORY_H_
#define COLLWATCH_RING_RING_DIRECTORY_H_

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>

namespace collwatch {

enum class RingDirVerdict {
  kPrivate,        // safe: `fd` is open on it
  kUnusable,       // cannot be created or opened (`error`)
  kNotADirectory,  // a symlink or another kind of file stands at the path
  kForeignOwner,   // owned by uid `owner`, not by us
  kTooOpen,        // mode `mode` lets group or others in
  kUnsafeParent,   // its parent may be written by others without the sticky bit (`mode`, `owner` are the parent's)
};

struct RingDirCheck {
  RingDirVerdict verdict = RingDirVerdict::kUnusable;
  int fd = -1;  // an O_DIRECTORY descriptor of the folder when kPrivate; the caller closes it
  int error = 0;
  unsigned owner = 0;
  unsigned mode = 0;
};

namespace ring_directory_internal {

// The parent of `dir` ("." for a bare name), written into `out`.
inline void ParentOf(const char* dir, char* out, size_t size) noexcept {
  std::snprintf(out, size, "%s", dir);
  size_t length = std::strlen(out);
  while (length > 1 && out[length - 1] == '/') out[--length] = '\0';
  char* slash = std::strrchr(out, '/');
  if (slash == nullptr) {
    std::snprintf(out, size, ".");
  } else if (slash == out) {
    out[1] = '\0';
  } else {
    *slash = '\0';
  }
}

}  // namespace ring_directory_internal

// Opens `dir` when it is safe, creating it (0700) first when `create` is set and it does
// not exist. Never follows a symlink at `dir` itself (O_NOFOLLOW); callers then create
// and open files relative to `fd`, so a folder renamed after the check is never written.
inline RingDirCheck OpenPrivateRingDir(const char* dir, bool create) noexcept {
  RingDirCheck check;
  const uid_t me = geteuid();
  // The parent first: in a parent that others may write without the sticky bit (as it is
  // on /dev/shm and /tmp), another user could rename our folder away and put theirs in.
  char parent[512];
  ring_directory_internal::ParentOf(dir, parent, sizeof parent);
  struct stat parent_info{};
  if (stat(parent, &parent_info) != 0) {
    check.error = errno;
    return check;
  }
  const bool parent_shared_writable = (parent_info.st_mode & (S_IWGRP | S_IWOTH)) != 0 &&
                                      (parent_info.st_mode & S_ISVTX) == 0;
  if ((parent_info.st_uid != me && parent_info.st_uid != 0) || parent_shared_writable) {
    check.verdict = RingDirVerdict::kUnsafeParent;
    check.owner = parent_info.st_uid;
    check.mode = parent_info.st_mode & 07777;
    return check;
  }
  if (create && mkdir(dir, 0700) != 0 && errno != EEXIST) {
    check.error = errno;
    return check;
  }
  const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    check.error = errno;
    // ELOOP: a symlink; ENOTDIR: a file. Both stand where our folder should be.
    if (errno == ELOOP || errno == ENOTDIR) check.verdict = RingDirVerdict::kNotADirectory;
    return check;
  }
  struct stat info{};
  if (fstat(fd, &info) != 0) {
    check.error = errno;
    close(fd);
    return check;
  }
  check.owner = info.st_uid;
  check.mode = info.st_mode & 07777;
  if (info.st_uid != me) {
    check.verdict = RingDirVerdict::kForeignOwner;
  } else if ((info.st_mode & 077) != 0) {
    check.verdict = RingDirVerdict::kTooOpen;
  } else {
    check.verdict = RingDirVerdict::kPrivate;
    check.fd = fd;
    return check;
  }
  close(fd);
  return check;
}

// Why `check` refused its folder, in words a user can act on.
inline void DescribeRingDirCheck(const RingDirCheck& check, char* out, size_t size) noexcept {
  switch (check.verdict) {
    case RingDirVerdict::kPrivate:
      std::snprintf(out, size, "private");
      break;
    case RingDirVerdict::kUnusable:
      std::snprintf(out, size, "%s", std::strerror(check.error));
      break;
    case RingDirVerdict::kNotADirectory:
      std::snprintf(out, size, "a symlink or a file, not a directory: refusing to follow it");
      break;
    case RingDirVerdict::kForeignOwner:
      std::snprintf(out, size, "owned by uid %u, not by this user (uid %u): another user may read or plant rings there",
                    check.owner, static_cast<unsigned>(geteuid()));
      break;
    case RingDirVerdict::kTooOpen:
      std::snprintf(out, size, "mode %04o lets other users in; it must be 0700 (chmod 700 it, or pick another folder)",
                    check.mode);
      break;
    case RingDirVerdict::kUnsafeParent:
      std::snprintf(out, size,
                    "its parent folder (uid %u, mode %04o) may be written by other users and is not sticky: "
                    "they could swap the folder",
                    check.owner, check.mode);
      break;
  }
}

}  // namespace collwatch

#endif  // COLLWATCH_RING_RING_DIRECTORY_H_
