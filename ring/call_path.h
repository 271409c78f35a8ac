// A Python call path as collwatch reads it back: the frames of the thread that made an
// NCCL call, innermost first (the ring stores them as CallPathSlot, ring_format.h).
// Threading: plain values.
#ifndef COLLWATCH_RING_CALL_PATH_H_
#define COLLWATCH_RING_CALL_PATH_H_

#include <cstdint>
#include <string>
#include <vector>

namespace collwatch {

struct CallFrame {
  std::string file;      // co_filename as the interpreter has it
  std::string function;  // qualified name, e.g. "LlavaModel.forward"
  int32_t line = 0;      // the line being run (0: unknown)
  bool operator==(const CallFrame&) const = default;
};

struct CallPath {
  std::vector<CallFrame> frames;  // innermost first
  bool truncated = false;         // outer frames were left out (ring::kMaxCallPathFrames)
  bool operator==(const CallPath&) const = default;
};

}  // namespace collwatch

#endif  // COLLWATCH_RING_CALL_PATH_H_
