// Files collwatch reads and writes on its own side, safe from what a careless or hostile
// user may leave in their place: an input is opened without blocking and must be a regular
// file, read within a bound (a FIFO or /dev/zero is an error, not a hang or an endless
// read); an output is written whole through a temporary created exclusively beside it, so
// a link planted under the temporary's name redirects nothing, and a target that is not a
// regular file is written as such or refused, never replaced.
// Threading: pure functions of the file system; any thread.
#ifndef COLLWATCH_FILES_SAFE_FILES_H_
#define COLLWATCH_FILES_SAFE_FILES_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <ostream>
#include <streambuf>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace collwatch {

// What a file mode is, in words: "a FIFO", "a folder", "a character device", ...
std::string FileKindWords(mode_t mode);

// `path` opened for reading (O_CLOEXEC), without waiting on a FIFO and only when it is a
// regular file. The caller closes the descriptor. Errors name the path and say what
// happened: "permission denied", "no such file", "is a FIFO, not a regular file".
absl::StatusOr<int> OpenRegularFile(const std::string& path);

// The bytes of the regular file `path`, at most `max_bytes` (a longer file is an error
// saying how long it is and what the bound is).
absl::StatusOr<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes);

// Writes `content` as `path`. A regular file (or nothing) there is replaced whole through
// a temporary with a unique name created beside it (O_EXCL: no link is followed), renamed
// over it once written; a write error (disk full, EFBIG) leaves the old file and no
// temporary. A character device (/dev/null, /dev/full, a terminal) or a FIFO with a
// reader is written in place; a folder, a FIFO nobody reads or any other kind is refused.
absl::Status WriteFileReplacing(const std::string& path, std::string_view content);

// WriteFileReplacing for an output written as it is made, never held whole (a trace of
// any size): the same checks at Open, the same temporary (or the device or FIFO written in
// place), renamed over `path` by Commit. Dropped without a Commit, or after a failed write,
// the temporary is removed and the old file stays.
class ReplacingFile {
 public:
  static absl::StatusOr<std::unique_ptr<ReplacingFile>> Open(const std::string& path);
  ~ReplacingFile();
  ReplacingFile(const ReplacingFile&) = delete;
  ReplacingFile& operator=(const ReplacingFile&) = delete;

  // Buffered; a write that fails sets the stream's badbit, and Commit says why.
  std::ostream& stream() { return stream_; }
  // Writes what is buffered, syncs, and puts the file in place. Once only.
  absl::Status Commit();

 private:
  // The stream's buffer: 64 KiB, written to the descriptor when full.
  class Buffer final : public std::streambuf {
   public:
    explicit Buffer(ReplacingFile* file);
    int Drain();  // 0, or the errno of the write that failed

   protected:
    int_type overflow(int_type c) override;
    int sync() override;

   private:
    ReplacingFile* file_;
    char bytes_[1 << 16];
  };

  ReplacingFile(std::string path, std::string temporary, int fd);

  std::string path_;
  std::string temporary_;  // "" when written in place (a device, a FIFO)
  int fd_ = -1;
  int error_ = 0;          // the first write's errno
  bool done_ = false;
  Buffer buffer_;
  std::ostream stream_;
};

// A folder collwatch writes its outputs into (`run --out`, the collector's store). Made
// (parents too) when missing, with no write permission for group or others; one that is
// there must be a folder of this user that group and others cannot write: in a folder
// another user can write, they could plant links where collwatch's files go.
absl::Status PrepareOutputFolder(const std::string& path);

// An exclusive lock on `folder` (an flock of the folder itself), held while the object
// lives: one writer per store. A second taker gets an error naming the holder
// (`holder_words`, "another collector") and its pid as /proc/locks lists it.
class FolderLock {
 public:
  static absl::StatusOr<FolderLock> Take(const std::string& folder, const std::string& holder_words);
  FolderLock(FolderLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FolderLock& operator=(FolderLock&& other) noexcept;
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;
  ~FolderLock();

  // Whether the locked folder still stands at `path` (not removed, not moved away):
  // files written into it since are lost otherwise, though every write succeeded.
  bool StillAt(const std::string& path) const;

 private:
  explicit FolderLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace collwatch

#endif  // COLLWATCH_FILES_SAFE_FILES_H_
