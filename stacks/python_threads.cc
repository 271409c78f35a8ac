// Another process's CPython threads (API: python_threads.h): every read goes through
// process_vm_readv, so memory that changes or goes away while it is read yields a failed
// read or a value that fails its check, never a fault. A thread running Python meanwhile
// can give a path mixed from two moments; stuck threads, the ones asked about, do not move.
#include "stacks/python_threads.h"

#include <sys/uio.h>

#include <cstring>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cpython/code.h"
#include "cpython/layouts.h"

namespace collwatch::stacks {
namespace {

using namespace cpython;  // NOLINT: the layouts are this file's vocabulary

constexpr size_t kMaxFrames = 256;
constexpr int64_t kMaxNameBytes = 4096;       // characters copied of a file or function name
constexpr int64_t kMaxTableBytes = 1 << 20;   // a line table longer than this gives line 0

class RemoteMemory {
 public:
  explicit RemoteMemory(int32_t pid) : pid_(pid) {}
  bool Read(uint64_t address, void* out, size_t size) const {
    if (address < 4096 || size == 0) return false;
    iovec local{out, size};
    iovec remote{reinterpret_cast<void*>(address), size};
    return process_vm_readv(pid_, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(size);
  }
  template <typename T>
  bool Get(uint64_t address, T* out) const {
    return Read(address, out, sizeof *out);
  }

 private:
  int32_t pid_;
};

// A code object's names and line table, read once per code object.
struct CodeInfo {
  bool ok = false;
  std::string file;
  std::string function;
  int32_t first_line = 0;
  int64_t code_bytes = INT32_MAX;  // 3.11+: the bytecode's size (an offset past it is garbage)
  std::vector<uint8_t> table;
};

class Reader {
 public:
  Reader(int32_t pid, const Layout& layout, const PythonSymbols& symbols)
      : memory_(pid), layout_(layout), symbols_(symbols) {}

  std::string String(uint64_t string) const {
    uint64_t type = 0;
    uint32_t state = 0;
    int64_t length = -1;
    if (!memory_.Get(string + kObType, &type) || type != symbols_.unicode_type ||
        !memory_.Get(string + kUnicodeState, &state) || !memory_.Get(string + kUnicodeLength, &length)) {
      return "?";
    }
    uintptr_t data = 0;
    uint32_t kind = 0;
    if (!CompactStringData(layout_, static_cast<uintptr_t>(string), state, length, &data, &kind)) return "?";
    const int64_t copied = std::min(length, kMaxNameBytes);
    std::vector<uint8_t> characters(static_cast<size_t>(copied) * kind + 1);
    if (copied > 0 && !memory_.Read(data, characters.data(), static_cast<size_t>(copied) * kind)) return "?";
    std::vector<char> text(static_cast<size_t>(copied) * 4 + 1);
    EncodeUtf8(characters.data(), kind, copied, text.data(), text.size());
    return text.data();
  }

  const CodeInfo& Code(uint64_t code) {
    auto [it, inserted] = codes_.try_emplace(code);
    if (!inserted) return it->second;
    CodeInfo& info = it->second;
    uint64_t type = 0;
    if (!memory_.Get(code + kObType, &type) || type != symbols_.code_type) return info;
    const uint32_t name_field = layout_.code_qualname != kNone ? layout_.code_qualname : layout_.code_name;
    uint64_t file = 0;
    uint64_t name = 0;
    uint64_t table = 0;
    if (!memory_.Get(code + layout_.code_filename, &file) || !memory_.Get(code + name_field, &name) ||
        !memory_.Get(code + layout_.code_firstlineno, &info.first_line) ||
        !memory_.Get(code + layout_.code_linetable, &table)) {
      return info;
    }
    if (layout_.code_bytecode != kNone) {
      int64_t units = 0;
      if (memory_.Get(code + kObSize, &units)) info.code_bytes = units * 2;
    }
    info.file = String(file);
    info.function = String(name);
    int64_t table_size = -1;
    if (memory_.Get(table + kObType, &type) && type == symbols_.bytes_type && memory_.Get(table + kObSize, &table_size) &&
        table_size > 0 && table_size <= kMaxTableBytes) {
      info.table.resize(static_cast<size_t>(table_size));
      if (!memory_.Read(table + kBytesData, info.table.data(), info.table.size())) info.table.clear();
    }
    info.ok = true;
    return info;
  }

  int32_t LineOf(const CodeInfo& code, int32_t offset) const {
    if (offset < 0 || offset >= code.code_bytes || code.table.empty()) return code.first_line;
    const auto size = static_cast<int64_t>(code.table.size());
    return layout_.line_table == LineTable::kPep626 ? LineFromPep626Table(code.table.data(), size, code.first_line, offset)
                                                    : LineFromLocationTable(code.table.data(), size, code.first_line, offset);
  }

  // The frames from thread state `thread_state`, innermost first.
  CallPath Frames(uint64_t thread_state) {
    CallPath path;
    uint64_t frame = 0;
    if (!memory_.Get(thread_state + layout_.tstate_frame, &frame)) return path;
    if (layout_.cframe_current_frame != kNone && frame != 0 &&
        !memory_.Get(frame + layout_.cframe_current_frame, &frame)) {
      return path;
    }
    for (size_t walked = 0; frame != 0 && walked < kMaxFrames; ++walked) {
      uint64_t previous = 0;
      if (!memory_.Get(frame + layout_.frame_previous, &previous)) break;
      if (layout_.frame_owner != kNone) {
        uint8_t owner = 0;
        if (!memory_.Get(frame + layout_.frame_owner, &owner) || owner > layout_.owner_max) break;
        if (owner == layout_.owner_c_stack) {
          frame = previous;
          continue;
        }
      }
      uint64_t code = 0;
      if (!memory_.Get(frame + layout_.frame_code, &code)) break;
      const CodeInfo& info = Code(code);
      if (!info.ok) break;
      int32_t offset = -1;
      if (layout_.code_bytecode == kNone) {
        int32_t lasti = -1;
        if (memory_.Get(frame + layout_.frame_instruction, &lasti) && lasti >= 0 && lasti < INT32_MAX / 2) {
          offset = lasti * 2;
        }
      } else {
        uint64_t instruction = 0;
        if (memory_.Get(frame + layout_.frame_instruction, &instruction)) {
          offset = static_cast<int32_t>(instruction - (code + layout_.code_bytecode));
        }
      }
      path.frames.push_back(CallFrame{info.file, info.function, LineOf(info, offset)});
      frame = previous;
    }
    path.truncated = frame != 0;
    return path;
  }

  const RemoteMemory& memory() const { return memory_; }

 private:
  RemoteMemory memory_;
  const Layout& layout_;
  const PythonSymbols& symbols_;
  std::map<uint64_t, CodeInfo> codes_;
};

// The interpreter's version: Py_Version where it has one (3.11+), else the module's name.
int VersionOf(const RemoteMemory& memory, const PythonSymbols& symbols) {
  unsigned long hex = 0;
  if (symbols.version != 0 && memory.Get(symbols.version, &hex)) {
    return static_cast<int>(((hex >> 24) & 0xff) * 100 + ((hex >> 16) & 0xff));
  }
  return symbols.version_from_name;
}

}  // namespace

PythonThreads ReadPythonThreads(int32_t pid, const PythonSymbols& symbols, size_t max_threads) {
  PythonThreads result;
  if (symbols.runtime == 0) {
    result.problem = "no Python interpreter found";
    return result;
  }
  if (symbols.code_type == 0 || symbols.unicode_type == 0 || symbols.bytes_type == 0) {
    result.problem = "the Python interpreter's type symbols were not found";
    return result;
  }
  const RemoteMemory memory(pid);
  const int version = VersionOf(memory, symbols);
  const Layout* layout = nullptr;
  for (const Layout& known : kLayouts) {
    if (known.version == version) layout = &known;
  }
  if (layout == nullptr) {
    result.problem = version == 0 ? "the Python interpreter's version is unknown"
                                  : absl::StrCat("CPython ", version / 100, ".", version % 100, ": layout unknown");
    return result;
  }
  if (layout->version == 313) {
    DebugOffsets313 offsets;
    if (!memory.Read(symbols.runtime, &offsets, sizeof offsets) || std::memcmp(offsets.cookie, "xdebugpy", 8) != 0 ||
        offsets.free_threaded != 0 || offsets.runtime_state[2] + 8 != layout->runtime_main_interpreter) {
      result.problem = "CPython 3.13: the interpreter's debug offsets differ from the known layout";
      return result;
    }
  }
  result.version = version;
  uint64_t interpreter = 0;
  uint64_t thread_state = 0;
  if (!memory.Get(symbols.runtime + layout->runtime_main_interpreter, &interpreter) || interpreter == 0 ||
      !memory.Get(interpreter + layout->interp_threads_head, &thread_state)) {
    result.problem = "the Python interpreter's state is unreadable";
    return result;
  }
  Reader reader(pid, *layout, symbols);
  for (size_t count = 0; thread_state != 0; ++count) {
    if (count == max_threads) {
      result.problem = absl::StrCat("more than ", max_threads, " Python threads: the rest left out");
      break;
    }
    PythonThread thread;
    unsigned long native_id = 0;
    if (layout->tstate_native_thread_id != kNone &&
        memory.Get(thread_state + layout->tstate_native_thread_id, &native_id)) {
      thread.tid = static_cast<int32_t>(native_id);
    }
    thread.path = reader.Frames(thread_state);
    result.threads.push_back(std::move(thread));
    if (!memory.Get(thread_state + layout->tstate_next, &thread_state)) {
      result.problem = "a Python thread state is unreadable";
      break;
    }
  }
  return result;
}

}  // namespace collwatch::stacks
