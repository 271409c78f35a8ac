// Group state and the task loop. Threading: t_group is thread-local; RunTasks touches
// other threads' state only through atomics (communicator state, segment counters).
// Waiting: spin `spin` passes, then announce in the segment whom we wait for, re-check,
// and sleep on the own doorbell (shm_layout.h "Sleeping"). Tasks of several communicators
// at once (e.g. ncclCommInitAll plus a group) sleep on the first one with a 1 ms limit.
#include "cpu_nccl/engine.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "cpu_nccl/cuda_queue.h"
#include "cpu_nccl/futex.h"
#include "cpu_nccl/profiler.h"

namespace collwatch::cpu_nccl {
namespace {

struct GroupState {
  int depth;
  ncclResult_t error;
  Task* tasks;
  int count;
  int capacity;
  int* order;  // scratch for LinkQueues
  int order_capacity;
};

// Trivially destructible: no thread-exit hook from the C++ runtime; FreeGroupState (a
// pthread key destructor) frees the arrays of threads that used groups.
thread_local GroupState t_group;

std::atomic<const char*> g_last_error{""};

pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
pthread_key_t g_key;

void FreeGroupState(void* arg) noexcept {
  auto* g = static_cast<GroupState*>(arg);
  for (int i = 0; i < g->count; ++i) {
    DisposeTask(&g->tasks[i]);
    ReleaseComm(g->tasks[i].comm);
  }
  std::free(g->tasks);
  std::free(g->order);
  *g = GroupState{};
}

void CreateKey() noexcept { pthread_key_create(&g_key, FreeGroupState); }

bool Grow(void** array, int* capacity, int needed, size_t elem_size) noexcept {
  if (needed <= *capacity) return true;
  int cap = *capacity < 16 ? 16 : *capacity * 2;
  while (cap < needed) cap *= 2;
  void* grown = std::realloc(*array, static_cast<size_t>(cap) * elem_size);
  if (grown == nullptr) return false;
  *array = grown;
  *capacity = cap;
  return true;
}

Status ProgressSplit(Task& t, bool* moved) noexcept {
  SplitState& s = t.split;
  ncclComm* parent = t.comm;
  if (s.stage == kSplitGather) {
    const Status st = ProgressColl(parent, s.gather, &t.blocked_on, moved);
    if (st != Status::kDone) return st;
    const uint64_t serial = ++parent->child_serial;
    *moved = true;
    if (s.color == NCCL_SPLIT_NOCOLOR) {
      *s.out = nullptr;
      return Status::kDone;
    }
    // New rank order: key, then old rank.
    const int32_t* all = s.buffer + 2;
    int new_rank = 0;
    int new_nranks = 0;
    for (int p = 0; p < parent->nranks; ++p) {
      if (all[2 * p] != s.color) continue;
      ++new_nranks;
      const int32_t key = all[2 * p + 1];
      if (key < s.key || (key == s.key && p < parent->rank)) ++new_rank;
    }
    s.child = NewComm(new_rank, new_nranks, SplitChildKey(parent->key, serial, s.color));
    if (s.child == nullptr) {
      t.result = ncclSystemError;
      return Status::kFailed;
    }
    s.child->spin = parent->spin;
    s.stage = kSplitInit;
  }
  const Status st = ProgressInit(s.child, &t.blocked_on, moved, &t.result);
  if (st == Status::kDone) {
    *s.out = s.child;
    s.child = nullptr;
  }
  return st;
}

}  // namespace

Status ProgressTask(Task& t, bool* moved) noexcept {
  ncclComm* comm = t.comm;
  const uint32_t state = comm->state.load();
  if (state == kCommAborted || (state == kCommRevoked && t.kind != TaskKind::kInit)) {
    t.result = ncclSystemError;  // pending operations of an aborted communicator fail
    return Status::kFailed;
  }
  if (t.kind != TaskKind::kInit && comm->init_stage != kInitDone) {
    t.result = ncclInvalidUsage;  // its creation failed earlier
    return Status::kFailed;
  }
  Status status = Status::kFailed;
  switch (t.kind) {
    case TaskKind::kInit:
      return ProgressInit(comm, &t.blocked_on, moved, &t.result);
    case TaskKind::kSplit:
      return ProgressSplit(t, moved);
    case TaskKind::kColl:
      profiler::TaskMoving(t);
      status = ProgressColl(comm, t.coll, &t.blocked_on, moved);
      break;
    case TaskKind::kSend:
      profiler::TaskMoving(t);
      status = ProgressSend(comm, t.p2p, &t.blocked_on, moved);
      break;
    case TaskKind::kRecv:
      profiler::TaskMoving(t);
      status = ProgressRecv(comm, t.p2p, &t.blocked_on, moved);
      break;
  }
  if (status == Status::kDone) profiler::TaskDone(t);
  return status;
}

namespace {

// The slot whose doorbell wakes this task's thread, or nullptr if it has none yet.
RankControl* WakeSlot(const Task& t) noexcept {
  const ncclComm* comm = t.comm;
  if (t.kind == TaskKind::kSplit && t.split.stage == kSplitInit) comm = t.split.child;
  if (comm == nullptr || !comm->slot_claimed.load()) return nullptr;
  return comm->seg.Rank(comm->rank);
}

// Queue lane of a task: collectives (and creation) of a communicator run in order; sends
// to one peer run in order, and so do receives from one peer; everything else concurrently.
int Lane(const Task& t) noexcept {
  if (t.kind == TaskKind::kSend) return 2 * t.p2p.peer;
  if (t.kind == TaskKind::kRecv) return 2 * t.p2p.peer + 1;
  return -1;
}

}  // namespace

void LinkQueues(Task* tasks, int count, int* order) noexcept {
  for (int i = 0; i < count; ++i) order[i] = i;
  std::sort(order, order + count, [tasks](int a, int b) {
    const auto ca = reinterpret_cast<uintptr_t>(tasks[a].comm);
    const auto cb = reinterpret_cast<uintptr_t>(tasks[b].comm);
    if (ca != cb) return ca < cb;
    const int la = Lane(tasks[a]);
    const int lb = Lane(tasks[b]);
    if (la != lb) return la < lb;
    return a < b;
  });
  for (int k = 1; k < count; ++k) {
    const Task& a = tasks[order[k - 1]];
    Task& b = tasks[order[k]];
    if (a.comm == b.comm && Lane(a) == Lane(b)) b.prev = order[k - 1];
  }
}

namespace {

constexpr int kMaxSleepSlots = 8;
constexpr int32_t kUnsetTarget = -100;

struct Sleeper {
  RankControl* slots[kMaxSleepSlots];
  int nslots = 0;
  bool poll = false;  // some task has nothing to sleep on: sleep a little and retry
  uint32_t bell = 0;
  long poll_ns = 0;

  // Publishes, in each slot the blocked tasks could be woken through, whom we wait for.
  void Announce(const Task* tasks, int count) noexcept {
    nslots = 0;
    poll = false;
    int32_t target = kUnsetTarget;
    for (int i = 0; i < count; ++i) {
      const Task& t = tasks[i];
      if (t.done || (t.prev >= 0 && !tasks[t.prev].done)) continue;
      RankControl* rc = WakeSlot(t);
      if (rc == nullptr || t.blocked_on == kPoll) {
        poll = true;
        continue;
      }
      int k = 0;
      while (k < nslots && slots[k] != rc) ++k;
      if (k == nslots) {
        if (nslots == kMaxSleepSlots) {
          poll = true;
          continue;
        }
        slots[nslots++] = rc;
      }
      target = target == kUnsetTarget || target == t.blocked_on ? t.blocked_on : kWaitAny;
    }
    if (nslots > 1) target = kWaitAny;
    for (int k = 0; k < nslots; ++k) slots[k]->wait_on.store(target);
    if (nslots > 0) bell = slots[0]->doorbell.load();
  }

  void Withdraw() noexcept {
    for (int k = 0; k < nslots; ++k) slots[k]->wait_on.store(kNotWaiting);
    nslots = 0;
  }

  void Sleep() noexcept {
    if (poll || nslots == 0) {
      poll_ns = poll_ns == 0 ? 50 * 1000 : (poll_ns >= 1000 * 1000 ? 2000 * 1000 : poll_ns * 2);
      const timespec pause{0, poll_ns};
      nanosleep(&pause, nullptr);
      return;
    }
    static constexpr timespec kMultiSlotLimit{0, 1000 * 1000};
    FutexWait(&slots[0]->doorbell, bell, nslots > 1 ? &kMultiSlotLimit : nullptr);
  }
};

ncclResult_t RunTasks(Task* tasks, int count, int* order) noexcept {
  for (int i = 0; i < count; ++i) {
    tasks[i].comm->running.fetch_add(1);
    tasks[i].prev = -1;
    tasks[i].done = false;
    tasks[i].result = ncclSuccess;
    tasks[i].blocked_on = kWaitAny;
  }
  if (count > 1) LinkQueues(tasks, count, order);
  const int spin = tasks[0].comm->spin;
  ncclResult_t result = ncclSuccess;
  Sleeper sleeper;
  bool announced = false;
  int spins = 0;
  for (;;) {
    bool moved = false;
    int remaining = 0;
    for (int i = 0; i < count; ++i) {
      Task& t = tasks[i];
      if (t.done) continue;
      if (t.prev >= 0 && !tasks[t.prev].done) {
        ++remaining;
        continue;
      }
      const Status st = ProgressTask(t, &moved);
      if (st == Status::kDone) {
        t.done = true;
        moved = true;
      } else if (st == Status::kFailed) {
        result = t.result != ncclSuccess ? t.result : ncclInternalError;
        break;
      } else {
        ++remaining;
      }
    }
    if (result != ncclSuccess || remaining == 0) break;
    if (moved) {
      if (announced) sleeper.Withdraw();
      announced = false;
      spins = 0;
      sleeper.poll_ns = 0;
      continue;
    }
    if (spins < spin) {
      ++spins;
      CpuRelax();
      continue;
    }
    if (!announced) {
      sleeper.Announce(tasks, count);  // then one more pass before sleeping
      announced = true;
      continue;
    }
    sleeper.Sleep();
    sleeper.Withdraw();
    announced = false;
    spins = spin;  // after a wake, sleep again at once unless something moved
  }
  if (announced) sleeper.Withdraw();
  for (int i = 0; i < count; ++i) tasks[i].comm->running.fetch_sub(1);
  return result;
}

// A rough cost model for ncclGroupSimulateEnd: 5 us per operation plus bytes at 4 GB/s.
float EstimateMicros(const Task& t) noexcept {
  uint64_t bytes = 0;
  if (t.kind == TaskKind::kColl) bytes = t.coll.count * DtypeSize(t.coll.dtype);
  if (t.kind == TaskKind::kSend || t.kind == TaskKind::kRecv) bytes = t.p2p.bytes;
  return 5.0f + static_cast<float>(bytes) / 4000.0f;
}

// Hands tasks with CUDA buffers to the CUDA mode's stream queue.
ncclResult_t EnqueueDevice(const Task* tasks, int count) noexcept {
  const CudaAvailability cuda = Driver();
  if (cuda.driver == nullptr) {  // a CUDA buffer was seen, so the driver was published
    SetLastError("CUDA mode: the CUDA driver went away");
    return ncclInternalError;
  }
  const char* message = "";
  const ncclResult_t result = EnqueueDeviceTasks(cuda.driver, tasks, count, &message);
  if (result != ncclSuccess) SetLastError(message);
  return result;
}

bool HasDeviceTask(const Task* tasks, int count) noexcept {
  for (int i = 0; i < count; ++i) {
    if (tasks[i].dev.active) return true;
  }
  return false;
}

// A group with CUDA buffers: creations and splits run first, here (they are host-side in
// NCCL too); the collectives, sends and receives become one stream-ordered unit.
ncclResult_t EndDeviceGroup() noexcept {
  int host_side = 0;
  for (int i = 0; i < t_group.count; ++i) {
    const TaskKind kind = t_group.tasks[i].kind;
    if (kind == TaskKind::kInit || kind == TaskKind::kSplit) ++host_side;
  }
  if (!Grow(reinterpret_cast<void**>(&t_group.order), &t_group.order_capacity, t_group.count,
            sizeof(int))) {
    return ncclSystemError;
  }
  // Stable partition: host-side tasks first, the rest after them in issue order.
  auto* sorted = static_cast<Task*>(std::malloc(sizeof(Task) * static_cast<size_t>(t_group.count)));
  if (sorted == nullptr) return ncclSystemError;
  int front = 0;
  int back = host_side;
  for (int i = 0; i < t_group.count; ++i) {
    const TaskKind kind = t_group.tasks[i].kind;
    const bool host = kind == TaskKind::kInit || kind == TaskKind::kSplit;
    sorted[host ? front++ : back++] = t_group.tasks[i];
  }
  std::memcpy(t_group.tasks, sorted, sizeof(Task) * static_cast<size_t>(t_group.count));
  std::free(sorted);
  ncclResult_t result = ncclSuccess;
  if (host_side > 0) {
    for (int i = 0; i < host_side; ++i) {
      if (t_group.tasks[i].kind == TaskKind::kSplit) WaitForDeviceTasks(t_group.tasks[i].comm);
    }
    result = RunTasks(t_group.tasks, host_side, t_group.order);
  }
  if (result == ncclSuccess) {
    result = EnqueueDevice(t_group.tasks + host_side, t_group.count - host_side);
  }
  return result;
}

void ClearGroup() noexcept {
  for (int i = 0; i < t_group.count; ++i) {
    DisposeTask(&t_group.tasks[i]);
    ReleaseComm(t_group.tasks[i].comm);
  }
  t_group.count = 0;
  t_group.error = ncclSuccess;
  profiler::Launched();  // the outermost group ended, launched or not
}

// The calls this thread captures (BeginCapture .. EndCapture).
struct CaptureState {
  bool active;
  Task* tasks;
  int count;
  int capacity;
};
thread_local CaptureState t_capture;

}  // namespace

struct Graph {
  Task* tasks;  // as captured: each replay runs a fresh copy
  int count;
};

bool Capturing() noexcept { return t_capture.active; }

void BeginCapture() noexcept {
  DestroyGraph(EndCapture());  // a capture left open before: dropped
  t_capture.active = true;
}

ncclResult_t CaptureTask(const Task& task) noexcept {
  if (!Grow(reinterpret_cast<void**>(&t_capture.tasks), &t_capture.capacity, t_capture.count + 1, sizeof(Task))) {
    return ncclSystemError;
  }
  RetainComm(task.comm);
  t_capture.tasks[t_capture.count++] = task;
  return ncclSuccess;
}

Graph* EndCapture() noexcept {
  auto* graph = static_cast<Graph*>(std::malloc(sizeof(Graph)));
  if (graph != nullptr) {
    *graph = Graph{t_capture.tasks, t_capture.count};
  } else {
    for (int i = 0; i < t_capture.count; ++i) ReleaseComm(t_capture.tasks[i].comm);
    std::free(t_capture.tasks);
  }
  t_capture = CaptureState{};
  return graph;
}

namespace {

struct Replay {
  const Graph* graph;
  ncclResult_t result;
};

// A replay as NCCL's host callback in the graph runs it, on a thread that is not the
// caller's: each captured call's launch events (its Coll event's parent: the API event of
// its capture), then the call itself.
void* RunReplay(void* arg) noexcept {
  auto* replay = static_cast<Replay*>(arg);
  for (int i = 0; i < replay->graph->count && replay->result == ncclSuccess; ++i) {
    Task task = replay->graph->tasks[i];
    profiler::Launch(&task, 1);
    int order = 0;
    replay->result = RunTasks(&task, 1, &order);
    DisposeTask(&task);
  }
  return nullptr;
}

}  // namespace

ncclResult_t ReplayGraph(const Graph* graph) noexcept {
  Replay replay{graph, ncclSuccess};
  pthread_t thread;
  if (pthread_create(&thread, nullptr, RunReplay, &replay) != 0) return ncclSystemError;
  pthread_join(thread, nullptr);
  return replay.result;
}

void DestroyGraph(Graph* graph) noexcept {
  if (graph == nullptr) return;
  for (int i = 0; i < graph->count; ++i) ReleaseComm(graph->tasks[i].comm);
  std::free(graph->tasks);
  std::free(graph);
}

void DisposeTask(Task* task) noexcept {
  if (task->kind != TaskKind::kSplit) return;
  std::free(task->split.buffer);
  task->split.buffer = nullptr;
  if (task->split.child != nullptr) ReleaseComm(task->split.child);
  task->split.child = nullptr;
}

void SetLastError(const char* message) noexcept { g_last_error.store(message); }

const char* LastError() noexcept { return g_last_error.load(); }

void WaitForDeviceTasks(ncclComm* comm) noexcept {
  const timespec pause{0, 20 * 1000};
  while (comm->device_tasks.load() > 0 && comm->state.load() == kCommLive) {
    nanosleep(&pause, nullptr);
  }
}

ncclResult_t Submit(Task task) noexcept {
  if (t_group.depth == 0) {
    // The implicit group of one call: launched now.
    profiler::Launch(&task, 1);
    if (task.dev.active) {
      const ncclResult_t result = EnqueueDevice(&task, 1);
      profiler::Launched();
      return result;
    }
    if (task.kind != TaskKind::kInit) WaitForDeviceTasks(task.comm);
    int order = 0;
    const ncclResult_t result = RunTasks(&task, 1, &order);
    profiler::Launched();
    DisposeTask(&task);
    return result;
  }
  if (t_group.tasks == nullptr) {
    pthread_once(&g_key_once, CreateKey);
    pthread_setspecific(g_key, &t_group);
  }
  if (!Grow(reinterpret_cast<void**>(&t_group.tasks), &t_group.capacity, t_group.count + 1,
            sizeof(Task))) {
    DisposeTask(&task);
    return ncclSystemError;
  }
  RetainComm(task.comm);
  t_group.tasks[t_group.count++] = task;
  return ncclSuccess;
}

bool InGroup() noexcept { return t_group.depth > 0; }

ncclResult_t GroupStart() noexcept {
  ++t_group.depth;
  return ncclSuccess;
}

void NoteGroupError(ncclResult_t error) noexcept {
  if (t_group.depth > 0 && t_group.error == ncclSuccess) t_group.error = error;
}

ncclResult_t GroupEnd(bool simulate, float* estimated_us) noexcept {
  if (t_group.depth == 0) return ncclInvalidUsage;
  if (--t_group.depth > 0) return ncclSuccess;
  if (t_group.error != ncclSuccess) {
    const ncclResult_t error = t_group.error;
    ClearGroup();
    return error;
  }
  if (simulate) {
    float estimate = 0.0f;
    int kept = 0;
    for (int i = 0; i < t_group.count; ++i) {
      Task& t = t_group.tasks[i];
      if (t.kind == TaskKind::kInit || t.kind == TaskKind::kSplit) {
        t_group.tasks[kept++] = t;
        continue;
      }
      estimate += EstimateMicros(t);
      DisposeTask(&t);
      ReleaseComm(t.comm);
    }
    t_group.count = kept;
    if (estimated_us != nullptr) *estimated_us = estimate;
  }
  ncclResult_t result = ncclSuccess;
  profiler::Launch(t_group.tasks, t_group.count);
  if (HasDeviceTask(t_group.tasks, t_group.count)) {
    result = EndDeviceGroup();
    ClearGroup();
    return result;
  }
  for (int i = 0; i < t_group.count; ++i) {
    if (t_group.tasks[i].kind != TaskKind::kInit) WaitForDeviceTasks(t_group.tasks[i].comm);
  }
  if (t_group.count > 0) {
    if (!Grow(reinterpret_cast<void**>(&t_group.order), &t_group.order_capacity, t_group.count,
              sizeof(int))) {
      result = ncclSystemError;
    } else {
      result = RunTasks(t_group.tasks, t_group.count, t_group.order);
    }
  }
  ClearGroup();
  return result;
}

}  // namespace collwatch::cpu_nccl
