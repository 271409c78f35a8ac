// NCCL's profiler plugin (ring/nccl_profiler_abi.h), called as NCCL 2.28 calls it, so that
// a plugin (libcollwatch.so's among them) runs on the CPU backend as on NCCL: loaded from
// NCCL_PROFILER_PLUGIN at the first communicator; init and finalize per communicator; the
// API events (GroupApi, CollApi, P2pApi) on the calling thread inside the call; at launch
// the Group, Coll and P2p events; one kernel channel per task, started when the task
// starts moving and stopped (state 22, then stop) when it is done, on the thread that
// progresses it. Each event only where the plugin's activation mask asks for it or for
// an event below it, as NCCL does. COLLWATCH_CPU_NCCL_PROFILER_VERSION=N makes it an older
// NCCL (ring/nccl_profiler_abi.h): it takes ncclProfiler_vN or the next older one, calls
// that version's init, and emits only that version's events in its layout: before v5 no
// API events (a Coll or P2p event's parent is its launch's Group event), before v4 no
// channel timers and no KernelCh stop state, before v3 no KernelCh events. Differences from
// NCCL: all-to-all, gather and scatter emit nothing (NCCL turns them into sends and
// receives); every task runs on one channel; CUDA graphs only as the engine emulates them
// (engine.h: a replay emits the launch events of each captured call from a thread of its
// own, as NCCL's host callback in the graph does).
// Threading: any thread; a task's events come from the thread that owns it.
#ifndef COLLWATCH_CPU_NCCL_PROFILER_H_
#define COLLWATCH_CPU_NCCL_PROFILER_H_

#include <cstddef>

struct ncclComm;

namespace collwatch::cpu_nccl {

struct Task;

// The plugin's handles of one task's events (null: not emitted).
struct TaskEvents {
  void* api;      // CollApi or P2pApi (stopped at once; parent of `op`)
  void* op;       // Coll or P2p (stopped at launch; parent of `channel`)
  void* channel;  // KernelCh
  bool channel_done;
};

namespace profiler {

// init for a communicator whose creation completed; finalize before it is freed.
void CommReady(ncclComm* comm) noexcept;
void CommFreed(ncclComm* comm) noexcept;

// A collective or send/receive call about to be submitted (calling thread): opens the
// thread's GroupApi event if none is open, and emits the call's API event (`captured`:
// flagged graphCaptured; its handle stays the parent of the Coll event of every replay).
void Call(Task* task, size_t count, int dtype, int root, void* stream, bool captured = false) noexcept;
// Tasks about to run (the implicit group of one call, the outermost GroupEnd, or a graph's
// replay of a captured call).
void Launch(Task* tasks, int count) noexcept;
// After the launch: closes the thread's GroupApi event.
void Launched() noexcept;
// A task's progress moved it (first time: its channel starts) / it is done.
void TaskMoving(Task& task) noexcept;
void TaskDone(Task& task) noexcept;

}  // namespace profiler
}  // namespace collwatch::cpu_nccl

#endif  // COLLWATCH_CPU_NCCL_PROFILER_H_
