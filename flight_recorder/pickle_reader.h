// Reads a Python pickle made only of plain values, as PyTorch writes its Flight Recorder
// dumps (torch::jit's pickler, protocol 2) and as Python's pickle module writes such data
// (protocols 0-5), without Python: a small stack machine over the opcodes that build
// none, bools, integers, floats, strings, bytes, lists, tuples and dicts. A reference to
// any other Python object (GLOBAL, REDUCE, BUILD, persistent ids) is refused, except
// torch.jit._pickle's list builders and type tags, whose result is the plain list or
// value they wrap. Bounded in memory by the input's size. Threading: none.
#ifndef COLLWATCH_FLIGHT_RECORDER_PICKLE_READER_H_
#define COLLWATCH_FLIGHT_RECORDER_PICKLE_READER_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "flight_recorder/plain_value.h"

namespace collwatch::flight_recorder {

// The value `bytes` pickles. INVALID_ARGUMENT, saying what and at which byte offset, for
// a truncated pickle, an opcode outside the plain subset or a foreign object.
absl::StatusOr<PlainTree> ReadPickle(std::string_view bytes);

}  // namespace collwatch::flight_recorder

#endif  // COLLWATCH_FLIGHT_RECORDER_PICKLE_READER_H_
