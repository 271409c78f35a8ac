// The framed files of the trace store (trace_store_format.h), as the writer
// (rank_trace_writer.cc) and the reader (rank_trace_reader.cc) share them: file headers,
// frames, whole writes, decoding, the index entries that describe events frames, and a
// file read in place a window at a time (the reader: traces of any size in bounded memory).
// Not for other files. Threading: pure functions and single-call file I/O; a
// FramedFileReader belongs to one thread.
#ifndef COLLWATCH_STORE_TRACE_FRAMES_H_
#define COLLWATCH_STORE_TRACE_FRAMES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/message_lite.h"
#include "proto/collwatch.pb.h"
#include "store/trace_store.h"
#include "store/trace_store_format.h"

namespace collwatch::store {

// INTERNAL with `what` and the text of errno.
absl::Status Errno(const std::string& what);

// A file's header: `magic`, then the format version.
std::string FileHeader(uint64_t magic);

// Appends one frame holding `message` to `out`.
void AppendFrame(const google::protobuf::MessageLite& message, std::string* out);

// Writes all of `bytes` at `offset` of `fd` (`path` names it in the error).
absl::Status WriteAll(int fd, const std::string& bytes, uint64_t offset, const std::string& path);

// The index entry that describes an events frame.
v1::StoreIndexEntry EntryFor(const FrameInfo& frame, const v1::StoredEvents& events);

// The message in `frame` of `bytes` (read from `path`); DATA_LOSS when a frame that
// passes its checksum does not decode.
template <typename Message>
absl::StatusOr<Message> DecodeFrame(const std::string& bytes, const FrameInfo& frame,
                                    const std::string& path) {
  Message message;
  if (!message.ParseFromArray(bytes.data() + frame.offset + store::kFrameHeaderBytes,
                              static_cast<int>(frame.length - store::kFrameHeaderBytes))) {
    return absl::DataLossError(absl::StrCat(path, ": frame at offset ", frame.offset,
                                            " passes its checksum but does not decode"));
  }
  return message;
}

// A regular file read in place with pread, through one window of at least kWindowBytes
// (larger only to hold a frame that is larger): what scans and frame reads hold of a file,
// whatever its size.
class FramedFileReader {
 public:
  static constexpr uint64_t kWindowBytes = 1 << 20;
  // Opened as OpenRegularFile opens (files/safe_files.h); its size as it is now.
  static absl::StatusOr<std::unique_ptr<FramedFileReader>> Open(const std::string& path);
  ~FramedFileReader();
  FramedFileReader(const FramedFileReader&) = delete;
  FramedFileReader& operator=(const FramedFileReader&) = delete;

  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // The bytes [offset, offset + length), which must lie within size(); valid until the
  // next call. Empty, with error() set, when the read fails or finds the file shorter.
  std::string_view Bytes(uint64_t offset, uint64_t length);
  const absl::Status& error() const { return error_; }

 private:
  FramedFileReader(std::string path, int fd, uint64_t size) : path_(std::move(path)), fd_(fd), size_(size) {}

  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string window_;
  uint64_t window_offset_ = 0;
  absl::Status error_;
};

// The message in `frame` of `file`, read in place into `message` (which may live on an
// arena, for a reader of many frames).
template <typename Message>
absl::Status DecodeFrameInto(FramedFileReader& file, const FrameInfo& frame, Message* message) {
  const std::string_view bytes = file.Bytes(frame.offset, frame.length);
  if (!file.error().ok()) return file.error();
  if (!message->ParseFromArray(bytes.data() + store::kFrameHeaderBytes,
                               static_cast<int>(frame.length - store::kFrameHeaderBytes))) {
    return absl::DataLossError(absl::StrCat(file.path(), ": frame at offset ", frame.offset,
                                            " passes its checksum but does not decode"));
  }
  return absl::OkStatus();
}

// The message in `frame` of `file`, read in place.
template <typename Message>
absl::StatusOr<Message> DecodeFrame(FramedFileReader& file, const FrameInfo& frame) {
  Message message;
  if (absl::Status decoded = DecodeFrameInto(file, frame, &message); !decoded.ok()) return decoded;
  return message;
}

// ScanFramedFile (trace_store.h) of a file read in place: the frames are listed, the bytes
// are not kept.
absl::StatusOr<LogScan> ScanFramedFile(FramedFileReader& file, uint64_t magic);

// Index entries of `index_path` that describe `log_frames` in order: the longest
// matching prefix. `*index_valid_end` is where that prefix ends in the index file.
std::vector<v1::StoreIndexEntry> MatchingIndexPrefix(const std::string& index_path,
                                                     const std::vector<FrameInfo>& log_frames,
                                                     uint64_t* index_valid_end);

}  // namespace collwatch::store

#endif  // COLLWATCH_STORE_TRACE_FRAMES_H_
