// Another process's CPython threads and their call paths, read from its memory
// (process_vm_readv) with the layouts of cpython/layouts.h. Internal to stacks/.
// Threading: pure apart from the reads; one call at a time per process.
#ifndef COLLWATCH_STACKS_PYTHON_THREADS_H_
#define COLLWATCH_STACKS_PYTHON_THREADS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ring/call_path.h"

namespace collwatch::stacks {

// Where the interpreter's symbols are in the process (0: not found).
struct PythonSymbols {
  uint64_t runtime = 0;       // _PyRuntime
  uint64_t version = 0;       // Py_Version (3.11+)
  uint64_t code_type = 0;     // PyCode_Type
  uint64_t unicode_type = 0;  // PyUnicode_Type
  uint64_t bytes_type = 0;    // PyBytes_Type
  int version_from_name = 0;  // 310 from a module named python3.10 / libpython3.10.so
};

struct PythonThread {
  int32_t tid = 0;  // the kernel's thread id; 0 where the interpreter keeps none (3.10)
  CallPath path;    // innermost first
};

struct PythonThreads {
  int version = 0;                // 312; 0 when none could be read
  std::vector<PythonThread> threads;
  std::string problem;            // why nothing (or not everything) was read, "" when all was
};

// The main interpreter's threads of process `pid`, at most `max_threads`.
PythonThreads ReadPythonThreads(int32_t pid, const PythonSymbols& symbols, size_t max_threads);

}  // namespace collwatch::stacks

#endif  // COLLWATCH_STACKS_PYTHON_THREADS_H_
