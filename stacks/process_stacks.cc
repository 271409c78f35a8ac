// Taking a process's stacks (API: process_stacks.h). Order: the modules are reported and
// the Python threads read first, with nothing stopped; then libdwfl unwinds each thread,
// attaching to it with ptrace for its unwinding only (elfutils' linux-pid-attach: a
// thread that was stopped, e.g. by SIGSTOP, is left stopped); names and source lines are
// looked up last, with every thread running again.
#include "stacks/process_stacks.h"

#include <cxxabi.h>
#include <elfutils/libdwfl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "stacks/python_threads.h"

namespace collwatch::stacks {
namespace {

// The kernel's view of a thread: its name and state letter from /proc.
void ReadTaskStatus(int32_t pid, int32_t tid, ThreadStack* thread) {
  const std::string task = absl::StrCat("/proc/", pid, "/task/", tid);
  std::ifstream comm(task + "/comm");
  std::getline(comm, thread->name);
  std::ifstream stat(task + "/stat");
  std::string line;
  std::getline(stat, line);
  // "tid (comm) S ...": the name may hold spaces and parentheses; the state follows the last ')'.
  const size_t close = line.rfind(')');
  if (close != std::string::npos && close + 2 < line.size()) thread->state = line[close + 2];
}

// Whether `pid` is a kernel thread (PF_KTHREAD in the flags of /proc/PID/stat): it runs
// no user code, so it has neither a user stack nor a memory map to unwind against.
bool IsKernelThread(int32_t pid) {
  constexpr unsigned long kPfKthread = 0x00200000;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return false;
  // After the name: state ppid pgrp session tty_nr tpgid flags.
  std::istringstream fields(line.substr(close + 1));
  std::string field;
  for (int i = 0; i < 7 && fields >> field; ++i) {
  }
  return std::strtoul(field.c_str(), nullptr, 10) & kPfKthread;
}

// The process that traces `pid` now (TracerPid of /proc/PID/status, 0 when none): a
// thread traced by another (gdb, strace, py-spy) cannot be attached to for unwinding.
int32_t TracerOf(int32_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("TracerPid:", 0) == 0) return static_cast<int32_t>(std::strtol(line.c_str() + 10, nullptr, 10));
  }
  return 0;
}

std::string Demangled(const char* name) {
  if (name == nullptr) return "";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  return status == 0 && demangled ? std::string(demangled.get()) : std::string(name);
}

std::string BaseName(std::string_view path) { return std::filesystem::path(path).filename().string(); }

// ---- The interpreter's symbols ----------------------------------------------------------

// 310 from "python3.10", "libpython3.10.so.1.0"; 0 otherwise.
int VersionInName(const std::string& name) {
  const size_t at = name.find("python3.");
  if (at == std::string::npos) return 0;
  const int minor = std::atoi(name.c_str() + at + 8);
  return minor > 0 ? 300 + minor : 0;
}

int CollectPythonSymbols(Dwfl_Module* module, void** /*user*/, const char* name, Dwarf_Addr /*start*/, void* arg) {
  auto* symbols = static_cast<PythonSymbols*>(arg);
  const std::string file = BaseName(name == nullptr ? "" : name);
  // Only the interpreter's own program or library: libtorch's symbol tables are huge.
  if (file.rfind("python", 0) != 0 && file.rfind("libpython", 0) != 0) return DWARF_CB_OK;
  const int symbol_count = dwfl_module_getsymtab(module);
  for (int i = 1; i < symbol_count; ++i) {
    GElf_Sym symbol;
    GElf_Addr address = 0;
    const char* symbol_name = dwfl_module_getsym_info(module, i, &symbol, &address, nullptr, nullptr, nullptr);
    if (symbol_name == nullptr || symbol.st_shndx == SHN_UNDEF) continue;
    const std::string_view wanted(symbol_name);
    if (wanted == "_PyRuntime") {
      symbols->runtime = address;
    } else if (wanted == "Py_Version") {
      symbols->version = address;
    } else if (wanted == "PyCode_Type") {
      symbols->code_type = address;
    } else if (wanted == "PyUnicode_Type") {
      symbols->unicode_type = address;
    } else if (wanted == "PyBytes_Type") {
      symbols->bytes_type = address;
    }
  }
  if (symbols->runtime != 0 && symbols->version_from_name == 0) symbols->version_from_name = VersionInName(file);
  return DWARF_CB_OK;
}

// ---- Native stacks -----------------------------------------------------------------------

struct RawFrame {
  Dwarf_Addr pc = 0;
  bool activation = false;  // the innermost frame, or a signal frame: pc is exact, not a return address
};

struct UnwindState {
  const StackOptions* options;
  ProcessStacks* process;
  std::vector<std::vector<RawFrame>> frames;  // per thread of process->threads
};

// One thread's frames as the unwinding finds them, up to `max`.
struct FrameSink {
  std::vector<RawFrame> frames;
  size_t max = 0;
};

int CollectFrame(Dwfl_Frame* frame, void* arg) {
  auto* sink = static_cast<FrameSink*>(arg);
  RawFrame raw;
  if (!dwfl_frame_pc(frame, &raw.pc, &raw.activation)) return DWARF_CB_ABORT;
  sink->frames.push_back(raw);
  return sink->frames.size() < sink->max ? DWARF_CB_OK : DWARF_CB_ABORT;
}

int UnwindThread(Dwfl_Thread* thread, void* arg) {
  auto* state = static_cast<UnwindState*>(arg);
  const auto tid = static_cast<int32_t>(dwfl_thread_tid(thread));
  if (state->frames.size() >= state->options->max_threads) return DWARF_CB_ABORT;
  ThreadStack stack;
  stack.tid = tid;
  ReadTaskStatus(state->process->pid, tid, &stack);
  FrameSink sink;
  sink.max = state->options->max_native_frames;
  sink.frames.reserve(sink.max);
  const auto started = std::chrono::steady_clock::now();
  // The thread is attached (stopped) inside this call only. An unwinding that stops early
  // (no unwind information further out) keeps the frames it found.
  dwfl_thread_getframes(thread, CollectFrame, &sink);
  const int64_t held =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started).count();
  state->process->longest_pause_ns = std::max(state->process->longest_pause_ns, held);
  stack.unwound = !sink.frames.empty();
  state->process->threads.push_back(std::move(stack));
  state->frames.push_back(std::move(sink.frames));
  return DWARF_CB_OK;
}

// The file and line of `address` in `module`, looked up in the unit whose ranges hold it.
// dwfl_module_getsrc finds the unit through .debug_aranges, which clang does not write:
// without this, every frame of a program clang built would have no line.
bool SourceLineByUnits(Dwfl_Module* module, Dwarf_Addr address, NativeFrame* frame) {
  Dwarf_Addr bias = 0;
  for (Dwarf_Die* unit = dwfl_module_nextcu(module, nullptr, &bias); unit != nullptr;
       unit = dwfl_module_nextcu(module, unit, &bias)) {
    if (dwarf_haspc(unit, address - bias) != 1) continue;
    Dwarf_Line* line = dwarf_getsrc_die(unit, address - bias);
    int number = 0;
    const char* source = line == nullptr ? nullptr : dwarf_linesrc(line, nullptr, nullptr);
    if (source == nullptr || dwarf_lineno(line, &number) != 0) return false;
    frame->file = source;
    frame->line = number;
    return true;
  }
  return false;
}

NativeFrame Resolve(Dwfl* dwfl, const RawFrame& raw) {
  NativeFrame frame;
  frame.pc = raw.pc;
  // A return address points after the call: look up the call itself.
  const Dwarf_Addr lookup = raw.activation || raw.pc == 0 ? raw.pc : raw.pc - 1;
  Dwfl_Module* module = dwfl_addrmodule(dwfl, lookup);
  if (module == nullptr) return frame;
  const char* module_name = dwfl_module_info(module, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  frame.module = BaseName(module_name == nullptr ? "" : module_name);
  frame.function = Demangled(dwfl_module_addrname(module, lookup));
  // "clock_nanosleep@GLIBC_2.2.5": the symbol's version says nothing here.
  if (const size_t at = frame.function.find('@'); at != std::string::npos && at > 0) frame.function.resize(at);
  if (Dwfl_Line* line = dwfl_module_getsrc(module, lookup)) {
    int number = 0;
    if (const char* source = dwfl_lineinfo(line, nullptr, &number, nullptr, nullptr, nullptr)) {
      frame.file = source;
      frame.line = number;
      return frame;
    }
  }
  SourceLineByUnits(module, lookup, &frame);
  return frame;
}

}  // namespace

ProcessStacks TakeProcessStacks(int32_t pid, const StackOptions& options) {
  ProcessStacks process;
  process.pid = pid;
  ThreadStack main_thread;
  main_thread.tid = pid;
  ReadTaskStatus(pid, pid, &main_thread);
  process.state = main_thread.state;
  char exe[4096];
  const ssize_t exe_length = readlink(absl::StrCat("/proc/", pid, "/exe").c_str(), exe, sizeof exe - 1);
  if (exe_length > 0) process.program = BaseName(std::string_view(exe, static_cast<size_t>(exe_length)));
  if (main_thread.state == '?') {
    process.problems.push_back(absl::StrCat("no process ", pid));
    return process;
  }
  if (main_thread.state == 'Z' || main_thread.state == 'X') {
    process.problems.push_back("the process has ended (a zombie): no stacks");
    return process;
  }
  if (IsKernelThread(pid)) {
    // Else libdwfl says "its memory map is unreadable: No such process".
    if (process.program.empty()) process.program = main_thread.name;
    process.problems.push_back(
        absl::StrCat("a kernel thread (", main_thread.name, "): it runs no user code and has no user stacks"));
    return process;
  }

  char* debuginfo_path = nullptr;
  const Dwfl_Callbacks callbacks = {dwfl_linux_proc_find_elf, dwfl_standard_find_debuginfo, nullptr, &debuginfo_path};
  std::unique_ptr<Dwfl, void (*)(Dwfl*)> dwfl(dwfl_begin(&callbacks), dwfl_end);
  if (!dwfl) {
    process.problems.push_back(absl::StrCat("libdwfl: ", dwfl_errmsg(-1)));
    return process;
  }
  dwfl_report_begin(dwfl.get());
  const int reported = dwfl_linux_proc_report(dwfl.get(), pid);
  dwfl_report_end(dwfl.get(), nullptr, nullptr);
  if (reported != 0) {
    process.problems.push_back(absl::StrCat("its memory map is unreadable: ",
                                            reported > 0 ? std::strerror(reported) : dwfl_errmsg(-1)));
    return process;
  }

  PythonThreads python;
  if (options.python) {
    PythonSymbols symbols;
    dwfl_getmodules(dwfl.get(), CollectPythonSymbols, &symbols, 0);
    if (symbols.runtime != 0) {  // else no Python in it: nothing to say
      python = ReadPythonThreads(pid, symbols, options.max_threads);
      process.python_version = python.version;
      if (!python.problem.empty()) process.problems.push_back("Python: " + python.problem);
    }
  }

  UnwindState unwind{&options, &process, {}};
  const int32_t tracer = options.native ? TracerOf(pid) : 0;
  if (tracer != 0) {
    // Attaching would fail thread by thread (EPERM) and leave every stack empty, unsaid.
    std::ifstream comm(absl::StrCat("/proc/", tracer, "/comm"));
    std::string tracer_name;
    std::getline(comm, tracer_name);
    process.problems.push_back(absl::StrCat("native stacks not taken: process is traced by PID ", tracer, " (",
                                            tracer_name.empty() ? "gone" : tracer_name, ")"));
  } else if (options.native) {
    const int attached = dwfl_linux_proc_attach(dwfl.get(), pid, false);
    if (attached != 0) {
      process.problems.push_back(absl::StrCat("native stacks: cannot trace it (",
                                              attached > 0 ? std::strerror(attached) : dwfl_errmsg(-1), ")"));
    } else if (dwfl_getthreads(dwfl.get(), UnwindThread, &unwind) != 0 && unwind.frames.empty()) {
      // (Non-zero also where UnwindThread stopped at max_threads: only no thread at all is a problem.)
      process.problems.push_back(absl::StrCat("native stacks: ", dwfl_errmsg(-1)));
    }
  }
  for (size_t t = 0; t < unwind.frames.size(); ++t) {
    for (const RawFrame& raw : unwind.frames[t]) process.threads[t].native.push_back(Resolve(dwfl.get(), raw));
  }
  if (process.threads.empty()) process.threads.push_back(main_thread);

  // Python threads join the native threads they run on; those whose thread is not known
  // (3.10 keeps no kernel id) come after them, but for the main thread's: the interpreter
  // lists thread states newest first, and the main thread's was made first.
  for (size_t i = 0; i < python.threads.size(); ++i) {
    PythonThread& thread = python.threads[i];
    ThreadStack* joined = nullptr;
    for (ThreadStack& native : process.threads) {
      if (thread.tid != 0 && native.tid == thread.tid) joined = &native;
    }
    if (joined == nullptr && thread.tid == 0 && i + 1 == python.threads.size() && process.threads.front().tid == pid) {
      joined = &process.threads.front();
    }
    if (joined == nullptr) {  // not unwound (--python-only, or beyond max_threads), or 3.10's
      ThreadStack unknown;
      unknown.tid = thread.tid;
      unknown.name = "python thread";
      if (thread.tid != 0) ReadTaskStatus(pid, thread.tid, &unknown);
      process.threads.push_back(std::move(unknown));
      joined = &process.threads.back();
    }
    joined->python = std::move(thread.path);
  }
  return process;
}

std::string ThreadLabel(const ProcessStacks& process, const ThreadStack& thread) {
  const std::string name = thread.name.empty() ? "thread" : thread.name;
  return thread.tid == process.pid ? absl::StrCat(name, " (main thread)") : absl::StrCat(name, " (", thread.tid, ")");
}

}  // namespace collwatch::stacks
