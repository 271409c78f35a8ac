// Stacks merged into classes (see stack_classes.h).
#include "analyzer/stack_classes.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "analyzer/call_sites.h"
#include "analyzer/finding_words.h"

namespace collwatch::analyzer {
namespace {

using stacks::NativeFrame;
using stacks::ProcessStacks;
using stacks::ThreadStack;

// User frames shown after the native ones.
constexpr size_t kUserFramesShown = 3;

bool IsNcclFunction(const NativeFrame& frame) { return frame.function.rfind("nccl", 0) == 0; }

// Frames of NCCL and of the C library's thread start, which NCCL's own threads (its proxy
// service, progress and async jobs) consist of.
bool IsNcclOrThreadStart(const NativeFrame& frame) {
  return IsNcclFunction(frame) || frame.module.rfind("libnccl", 0) == 0 || frame.module.rfind("libc.so", 0) == 0 ||
         frame.module.rfind("libcollwatch", 0) == 0;
}

// The thread is inside an NCCL call the program made: an NCCL function with a frame of
// someone else's further out (not one of NCCL's own threads).
bool InNcclCall(const ThreadStack& thread) {
  const auto nccl = std::find_if(thread.native.begin(), thread.native.end(), IsNcclFunction);
  if (nccl == thread.native.end()) return false;
  return !thread.python.frames.empty() ||
         std::any_of(nccl, thread.native.end(), [](const NativeFrame& frame) { return !IsNcclOrThreadStart(frame); });
}

// A C++ function without its parameter list, as Python's are named:
// "ns::Trainer::Step(long) const" -> "ns::Trainer::Step".
std::string WithoutParameters(const std::string& function) {
  size_t end = function.size();
  if (function.ends_with(" const")) end -= 6;
  if (end == 0 || function[end - 1] != ')') return function;
  int depth = 0;
  for (size_t i = end; i-- > 0;) {
    if (function[i] == ')') ++depth;
    if (function[i] == '(' && --depth == 0) return i == 0 ? function : function.substr(0, i);
  }
  return function;
}

// A library's frame by its library ("clock_nanosleep (libc.so.6)"); the program's own by
// its source line where debug information has one.
std::string NativeText(const ProcessStacks& process, const NativeFrame& frame) {
  const std::string function = frame.function.empty() ? "??" : WithoutParameters(frame.function);
  if (frame.module == process.program && !frame.file.empty() && frame.line > 0) {
    return absl::StrCat(function, " (", std::filesystem::path(frame.file).filename().string(), ":", frame.line, ")");
  }
  return frame.module.empty() ? function : absl::StrCat(function, " (", frame.module, ")");
}

std::string StateWord(char state) {
  switch (state) {
    case 'R':
      return "running";
    case 'S':
      return "sleeping";
    case 'D':
      return "in uninterruptible wait";
    case 'T':
      return "stopped";
    case 't':
      return "stopped by a tracer";
    case 'Z':
      return "ended";
    default:
      return "";
  }
}

}  // namespace

const ThreadStack* ThreadOfInterest(const ProcessStacks& process) {
  for (const ThreadStack& thread : process.threads) {
    if (InNcclCall(thread)) return &thread;
  }
  for (const ThreadStack& thread : process.threads) {
    if (thread.tid == process.pid) return &thread;
  }
  for (const ThreadStack& thread : process.threads) {
    if (!thread.python.frames.empty()) return &thread;
  }
  return process.threads.empty() ? nullptr : &process.threads.front();
}

std::string WhereText(const ProcessStacks& process, const ThreadStack& thread) {
  std::vector<std::string> parts;
  if (!thread.native.empty()) parts.push_back(NativeText(process, thread.native.front()));
  // The NCCL function the program called: the outermost of NCCL's own, else collwatch's
  // hook of the same name, named without its library (the function the program called).
  const NativeFrame* nccl = nullptr;
  const NativeFrame* hook = nullptr;
  for (auto frame = thread.native.rbegin(); frame != thread.native.rend() && nccl == nullptr; ++frame) {
    if (!IsNcclFunction(*frame)) continue;
    if (frame->module.rfind("libcollwatch", 0) != 0) {
      nccl = &*frame;
    } else if (hook == nullptr) {
      hook = &*frame;
    }
  }
  if (nccl != nullptr && nccl != &thread.native.front()) {
    parts.push_back(NativeText(process, *nccl));
  } else if (nccl == nullptr && hook != nullptr) {
    parts.push_back(WithoutParameters(hook->function));
  }
  size_t shown = 0;
  for (const CallFrame& frame : thread.python.frames) {
    if (IsLibraryFrame(frame) || shown == kUserFramesShown) continue;
    parts.push_back(FrameText(frame));
    ++shown;
  }
  if (shown == 0 && !thread.python.frames.empty()) parts.push_back(FrameText(thread.python.frames.front()));
  if (thread.python.frames.empty()) {
    // No Python: the program's own native frames.
    for (size_t i = 1; i < thread.native.size() && shown < kUserFramesShown; ++i) {
      if (thread.native[i].module != process.program || thread.native[i].function.empty()) continue;
      parts.push_back(NativeText(process, thread.native[i]));
      ++shown;
    }
  }
  std::string text = StateWord(thread.state);
  if (parts.empty()) return text.empty() ? "no stack" : absl::StrCat(text, ", no stack");
  absl::StrAppend(&text, text.empty() ? "" : " ", "in ", parts.front());
  for (size_t i = 1; i < parts.size(); ++i) absl::StrAppend(&text, " \u2190 ", parts[i]);
  return text;
}

std::vector<StackClass> MergeStacks(const std::vector<RankStacks>& processes) {
  std::vector<StackClass> classes;
  std::map<std::string, size_t> class_of;  // by thread label + where
  for (const RankStacks& process : processes) {
    const ThreadStack* thread = ThreadOfInterest(process.stacks);
    std::string where;
    std::string label = process.stacks.program.empty() ? "process" : process.stacks.program;
    if (thread != nullptr) {
      where = WhereText(process.stacks, *thread);
      label = ThreadLabel(process.stacks, *thread);
    }
    if (thread == nullptr || (thread->native.empty() && thread->python.frames.empty())) {
      // Say why there is nothing to show.
      if (!process.stacks.problems.empty()) absl::StrAppend(&where, where.empty() ? "" : "; ", process.stacks.problems.front());
    }
    // Threads named after the process differ only by pid: merge on the role, not the name.
    const std::string role = thread != nullptr && thread->tid == process.stacks.pid ? "main" : label;
    auto [it, inserted] = class_of.try_emplace(absl::StrCat(role, "\n", where), classes.size());
    if (inserted) classes.push_back(StackClass{{}, {}, label, where});
    StackClass& merged = classes[it->second];
    merged.ranks.insert(merged.ranks.end(), process.ranks.begin(), process.ranks.end());
    merged.pids.push_back(process.stacks.pid);
  }
  for (StackClass& merged : classes) {
    std::sort(merged.ranks.begin(), merged.ranks.end());
    std::sort(merged.pids.begin(), merged.pids.end());
  }
  std::sort(classes.begin(), classes.end(), [](const StackClass& a, const StackClass& b) {
    const int32_t first_a = a.ranks.empty() ? INT32_MAX : a.ranks.front();
    const int32_t first_b = b.ranks.empty() ? INT32_MAX : b.ranks.front();
    return first_a != first_b ? first_a < first_b : a.pids.front() < b.pids.front();
  });
  return classes;
}

std::string StackClassesText(const std::vector<StackClass>& classes) {
  std::string text;
  for (const StackClass& merged : classes) {
    std::string who;
    if (merged.ranks.empty()) {
      who = merged.pids.size() == 1 ? absl::StrCat("pid ", merged.pids.front())
                                    : absl::StrCat(merged.pids.size(), " processes");
    } else {
      who = RanksText(merged.ranks, 0);
    }
    absl::StrAppend(&text, "  ", who, std::string(who.size() < 12 ? 12 - who.size() : 1, ' '), merged.thread, " ",
                    merged.where, "\n");
  }
  return text;
}

}  // namespace collwatch::analyzer
