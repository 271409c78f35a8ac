// The calling thread's CPython call stack, read from inside an NCCL call without linking
// or importing Python and without the GIL (CPython 3.10-3.13, layouts known per version).
// Threading: any thread; each reads only its own frames. noexcept, no allocation, no lock;
// the capture makes no system call (only PythonFramesReady's first run does).
#ifndef COLLWATCH_INTERPOSER_PYTHON_FRAMES_H_
#define COLLWATCH_INTERPOSER_PYTHON_FRAMES_H_

#include <cstddef>
#include <cstdint>

namespace collwatch {

// No default member values: a capture's array is filled, not cleared first, on every call.
struct RawPythonFrame {
  uintptr_t code;       // the code object (PyCodeObject*)
  int32_t instruction;  // byte offset of the current instruction in the code's bytecode (negative: not
                        // started or unknown; DescribePythonFrame checks it against the code's size)
};

// Deepest stack CapturePythonFrames walks (frames kept plus shim frames skipped): a longer
// one is cut, keeping its innermost frames.
inline constexpr size_t kMaxPythonFramesWalked = 256;

// Finds this process's interpreter at run time (dlsym(RTLD_DEFAULT, ...)), checks that
// its version is one whose layout this file knows (3.10, 3.11, 3.12, 3.13) and validates
// that layout once against live frames, through reads that cannot fault. Idempotent and
// thread-safe; after the outcome is settled it costs one atomic load. Returns false when
// there is no interpreter, it is unsupported, switched off (COLLWATCH_PYTHON_FRAMES=off),
// or not validated yet (no thread of it has run Python so far; a later call tries again,
// a bounded number of times); `*why` (may be null) then gets a static string saying which.
bool PythonFramesReady(const char** why) noexcept;

// The calling thread's Python frames, innermost first, at most `max`; 0 when the thread
// runs no Python (no thread state, no frame) or PythonFramesReady() is not true yet.
// Skips the interpreter's shim (C-stack-owned) frames and stops at anything that does not
// look like a frame of a code object. `*identity` (may be null) gets a hash of the frames
// kept (code objects, instruction offsets, depths; never 0), computed during the walk,
// where it costs nothing: the walk waits on its chain of loads. Only loads: no system
// call, no allocation.
size_t CapturePythonFrames(RawPythonFrame* out, size_t max, uint64_t* identity = nullptr) noexcept;

// Slow path (first time a frame is seen): file name (co_filename), qualified function name
// (co_qualname; co_name on 3.10) and line of `frame` (decoded from the code's line table at
// `instruction`; 0 when unknown), NUL-terminated and cut to the buffers (UTF-8; characters
// that cannot be encoded become '?'). The calling thread must still be inside the call
// whose frames these are, so that the code objects are alive. Never allocates. False if
// the frame cannot be read.
bool DescribePythonFrame(const RawPythonFrame& frame, char* file, size_t file_size, char* function,
                         size_t function_size, int32_t* line) noexcept;

// True once PythonFramesReady's answer is final (ready, or disabled with its why); false
// while it may still change (nothing validated yet, or being validated).
bool PythonFramesSettled() noexcept;

// The interpreter's major*100+minor (e.g. 311), 0 when none or not looked for yet
// (diagnostics).
int PythonVersion() noexcept;

}  // namespace collwatch

#endif  // COLLWATCH_INTERPOSER_PYTHON_FRAMES_H_
