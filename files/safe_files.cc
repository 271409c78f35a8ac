// Safe reads and writes of collwatch's own files. Threading: see safe_files.h.
#include "files/safe_files.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace collwatch {
namespace {

// strerror's words with a small first letter: "permission denied".
std::string ErrnoWords(int error) {
  std::string words = std::strerror(error);
  if (!words.empty()) words[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(words[0])));
  return words;
}

absl::Status ErrnoStatus(const std::string& what, int error) {
  const std::string message = absl::StrCat(what, ": ", ErrnoWords(error));
  switch (error) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(message);
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

// 0, or the errno of the write that failed.
int WriteAll(int fd, std::string_view content) {
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t wrote = write(fd, content.data() + written, content.size() - written);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return wrote < 0 ? errno : ENOSPC;
    written += static_cast<size_t>(wrote);
  }
  return 0;
}

// A device or FIFO that stands at `path`, opened to be written as it is, never replaced
// by a file.
absl::StatusOr<int> OpenInPlace(const std::string& path, const struct stat& info) {
  const int fd = open(path.c_str(), O_WRONLY | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENXIO && S_ISFIFO(info.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(path, ": is a FIFO nobody reads; not written"));
    }
    return ErrnoStatus(absl::StrCat("cannot open ", path), errno);
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);  // a FIFO's reader may be slow: wait for it
  return fd;
}

}  // namespace

std::string FileKindWords(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

namespace {

// OpenRegularFile, with the file's stat in `info`.
absl::StatusOr<int> OpenRegular(const std::string& path, struct stat& info) {
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer.
  const int fd = open(path.c_str(), O_RDONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus(path, errno);
  if (fstat(fd, &info) != 0) {
    const int error = errno;
    close(fd);
    return ErrnoStatus(path, error);
  }
  if (!S_ISREG(info.st_mode)) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(path, ": is ", FileKindWords(info.st_mode),
                                                      ", not a regular file"));
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

}  // namespace

absl::StatusOr<int> OpenRegularFile(const std::string& path) {
  struct stat info {};
  return OpenRegular(path, info);
}

absl::StatusOr<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes) {
  struct stat info {};
  absl::StatusOr<int> fd = OpenRegular(path, info);
  if (!fd.ok()) return fd.status();
  if (static_cast<uint64_t>(info.st_size) > max_bytes) {
    close(*fd);
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": ", info.st_size, " bytes, more than the ", max_bytes, " it may have"));
  }
  std::string bytes;
  char buffer[1 << 16];
  while (true) {
    const ssize_t got = read(*fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int error = errno;
      close(*fd);
      return ErrnoStatus(absl::StrCat("cannot read ", path), error);
    }
    if (got == 0) break;
    bytes.append(buffer, static_cast<size_t>(got));
    if (bytes.size() > max_bytes) {  // it grew while being read
      close(*fd);
      return absl::FailedPreconditionError(absl::StrCat(path, ": more than the ", max_bytes, " bytes it may have"));
    }
  }
  close(*fd);
  return bytes;
}

absl::Status WriteFileReplacing(const std::string& path, std::string_view content) {
  absl::StatusOr<std::unique_ptr<ReplacingFile>> file = ReplacingFile::Open(path);
  if (!file.ok()) return file.status();
  (*file)->stream().write(content.data(), static_cast<std::streamsize>(content.size()));
  return (*file)->Commit();
}

absl::StatusOr<std::unique_ptr<ReplacingFile>> ReplacingFile::Open(const std::string& path) {
  struct stat info {};
  mode_t mode = 0644;
  if (lstat(path.c_str(), &info) == 0) {
    if (S_ISCHR(info.st_mode) || S_ISFIFO(info.st_mode)) {
      absl::StatusOr<int> fd = OpenInPlace(path, info);
      if (!fd.ok()) return fd.status();
      return std::unique_ptr<ReplacingFile>(new ReplacingFile(path, "", *fd));
    }
    if (S_ISLNK(info.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, ": is a symbolic link; collwatch writes no file through a link (give the path it points to)"));
    }
    if (!S_ISREG(info.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(path, ": is ", FileKindWords(info.st_mode),
                                                        "; not replaced"));
    }
    mode = info.st_mode & 0777;
  } else if (errno != ENOENT) {
    return ErrnoStatus(path, errno);
  }
  const std::filesystem::path target(path);
  const std::filesystem::path folder = target.has_parent_path() ? target.parent_path() : ".";
  // mkostemp creates with O_EXCL: a link planted under this name makes it try another.
  std::string temporary = (folder / absl::StrCat(".", target.filename().string(), ".XXXXXX")).string();
  const int fd = mkostemp(temporary.data(), O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(absl::StrCat("cannot write ", path), errno);
  fchmod(fd, mode);
  return std::unique_ptr<ReplacingFile>(new ReplacingFile(path, std::move(temporary), fd));
}

ReplacingFile::ReplacingFile(std::string path, std::string temporary, int fd)
    : path_(std::move(path)), temporary_(std::move(temporary)), fd_(fd), buffer_(this), stream_(&buffer_) {}

ReplacingFile::~ReplacingFile() {
  if (done_) return;
  close(fd_);
  if (!temporary_.empty()) unlink(temporary_.c_str());
}

absl::Status ReplacingFile::Commit() {
  if (done_) return absl::FailedPreconditionError(absl::StrCat(path_, ": written already"));
  done_ = true;
  int error = error_ != 0 ? error_ : buffer_.Drain();
  if (error == 0 && !temporary_.empty() && fdatasync(fd_) != 0) error = errno;
  if (close(fd_) != 0 && error == 0) error = errno;
  if (error != 0) {
    if (!temporary_.empty()) unlink(temporary_.c_str());
    return ErrnoStatus(absl::StrCat("cannot write ", path_), error);
  }
  if (!temporary_.empty() && rename(temporary_.c_str(), path_.c_str()) != 0) {
    const int rename_error = errno;
    unlink(temporary_.c_str());
    return ErrnoStatus(absl::StrCat("cannot write ", path_), rename_error);
  }
  return absl::OkStatus();
}

ReplacingFile::Buffer::Buffer(ReplacingFile* file) : file_(file) { setp(bytes_, bytes_ + sizeof bytes_); }

int ReplacingFile::Buffer::Drain() {
  const std::string_view pending(pbase(), static_cast<size_t>(pptr() - pbase()));
  setp(bytes_, bytes_ + sizeof bytes_);
  if (file_->error_ != 0 || pending.empty()) return file_->error_;
  file_->error_ = WriteAll(file_->fd_, pending);
  return file_->error_;
}

ReplacingFile::Buffer::int_type ReplacingFile::Buffer::overflow(int_type c) {
  if (Drain() != 0) return traits_type::eof();
  if (!traits_type::eq_int_type(c, traits_type::eof())) {
    *pptr() = traits_type::to_char_type(c);
    pbump(1);
  }
  return traits_type::not_eof(c);
}

int ReplacingFile::Buffer::sync() { return Drain() == 0 ? 0 : -1; }

absl::Status PrepareOutputFolder(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    std::filesystem::create_directories(path, error);
    if (error) return ErrnoStatus(absl::StrCat("cannot create ", path), error.value());
    // Whatever the umask let through: nobody else writes here.
    if (chmod(path.c_str(), 0755) != 0) return ErrnoStatus(absl::StrCat("cannot set the mode of ", path), errno);
  }
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) return ErrnoStatus(path, errno);
  if (!S_ISDIR(info.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": is ", FileKindWords(info.st_mode), ", not a folder"));
  }
  if (info.st_uid != geteuid()) {
    return absl::PermissionDeniedError(absl::StrCat(
        path, ": belongs to uid ", info.st_uid, ", not to this user (uid ", geteuid(),
        "): collwatch writes only into its own folders (give another folder, or one you made)"));
  }
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "%s: group or others may write in it (mode %04o): collwatch writes only where nobody else can plant "
        "files (chmod go-w %s, or give another folder)",
        path, info.st_mode & 07777, path));
  }
  return absl::OkStatus();
}

namespace {

// The pid holding an flock on the file (device, inode), from /proc/locks; "" if none is
// listed (or the list cannot be read).
std::string FlockHolder(dev_t device, ino_t inode) {
  absl::StatusOr<std::string> locks = ReadRegularFile("/proc/locks", 16 << 20);
  if (!locks.ok()) return "";
  // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF": the device in hex major:minor.
  const std::string file = absl::StrFormat("%02x:%02x:%u", major(device), minor(device), inode);
  std::istringstream lines(*locks);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string number, kind, advisory, mode, pid, where;
    fields >> number >> kind >> advisory >> mode >> pid >> where;
    if (kind == "FLOCK" && where == file) return pid;
  }
  return "";
}

}  // namespace

absl::StatusOr<FolderLock> FolderLock::Take(const std::string& folder, const std::string& holder_words) {
  // The folder itself is locked: no lock file among the user's traces.
  const int fd = open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(absl::StrCat("cannot lock ", folder), errno);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    struct stat info {};
    fstat(fd, &info);
    close(fd);
    if (error != EWOULDBLOCK) return ErrnoStatus(absl::StrCat("cannot lock ", folder), error);
    const std::string pid = FlockHolder(info.st_dev, info.st_ino);
    return absl::FailedPreconditionError(absl::StrCat(folder, ": ", holder_words,
                                                      pid.empty() ? "" : absl::StrCat(" (pid ", pid, ")"),
                                                      " writes there already"));
  }
  return FolderLock(fd);
}

FolderLock& FolderLock::operator=(FolderLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

bool FolderLock::StillAt(const std::string& path) const {
  struct stat held {}, named {};
  if (fd_ < 0 || fstat(fd_, &held) != 0 || held.st_nlink == 0) return false;
  return stat(path.c_str(), &named) == 0 && named.st_dev == held.st_dev && named.st_ino == held.st_ino;
}

FolderLock::~FolderLock() {
  if (fd_ >= 0) close(fd_);  // closing releases the flock
}

}  // namespace collwatch
