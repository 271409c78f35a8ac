// CPython's layouts, per version: where the interpreter keeps thread states, frames, code
// objects and strings (interposer/python_frames.cc walks its own process's; stacks/ reads
// another process's; code.h reads code objects). Threading: constants.
#ifndef COLLWATCH_CPYTHON_LAYOUTS_H_
#define COLLWATCH_CPYTHON_LAYOUTS_H_

#include <cstdint>
#include <cstring>

namespace collwatch::cpython {

// ---- Layouts -----------------------------------------------------------------------
//
// Offsets read with offsetof() from each version's own headers (Include/cpython/*.h and
// Include/internal/pycore_*.h compiled with Py_BUILD_CORE: 3.10.13, 3.11.2 and 3.11.7,
// 3.12.1, 3.13.0, x86-64). Every field is a pointer, an int or a byte after pointers, so
// the LP64 ABIs (x86-64, aarch64) place them alike. Release builds with the GIL only: a
// debug (Py_TRACE_REFS) or free-threaded build moves ob_type, which validation catches.
//
// The path from the thread state to the innermost frame:
//   3.10       PyThreadState.frame -> PyFrameObject (f_back, f_code, f_lasti in code units)
//   3.11, 3.12 PyThreadState.cframe -> _PyCFrame.current_frame -> _PyInterpreterFrame
//              (f_code, previous, prev_instr: the instruction running, owner)
//   3.13       PyThreadState.current_frame -> _PyInterpreterFrame (f_executable,
//              previous, instr_ptr: the instruction running, owner)
// 3.12 and 3.13 put a shim frame owned by the C stack (owner 3) at each entry into the
// interpreter loop; 3.13's has no code object (f_executable is None).

inline constexpr uint32_t kNone = UINT32_MAX;

// PyObject / PyVarObject / PyBytesObject / PyASCIIObject, the same in every supported version.
inline constexpr uint32_t kObType = 8;
inline constexpr uint32_t kObSize = 16;
inline constexpr uint32_t kBytesData = 32;
inline constexpr uint32_t kUnicodeLength = 16;
inline constexpr uint32_t kUnicodeState = 32;
// PyASCIIObject.state's bit-fields (interned:2, kind:3, compact:1, ascii:1, ...), from
// the least significant bit as GCC and Clang lay them out on little-endian LP64.
inline constexpr uint32_t kStateKindShift = 2;
inline constexpr uint32_t kStateCompactBit = 1u << 5;
inline constexpr uint32_t kStateAsciiBit = 1u << 6;

enum class LineTable : unsigned char {
  kPep626,     // 3.10: (bytecode bytes, line delta) byte pairs
  kLocations,  // 3.11+: location entries (Objects/locations.md)
};

struct Layout {
  int version;  // major * 100 + minor
  // Thread state.
  uint32_t tstate_interp;
  uint32_t tstate_next;
  uint32_t tstate_frame;          // frame (3.10), cframe (3.11, 3.12), current_frame (3.13)
  uint32_t cframe_current_frame;  // kNone: tstate_frame leads to the frame itself
  uint32_t interp_threads_head;
  uint32_t runtime_main_interpreter;  // _PyRuntime.interpreters.main
  uint32_t tstate_native_thread_id;   // the thread's kernel id; kNone on 3.10 (none kept)
  // Frames.
  uint32_t frame_previous;
  uint32_t frame_code;
  uint32_t frame_instruction;     // f_lasti (int32, code units) on 3.10, else a pointer
  uint32_t frame_owner;           // kNone on 3.10 (frame objects have no owner)
  unsigned char owner_max;
  unsigned char owner_c_stack;    // the shim frames' owner; 0xff: none (3.10, 3.11)
  // Code objects.
  uint32_t code_filename;
  uint32_t code_name;
  uint32_t code_qualname;         // kNone on 3.10 (co_name instead)
  uint32_t code_firstlineno;
  uint32_t code_linetable;
  uint32_t code_bytecode;         // co_code_adaptive (3.11+); kNone on 3.10
  LineTable line_table;
  // Strings: where a compact string's characters start.
  uint32_t ascii_data;            // sizeof(PyASCIIObject)
  uint32_t compact_data;          // sizeof(PyCompactUnicodeObject)
};

inline constexpr unsigned char kNoOwner = 0xff;

inline constexpr Layout kLayouts[] = {
    {310, 16, 8, 24, kNone, 8, 40, kNone, 24, 32, 96, kNone, 0, kNoOwner, 104, 112, kNone, 40, 120, kNone,
     LineTable::kPep626, 48, 72},
    {311, 16, 8, 56, 8, 16, 48, 160, 48, 32, 56, 69, 2, kNoOwner, 112, 120, 128, 72, 136, 184,
     LineTable::kLocations, 48, 72},
    {312, 16, 8, 56, 0, 72, 48, 144, 8, 0, 56, 70, 3, 3, 112, 120, 128, 68, 136, 192, LineTable::kLocations, 40,
     56},
    {313, 16, 8, 72, kNone, 7344, 640, 160, 8, 0, 56, 70, 3, 3, 112, 120, 128, 68, 136, 200,
     LineTable::kLocations, 40, 56},
};

// The first fields of 3.13's _Py_DebugOffsets (Include/internal/pycore_runtime.h), which
// _PyRuntime starts with: the interpreter's own statement of the offsets above.
struct DebugOffsets313 {
  char cookie[8];  // "xdebugpy"
  uint64_t version;
  uint64_t free_threaded;
  uint64_t runtime_state[3];        // [2]: interpreters.head
  uint64_t interpreter_state[13];  // [3]: threads_head
  uint64_t thread_state[9];        // [2]: next, [3]: interp, [4]: current_frame, [6]: native_thread_id
  uint64_t interpreter_frame[6];   // [1]: previous, [2]: executable, [3]: instr_ptr, [5]: owner
  uint64_t code_object[10];        // [1]: filename, [2]: name, [3]: qualname, [4]: linetable,
                                   // [5]: firstlineno, [9]: co_code_adaptive
  uint64_t pyobject[2];            // [1]: ob_type
};
static_assert(sizeof(DebugOffsets313) == 368, "mirrors _Py_DebugOffsets up to pyobject");

// Beyond these a code object's strings or line table are taken as garbage.
inline constexpr int64_t kMaxStringLength = 1 << 20;
inline constexpr int64_t kMaxLineTableBytes = 1 << 24;

// A plain load from the interpreter's memory (after validation, or of the calling
// thread's own frames).
template <typename T>
T Load(uintptr_t address) noexcept {
  T value;
  std::memcpy(&value, reinterpret_cast<const void*>(address), sizeof value);
  return value;
}

}  // namespace collwatch::cpython

#endif  // COLLWATCH_CPYTHON_LAYOUTS_H_
