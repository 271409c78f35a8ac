// The framed files of the trace store (trace_store_format.h), as the writer
// (rank_trace_writer.cc) and the reader (rank_trace_reader.cc) share them: file headers,
// frames, whole writes, decoding, and the index entries that describe events frames.
// Not for other files. Threading: pure functions and single-call file I/O; no state.
#ifndef COLLWATCH_STORE_TRACE_FRAMES_H_
#define COLLWATCH_STORE_TRACE_FRAMES_H_

#include <cstdint>
#include <string>
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

// Index entries of `index_path` that describe `log_frames` in order: the longest
// matching prefix. `*index_valid_end` is where that prefix ends in the index file.
std::vector<v1::StoreIndexEntry> MatchingIndexPrefix(const std::string& index_path,
                                                     const std::vector<FrameInfo>& log_frames,
                                                     uint64_t* index_valid_end);

}  // namespace collwatch::store

#endif  // COLLWATCH_STORE_TRACE_FRAMES_H_
