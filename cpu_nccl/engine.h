// The engine: NCCL group semantics (thread-local nesting, deferral to the outermost
// GroupEnd) and the loop that progresses a set of tasks, spinning briefly, then sleeping
// on futexes of the segment until a peer's progress (or an abort) wakes it.
// Threading: group state is per thread (as NCCL's); RunTasks runs on the calling thread.
#ifndef COLLWATCH_CPU_NCCL_ENGINE_H_
#define COLLWATCH_CPU_NCCL_ENGINE_H_

#include "cpu_nccl/task.h"

namespace collwatch::cpu_nccl {

// Runs `task` now (outside a group) or queues it for the outermost GroupEnd. A queued task
// holds a reference on its communicator. Takes over what the task owns (DisposeTask).
ncclResult_t Submit(Task task) noexcept;

bool InGroup() noexcept;
ncclResult_t GroupStart() noexcept;

// Ends a group level. At the outermost level, runs every queued task to completion (or
// with `simulate`, drops the queued collectives and point-to-point operations, still
// creating the queued communicators, and fills *estimated_us).
ncclResult_t GroupEnd(bool simulate, float* estimated_us) noexcept;

// Records an argument error met inside a group: NCCL's GroupEnd then fails too.
void NoteGroupError(ncclResult_t error) noexcept;

// One progress step of a task (no sleeping): fails tasks of aborted or revoked
// communicators. Used by RunTasks and by the CUDA mode's progress thread.
Status ProgressTask(Task& t, bool* moved) noexcept;

// Sets each task's `prev` to the task before it in its queue (engine.cc: collectives of a
// communicator in issue order, sends to one peer in order, receives from one peer in
// order); `order` is scratch of `count` ints. Tasks must have prev = -1 beforehand.
void LinkQueues(Task* tasks, int count, int* order) noexcept;

// Waits until no task of `comm` is queued on a CUDA stream any more (or the communicator
// is aborted), so that a host-buffer call does not run beside the progress thread.
void WaitForDeviceTasks(ncclComm* comm) noexcept;

// ncclGetLastError's text: a static or thread-lived message, process-wide as NCCL's.
void SetLastError(const char* message) noexcept;
const char* LastError() noexcept;

// CUDA graphs, emulated in host mode for tests (cpu_nccl/README.md, "CUDA graphs"): while a
// thread captures, its collectives are kept, not run; a replay runs them again, in order,
// on a thread of its own, emitting the profiler events NCCL's host callback emits at a
// replay. Sends and receives, grouped calls and CUDA buffers are not captured.
struct Graph;
bool Capturing() noexcept;
void BeginCapture() noexcept;
// Keeps `task` (before it ever ran) for the replays, with a reference on its communicator.
ncclResult_t CaptureTask(const Task& task) noexcept;
Graph* EndCapture() noexcept;  // nullptr: out of memory
ncclResult_t ReplayGraph(const Graph* graph) noexcept;
void DestroyGraph(Graph* graph) noexcept;

// Undoes what a task owns besides its communicator reference (split buffers, unfinished
// children). For tasks that will not run (failed or dropped) and after completion.
void DisposeTask(Task* task) noexcept;

}  // namespace collwatch::cpu_nccl

#endif  // COLLWATCH_CPU_NCCL_ENGINE_H_
