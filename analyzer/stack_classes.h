// Stacks of several ranks merged: each process's thread of interest (the one inside an
// NCCL call, else its main thread) in a short form, and the ranks whose short forms are
// the same as one class: "ranks 0-6 in ncclAllGather ← all_gather (train.py:31) ← ...;
// rank 7 sleeping in clock_nanosleep ← DataLoader.__next__ ← train (train.py:88)".
// Threading: pure functions.
#ifndef COLLWATCH_ANALYZER_STACK_CLASSES_H_
#define COLLWATCH_ANALYZER_STACK_CLASSES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "stacks/process_stacks.h"

namespace collwatch::analyzer {

// One process's stacks and the job ranks it holds (empty: not known; it is named by pid).
struct RankStacks {
  std::vector<int32_t> ranks;
  stacks::ProcessStacks stacks;
};

// The thread a stall is about: the one inside an NCCL call the program made (not one of
// NCCL's own threads: its proxy service waits in NCCL functions all the time), else the
// main thread, else the first with a Python call path (nullptr: no thread at all).
const stacks::ThreadStack* ThreadOfInterest(const stacks::ProcessStacks& process);

// A thread's whereabouts, innermost first: its state, its innermost native function, the
// NCCL function it is in (if any), and its innermost frames of the user's code: Python
// frames where it runs Python (torch's own skipped), else the program's own native
// frames. "sleeping in clock_nanosleep (libc.so.6) ← late_start (train.py:20) ← main
// (train.py:40)".
std::string WhereText(const stacks::ProcessStacks& process, const stacks::ThreadStack& thread);

struct StackClass {
  std::vector<int32_t> ranks;  // ascending; empty when the processes' ranks are not known
  std::vector<int32_t> pids;
  std::string thread;          // the thread of interest's label in the first process
  std::string where;           // WhereText, the same for every process of the class
  bool operator==(const StackClass&) const = default;
};

// Processes whose threads of interest are in the same place, as classes in the order of
// their lowest rank (or pid). A process with no stack at all forms a class of its own
// saying why.
std::vector<StackClass> MergeStacks(const std::vector<RankStacks>& processes);

// One line per class: "  ranks 0-2  python3 (main thread) in ncclAllGather ...".
std::string StackClassesText(const std::vector<StackClass>& classes);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_STACK_CLASSES_H_
