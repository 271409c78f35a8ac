// CPython call stacks (API: python_frames.h): per-version layouts of the interpreter's
// thread state, frames, code objects and strings, validated once through reads that cannot
// fault, then walked with plain loads. Threading: one thread validates (claimed by CAS),
// the others see its outcome through an acquire load; a capture reads only its own thread.
#include "interposer/python_frames.h"

#include <dlfcn.h>
#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <utility>

#include "cpython/code.h"
#include "cpython/layouts.h"
#include "ring/hash.h"
#include "ring/settings.h"

namespace collwatch {
namespace {

using namespace cpython;  // NOLINT: the layouts are this file's vocabulary

// ---- State -------------------------------------------------------------------------
//
// g_state moves Unknown -> Validating (CAS, by one thread) -> Ready | Disabled | Unknown
// (release store, same thread; Unknown again when no frame could be validated yet). Ready
// and Disabled never change. g_layout, g_walker and the interpreter's addresses are written before
// the release store that publishes Ready and read only after an acquire load seeing it.

enum State : int { kUnknown, kValidating, kReady, kDisabled };

// Attempts that find nothing to validate against before giving up (each costs a few
// system calls, on a call from a thread that runs no Python).
constexpr int kMaxAttempts = 16;
constexpr size_t kMaxThreadsScanned = 64;

using ThisThreadStateFunction = void* (*)();
using MainInterpreterFunction = void* (*)();
// Captures from a thread state (CapturePythonFrames' contract), with the code type given.
using Walker = size_t (*)(uintptr_t thread_state, uintptr_t code_type, RawPythonFrame* out, size_t max,
                          uint64_t* identity) noexcept;

std::atomic<int> g_state{kUnknown};
std::atomic<const char*> g_why{"not looked for yet"};
std::atomic<int> g_version{0};
int g_attempts = 0;  // touched only by the validating thread
Layout g_layout{};
Walker g_walker = nullptr;  // walks g_layout's frames
ThisThreadStateFunction g_this_thread_state = nullptr;
uintptr_t g_code_type = 0;
uintptr_t g_unicode_type = 0;
uintptr_t g_bytes_type = 0;
char g_unsupported_why[96];  // written once, before a Disabled outcome that names it


// ---- Reads that cannot fault (validation only) ---------------------------------------
//
// process_vm_readv on our own pid fails with EFAULT instead of faulting. Where a seccomp
// profile refuses it, a pipe does the same: write() of an unmapped source fails with EFAULT.

class SafeReader {
 public:
  SafeReader() noexcept {
    const uint64_t probe = 0x5a17e5a17e;
    uint64_t copy = 0;
    if (ReadWithProcessVm(reinterpret_cast<uintptr_t>(&probe), &copy, sizeof copy) && copy == probe) {
      use_process_vm_ = true;
    } else if (pipe(pipe_) != 0) {
      pipe_[0] = pipe_[1] = -1;
    }
  }
  ~SafeReader() {
    if (pipe_[0] >= 0) close(pipe_[0]);
    if (pipe_[1] >= 0) close(pipe_[1]);
  }
  SafeReader(const SafeReader&) = delete;
  SafeReader& operator=(const SafeReader&) = delete;

  bool Read(uintptr_t address, void* out, size_t size) noexcept {
    if (address < 4096) return false;
    if (use_process_vm_) return ReadWithProcessVm(address, out, size);
    if (pipe_[0] < 0 || size > 4096) return false;
    const ssize_t written = write(pipe_[1], reinterpret_cast<const void*>(address), size);
    if (written != static_cast<ssize_t>(size)) return false;
    return read(pipe_[0], out, size) == static_cast<ssize_t>(size);
  }
  template <typename T>
  bool Get(uintptr_t address, T* out) noexcept {
    return Read(address, out, sizeof *out);
  }

 private:
  static bool ReadWithProcessVm(uintptr_t address, void* out, size_t size) noexcept {
    iovec local{out, size};
    iovec remote{reinterpret_cast<void*>(address), size};
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(size);
  }

  bool use_process_vm_ = false;
  int pipe_[2] = {-1, -1};
};

// ---- Frames ------------------------------------------------------------------------
//
// The warm path is compiled once per layout (Walk<kIndex>), so that its offsets are
// constants: the walk is one dependent load per frame plus a few independent ones, and
// with the layout in memory the loop ran out of registers.

// The byte offset of the running instruction, from the frame's f_lasti (3.10) or
// instruction pointer (3.11+); negative before the first instruction runs. Checked
// against the code's size by DescribePythonFrame, once per path, not here on every call.
template <size_t kLayout>
int32_t InstructionOffset(uintptr_t frame, uintptr_t code) noexcept {
  constexpr const Layout& L = kLayouts[kLayout];
  if constexpr (L.code_bytecode == kNone) {
    const int32_t lasti = Load<int32_t>(frame + L.frame_instruction);
    return lasti >= 0 && lasti < (INT32_MAX / 2) ? lasti * 2 : -1;
  } else {
    // Wraps when garbage: DescribePythonFrame then finds it outside the code.
    return static_cast<int32_t>(Load<uintptr_t>(frame + L.frame_instruction) - (code + L.code_bytecode));
  }
}

// By the layout's index (clang 14 takes no array element as a reference argument).
template <size_t kLayout>
size_t Walk(uintptr_t thread_state, uintptr_t code_type, RawPythonFrame* out, size_t max,
            uint64_t* identity) noexcept {
  constexpr const Layout& L = kLayouts[kLayout];
  uintptr_t frame = Load<uintptr_t>(thread_state + L.tstate_frame);
  if constexpr (L.cframe_current_frame != kNone) {
    if (frame == 0) return 0;
    frame = Load<uintptr_t>(frame + L.cframe_current_frame);
  }
  // The identity: one multiply chain over the frames, innermost first, then one final mix
  // (mixing each frame fully, ring/hash.h's Mix64, cost 300 ns at 40 frames). A frame
  // enters as its code object's address (below 2^47 in user space) with its instruction
  // offset in the bits above: one value per (code, offset) for offsets below 128 KiB.
  constexpr uint64_t kFactor = 0x9e3779b97f4a7c15ull;
  uint64_t chain = 0x63616c6c70617468ull;  // "callpath"
  size_t kept = 0;
  for (size_t walked = 0; frame != 0 && kept < max && walked < kMaxPythonFramesWalked; ++walked) {
    const uintptr_t previous = Load<uintptr_t>(frame + L.frame_previous);
    if constexpr (L.frame_owner != kNone) {
      const uint8_t owner = Load<uint8_t>(frame + L.frame_owner);
      if (owner > L.owner_max) break;
      if (owner == L.owner_c_stack) {
        frame = previous;
        continue;
      }
    }
    const uintptr_t code = Load<uintptr_t>(frame + L.frame_code);
    if (code == 0 || Load<uintptr_t>(code + kObType) != code_type) break;
    const int32_t instruction = InstructionOffset<kLayout>(frame, code);
    out[kept] = RawPythonFrame{code, instruction};
    chain = (chain ^ code ^ (static_cast<uint64_t>(static_cast<uint32_t>(instruction)) << 47)) * kFactor;
    ++kept;
    frame = previous;
  }
  if (identity != nullptr) {
    const uint64_t hash = HashCombine(chain, kept);
    *identity = hash == 0 ? 1 : hash;
  }
  return kept;
}

template <size_t... kIndex>
constexpr std::array<Walker, sizeof...(kIndex)> WalkersOf(std::index_sequence<kIndex...>) {
  return {&Walk<kIndex>...};
}
// kWalkers[i] walks kLayouts[i]'s frames.
constexpr auto kWalkers = WalkersOf(std::make_index_sequence<std::size(kLayouts)>());

// ---- Validation ----------------------------------------------------------------------

enum class Verdict { kGood, kBad, kNothing };

// Checks one code object the way the warm path and DescribePythonFrame will read it.
const char* CheckCode(SafeReader& reader, const Layout& layout, uintptr_t code) noexcept {
  uintptr_t type = 0;
  if (!reader.Get(code + kObType, &type) || type != g_code_type) return "a frame's code object is not a code object";
  const uint32_t string_fields[] = {layout.code_filename, layout.code_name, layout.code_qualname};
  for (const uint32_t field : string_fields) {
    if (field == kNone) continue;
    uintptr_t string = 0;
    uint32_t state = 0;
    int64_t length = -1;
    uintptr_t data = 0;
    uint32_t kind = 0;
    if (!reader.Get(code + field, &string) || !reader.Get(string + kObType, &type) || type != g_unicode_type ||
        !reader.Get(string + kUnicodeState, &state) || !reader.Get(string + kUnicodeLength, &length) ||
        !CompactStringData(layout, string, state, length, &data, &kind)) {
      return "a code object's name is not a compact str";
    }
    char last = 0;
    if (length > 0 && !reader.Read(data + (length - 1) * kind, &last, 1)) return "a code object's name is unreadable";
  }
  uintptr_t table = 0;
  int64_t table_size = -1;
  int32_t first_line = 0;
  if (!reader.Get(code + layout.code_linetable, &table) || !reader.Get(table + kObType, &type) ||
      type != g_bytes_type || !reader.Get(table + kObSize, &table_size) || table_size < 0 ||
      table_size > kMaxLineTableBytes || !reader.Get(code + layout.code_firstlineno, &first_line) ||
      first_line < 0) {
    return "a code object's line table or first line is not where expected";
  }
  if (layout.code_bytecode != kNone) {
    int64_t code_units = -1;
    if (!reader.Get(code + kObSize, &code_units) || code_units <= 0 || code_units > kMaxLineTableBytes) {
      return "a code object's size is not where expected";
    }
  }
  return nullptr;
}

// Walks a chain of frames from `frame` through safe reads, checking owners, code objects
// and instruction positions. kNothing: no frame of a code object on it.
Verdict CheckFrames(SafeReader& reader, const Layout& layout, uintptr_t frame, const char** why) noexcept {
  size_t checked = 0;
  for (size_t walked = 0; frame != 0 && walked < kMaxPythonFramesWalked; ++walked) {
    bool shim = false;
    if (layout.frame_owner != kNone) {
      uint8_t owner = 0;
      if (!reader.Get(frame + layout.frame_owner, &owner) || owner > layout.owner_max) {
        *why = "a frame's owner is out of range";
        return Verdict::kBad;
      }
      shim = owner == layout.owner_c_stack;
    }
    if (!shim) {
      uintptr_t code = 0;
      if (!reader.Get(frame + layout.frame_code, &code)) {
        *why = "a frame is unreadable";
        return Verdict::kBad;
      }
      if (const char* problem = CheckCode(reader, layout, code)) {
        *why = problem;
        return Verdict::kBad;
      }
      if (layout.code_bytecode != kNone) {
        uintptr_t instruction = 0;
        int64_t code_units = 0;
        reader.Get(code + kObSize, &code_units);
        const uintptr_t start = code + layout.code_bytecode;
        // 3.11/3.12 point one unit before the start until the first instruction runs.
        if (!reader.Get(frame + layout.frame_instruction, &instruction) || instruction + 2 < start ||
            instruction >= start + static_cast<uint64_t>(code_units) * 2) {
          *why = "a frame's instruction pointer is outside its code";
          return Verdict::kBad;
        }
      } else {
        int32_t lasti = 0;
        if (!reader.Get(frame + layout.frame_instruction, &lasti) || lasti < -1) {
          *why = "a frame's last instruction is out of range";
          return Verdict::kBad;
        }
      }
      ++checked;
    }
    if (!reader.Get(frame + layout.frame_previous, &frame)) {
      *why = "a frame's link to its caller is unreadable";
      return Verdict::kBad;
    }
  }
  return checked > 0 ? Verdict::kGood : Verdict::kNothing;
}

uintptr_t SafeInnermostFrame(SafeReader& reader, const Layout& layout, uintptr_t thread_state) noexcept {
  uintptr_t first = 0;
  if (!reader.Get(thread_state + layout.tstate_frame, &first)) return 0;
  if (layout.cframe_current_frame == kNone || first == 0) return first;
  uintptr_t frame = 0;
  return reader.Get(first + layout.cframe_current_frame, &frame) ? frame : 0;
}

// 3.13 states its own offsets: they must be the ones this file knows.
const char* CheckDebugOffsets(SafeReader& reader, const Layout& layout) noexcept {
  const uintptr_t runtime = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "_PyRuntime"));
  DebugOffsets313 offsets;
  if (runtime == 0 || !reader.Read(runtime, &offsets, sizeof offsets)) return "CPython 3.13: _PyRuntime unreadable";
  if (std::memcmp(offsets.cookie, "xdebugpy", 8) != 0) return "CPython 3.13: _PyRuntime lacks its debug offsets";
  if (offsets.free_threaded != 0) return "free-threaded CPython 3.13: layout unknown, no call paths";
  const bool same = offsets.runtime_state[2] + 8 == layout.runtime_main_interpreter &&  // main follows head
                    offsets.interpreter_state[3] == layout.interp_threads_head &&
                    offsets.thread_state[6] == layout.tstate_native_thread_id &&
                    offsets.thread_state[2] == layout.tstate_next && offsets.thread_state[3] == layout.tstate_interp &&
                    offsets.thread_state[4] == layout.tstate_frame &&
                    offsets.interpreter_frame[1] == layout.frame_previous &&
                    offsets.interpreter_frame[2] == layout.frame_code &&
                    offsets.interpreter_frame[3] == layout.frame_instruction &&
                    offsets.interpreter_frame[5] == layout.frame_owner &&
                    offsets.code_object[1] == layout.code_filename && offsets.code_object[2] == layout.code_name &&
                    offsets.code_object[3] == layout.code_qualname &&
                    offsets.code_object[4] == layout.code_linetable &&
                    offsets.code_object[5] == layout.code_firstlineno &&
                    offsets.code_object[9] == layout.code_bytecode && offsets.pyobject[1] == kObType;
  return same ? nullptr : "CPython 3.13: the interpreter's debug offsets differ from the known layout";
}

// Validates the layout against the calling thread's frames, else those of the main
// interpreter's threads (which run meanwhile: a failure there is inconclusive).
State Validate(const Layout& layout, const char** why) noexcept {
  SafeReader reader;
  if (layout.version == 313) {
    if (const char* problem = CheckDebugOffsets(reader, layout)) {
      *why = problem;
      return kDisabled;
    }
  }
  const auto main_interpreter =
      reinterpret_cast<MainInterpreterFunction>(dlsym(RTLD_DEFAULT, "PyInterpreterState_Main"));
  const uintptr_t interpreter = main_interpreter != nullptr ? reinterpret_cast<uintptr_t>(main_interpreter()) : 0;
  if (interpreter == 0) {
    *why = "Python interpreter not initialised yet";
    return kUnknown;
  }
  const uintptr_t own = reinterpret_cast<uintptr_t>(g_this_thread_state());
  if (own != 0) {
    uintptr_t own_interpreter = 0;
    if (reader.Get(own + layout.tstate_interp, &own_interpreter) && own_interpreter == interpreter) {
      switch (CheckFrames(reader, layout, SafeInnermostFrame(reader, layout, own), why)) {
        case Verdict::kGood:
          return kReady;
        case Verdict::kBad:
          return kDisabled;
        case Verdict::kNothing:
          break;
      }
    }
  }
  uintptr_t thread_state = 0;
  reader.Get(interpreter + layout.interp_threads_head, &thread_state);
  bool inconclusive = false;
  for (size_t i = 0; thread_state != 0 && i < kMaxThreadsScanned; ++i) {
    uintptr_t its_interpreter = 0;
    if (!reader.Get(thread_state + layout.tstate_interp, &its_interpreter) || its_interpreter != interpreter) {
      *why = "a thread state's interpreter is not where expected";
      inconclusive = true;
      break;
    }
    const char* problem = nullptr;
    const Verdict verdict = CheckFrames(reader, layout, SafeInnermostFrame(reader, layout, thread_state), &problem);
    if (verdict == Verdict::kGood) return kReady;
    if (verdict == Verdict::kBad) {
      *why = problem;
      inconclusive = true;
    }
    if (!reader.Get(thread_state + layout.tstate_next, &thread_state)) break;
  }
  if (!inconclusive) *why = "no Python frame to validate the layout against yet";
  return kUnknown;
}

// Finds the interpreter and its version; nullptr (with a why) when there is none or it
// is not one of kLayouts.
const Layout* FindLayout(const char** why) noexcept {
  int major = 0;
  int minor = 0;
  if (const auto* hex = static_cast<const unsigned long*>(dlsym(RTLD_DEFAULT, "Py_Version"))) {
    major = static_cast<int>((*hex >> 24) & 0xff);
    minor = static_cast<int>((*hex >> 16) & 0xff);
  } else if (const auto get_version =
                 reinterpret_cast<const char* (*)()>(dlsym(RTLD_DEFAULT, "Py_GetVersion"))) {
    if (std::sscanf(get_version(), "%d.%d", &major, &minor) != 2) major = minor = 0;
  }
  if (major == 0) {
    *why = "no Python interpreter in this process";
    return nullptr;
  }
  g_version.store(major * 100 + minor, std::memory_order_relaxed);
  const bool pretend = std::strcmp(SettingValue(Setting::kPythonFrames), "pretend-unsupported") == 0;
  for (const Layout& layout : kLayouts) {
    if (layout.version == major * 100 + minor && !pretend) return &layout;
  }
  std::snprintf(g_unsupported_why, sizeof g_unsupported_why, "CPython %d.%d: layout unknown, no call paths%s", major,
                minor, pretend ? " (COLLWATCH_PYTHON_FRAMES=pretend-unsupported)" : "");
  *why = g_unsupported_why;
  return nullptr;
}

// One attempt at settling the outcome; runs on the thread that claimed kValidating.
State Attempt(const char** why) noexcept {
  if (std::strcmp(SettingValue(Setting::kPythonFrames), "off") == 0) {
    *why = "switched off (COLLWATCH_PYTHON_FRAMES=off)";
    return kDisabled;
  }
  const Layout* layout = FindLayout(why);
  if (layout == nullptr) return kDisabled;
  g_this_thread_state = reinterpret_cast<ThisThreadStateFunction>(dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState"));
  g_code_type = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "PyCode_Type"));
  g_unicode_type = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "PyUnicode_Type"));
  g_bytes_type = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "PyBytes_Type"));
  if (g_this_thread_state == nullptr || g_code_type == 0 || g_unicode_type == 0 || g_bytes_type == 0) {
    *why = "Python interpreter lacks the symbols this file reads";
    return kDisabled;
  }
  const auto initialized = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "Py_IsInitialized"));
  if (initialized == nullptr || initialized() == 0) {
    *why = "Python interpreter not initialised yet";
    return kUnknown;
  }
  g_layout = *layout;
  g_walker = kWalkers[static_cast<size_t>(layout - kLayouts)];
  const State outcome = Validate(*layout, why);
  if (outcome == kReady) *why = "ready";
  return outcome;
}

}  // namespace

bool PythonFramesSettled() noexcept {
  const int state = g_state.load(std::memory_order_acquire);
  return state == kReady || state == kDisabled;
}

bool PythonFramesReady(const char** why) noexcept {
  int state = g_state.load(std::memory_order_acquire);
  if (state == kUnknown && g_state.compare_exchange_strong(state, kValidating, std::memory_order_acquire)) {
    const char* reason = "not validated";
    State outcome = Attempt(&reason);
    if (outcome == kUnknown && ++g_attempts >= kMaxAttempts) outcome = kDisabled;
    g_why.store(reason, std::memory_order_relaxed);
    g_state.store(outcome, std::memory_order_release);
    state = outcome;
  }
  if (state == kValidating) {
    if (why != nullptr) *why = "being validated by another thread";
    return false;
  }
  if (why != nullptr) *why = g_why.load(std::memory_order_relaxed);
  return state == kReady;
}

size_t CapturePythonFrames(RawPythonFrame* out, size_t max, uint64_t* identity) noexcept {
  if (g_state.load(std::memory_order_acquire) != kReady) return 0;
  const uintptr_t thread_state = reinterpret_cast<uintptr_t>(g_this_thread_state());
  if (thread_state == 0) return 0;
  return g_walker(thread_state, g_code_type, out, max, identity);
}

bool DescribePythonFrame(const RawPythonFrame& frame, char* file, size_t file_size, char* function,
                         size_t function_size, int32_t* line) noexcept {
  if (line != nullptr) *line = 0;
  if (file_size > 0) file[0] = '\0';
  if (function_size > 0) function[0] = '\0';
  if (g_state.load(std::memory_order_acquire) != kReady || frame.code == 0) return false;
  const Layout& layout = g_layout;
  const uintptr_t code = frame.code;
  if (Load<uintptr_t>(code + kObType) != g_code_type) return false;
  const uint32_t name_field = layout.code_qualname != kNone ? layout.code_qualname : layout.code_name;
  const bool named = CopyString(layout, g_unicode_type, Load<uintptr_t>(code + layout.code_filename), file, file_size) &&
                     CopyString(layout, g_unicode_type, Load<uintptr_t>(code + name_field), function, function_size);
  if (!named) return false;
  if (line == nullptr) return true;
  const int32_t first_line = Load<int32_t>(code + layout.code_firstlineno);
  const int64_t code_bytes = layout.code_bytecode == kNone ? INT32_MAX : Load<int64_t>(code + kObSize) * 2;
  if (frame.instruction < 0 || frame.instruction >= code_bytes) {
    *line = first_line;
    return true;
  }
  const uintptr_t table = Load<uintptr_t>(code + layout.code_linetable);
  if (table == 0 || Load<uintptr_t>(table + kObType) != g_bytes_type) return true;
  const int64_t size = Load<int64_t>(table + kObSize);
  if (size < 0 || size > kMaxLineTableBytes) return true;
  const auto* bytes = reinterpret_cast<const uint8_t*>(table + kBytesData);
  *line = layout.line_table == LineTable::kPep626
              ? LineFromPep626Table(bytes, size, first_line, frame.instruction)
              : LineFromLocationTable(bytes, size, first_line, frame.instruction);
  return true;
}

int PythonVersion() noexcept { return g_version.load(std::memory_order_relaxed); }

}  // namespace collwatch
