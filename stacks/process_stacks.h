// What a process's threads are doing, taken from outside it: each thread's native stack
// (elfutils' libdwfl unwinding over ptrace, one thread held stopped at a time, for as long
// as its unwinding takes) and, in a CPython 3.10-3.13 process, each Python thread's call
// path (read from the process's memory with process_vm_readv, nothing stopped). For stall
// findings and `collwatch stacks`. Needs the right to trace the process (same user, and
// under Yama's ptrace_scope 1 an ancestor or a tracer the process allowed).
// Threading: a call at a time per process; blocking (milliseconds, more where debug
// information is read).
#ifndef COLLWATCH_STACKS_PROCESS_STACKS_H_
#define COLLWATCH_STACKS_PROCESS_STACKS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ring/call_path.h"

namespace collwatch::stacks {

struct NativeFrame {
  uint64_t pc = 0;
  std::string function;  // demangled; "" where no symbol covers the address
  std::string module;    // the library's or program's file name, "libnccl.so.2" ("" unknown)
  std::string file;      // source file, where debug information has it ("" otherwise)
  int32_t line = 0;
};

struct ThreadStack {
  int32_t tid = 0;
  std::string name;                  // /proc/PID/task/TID/comm
  char state = '?';                  // the kernel's: R running, S sleeping, D disk, T stopped, ...
  bool unwound = false;              // its native stack was taken
  std::vector<NativeFrame> native;   // innermost first
  CallPath python;                   // innermost first; empty when it runs no Python
};

struct ProcessStacks {
  int32_t pid = 0;
  char state = '?';                   // its main thread's
  std::string program;                // its executable's file name, "python3.12"
  int python_version = 0;             // 312 for CPython 3.12; 0 when none was read
  std::vector<ThreadStack> threads;   // the main thread first
  int64_t longest_pause_ns = 0;       // the longest any thread was held stopped
  std::vector<std::string> problems;  // what could not be read, and why
};

struct StackOptions {
  bool native = true;                 // unwind native stacks (stops each thread briefly)
  bool python = true;                 // read Python call paths
  size_t max_native_frames = 64;
  size_t max_threads = 512;
};

// Takes the stacks of process `pid`. Never fails as a whole: what could not be read is in
// `problems` (no such process, not allowed to trace it, an interpreter not understood).
ProcessStacks TakeProcessStacks(int32_t pid, const StackOptions& options = {});

// "python3 (main thread)": a thread's short name for the texts.
std::string ThreadLabel(const ProcessStacks& process, const ThreadStack& thread);

}  // namespace collwatch::stacks

#endif  // COLLWATCH_STACKS_PROCESS_STACKS_H_
