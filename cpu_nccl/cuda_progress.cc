// The CUDA mode's progress thread: takes enqueued batches from the inbox, starts each once
// its streams' hold kernels run and no earlier batch of its communicators is unfinished,
// steps the host engine on the staging copies, releases the streams, and recycles a batch
// once its output copies are done. Also the set-up that loads the kernels and starts it.
// Threading: one progress thread per process, with every signal blocked; SetUpQueue runs
// once, under g_queue.mutex, on a user thread with the program's CUDA context.
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cpu_nccl/comm.h"
#include "cpu_nccl/config.h"
#include "cpu_nccl/cuda_queue_internal.h"
#include "cpu_nccl/device_move_kernel.h"
#include "cpu_nccl/engine.h"
#include "cpu_nccl/futex.h"
#include "cpu_nccl/stream_hold_kernel.h"

namespace collwatch::cpu_nccl {
namespace {

// A forked child has no progress thread and may not use the parent's CUDA objects: it
// starts from scratch (and fails like any CUDA use after fork would).
void ResetAfterFork() noexcept {
  const pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  g_queue.mutex = fresh;
  g_queue.set_up = false;
  g_queue.inbox_head = g_queue.inbox_tail = nullptr;
  g_queue.nfree_slots = 0;
  g_queue.nfree_events = 0;
  std::memset(g_queue.free_blocks, 0, sizeof g_queue.free_blocks);
}

// Each stream's first hold kernel runs.
bool StreamsReached(const DeviceBatch* b) noexcept {
  for (int k = 0; k < b->nstreams; ++k) {
    const HeldStream& h = b->streams[k];
    if (g_queue.flags[h.slot].ready.load(std::memory_order_acquire) != FirstHoldToken(h)) return false;
  }
  return true;
}

bool SharesComm(const DeviceBatch* a, const DeviceBatch* b) noexcept {
  for (int i = 0; i < a->count; ++i) {
    for (int j = 0; j < b->count; ++j) {
      if (a->tasks[i].comm == b->tasks[j].comm) return true;
    }
  }
  return false;
}

// Operations of a communicator run one unit at a time, in issue order.
bool BlockedByEarlier(const DeviceBatch* head, const DeviceBatch* b) noexcept {
  for (const DeviceBatch* e = head; e != b; e = e->next) {
    if (e->stage != BatchStage::kWaitCopies && SharesComm(e, b)) return true;
  }
  return false;
}

void StartBatch(DeviceBatch* b) noexcept {
  for (int i = 0; i < b->count; ++i) {
    Task& t = b->tasks[i];
    t.comm->running.fetch_add(1);
    t.prev = -1;
    t.done = false;
    t.result = ncclSuccess;
    t.blocked_on = kWaitAny;
  }
  if (b->count > 1) LinkQueues(b->tasks, b->count, b->order);
  SetStage(b, BatchStage::kRunning);
  Trace("start batch %llu", static_cast<unsigned long long>(b->serial));
}

// One pass over the batch's tasks; true once all are done or one failed.
bool StepBatch(DeviceBatch* b, bool* moved) noexcept {
  int remaining = 0;
  for (int i = 0; i < b->count; ++i) {
    Task& t = b->tasks[i];
    if (t.done) continue;
    if (t.prev >= 0 && !b->tasks[t.prev].done) {
      ++remaining;
      continue;
    }
    const Status st = ProgressTask(t, moved);
    if (st == Status::kDone) {
      t.done = true;
      *moved = true;
    } else if (st == Status::kFailed) {
      b->result = t.result != ncclSuccess ? t.result : ncclInternalError;
      return true;
    } else {
      ++remaining;
    }
  }
  return remaining == 0;
}

void FinishBatch(DeviceBatch* b) noexcept {
  for (int i = 0; i < b->count; ++i) {
    ncclComm* comm = b->tasks[i].comm;
    if (b->result != ncclSuccess) {
      int32_t none = ncclSuccess;
      comm->async_error.compare_exchange_strong(none, b->result);
    }
    comm->running.fetch_sub(1);
    comm->device_tasks.fetch_sub(1);
    ReleaseComm(comm);
  }
  // Said before the streams go on: whoever waits on them then finds the line written.
  Trace("end batch %llu: %s", static_cast<unsigned long long>(b->serial),
        b->result == ncclSuccess ? "done, releasing its streams" : "failed, releasing its streams");
  // The streams go on either way (NCCL's do after an abort too); errors are asynchronous.
  for (int k = 0; k < b->nstreams; ++k) {
    g_queue.flags[b->streams[k].slot].release.store(b->streams[k].token);
  }
  SetStage(b, BatchStage::kWaitCopies);
}

bool CopiesDone(const DeviceBatch* b) noexcept {
  for (int k = 0; k < b->nstreams; ++k) {
    if (g_queue.driver->EventQuery(b->streams[k].done) == CUDA_ERROR_NOT_READY) return false;
  }
  return true;
}

void* ProgressMain(void*) noexcept {
  prctl(PR_SET_TIMERSLACK, 1000UL);  // short sleeps while peers are awaited: 1 us slack
  g_queue.driver->CtxSetCurrent(g_queue.context);
  DeviceBatch* head = nullptr;
  DeviceBatch** tail_link = &head;
  int idle_rounds = 0;
  for (;;) {
    const uint32_t bell = g_queue.bell.load();
    pthread_mutex_lock(&g_queue.mutex);
    if (g_queue.inbox_head != nullptr) {
      *tail_link = g_queue.inbox_head;
      tail_link = &g_queue.inbox_tail->next;
      g_queue.inbox_head = g_queue.inbox_tail = nullptr;
    }
    pthread_mutex_unlock(&g_queue.mutex);
    if (head == nullptr) {
      FutexWait(&g_queue.bell, bell, nullptr);
      continue;
    }
    bool moved = false;
    for (DeviceBatch** link = &head; *link != nullptr;) {
      DeviceBatch* b = *link;
      if (b->stage == BatchStage::kWaitReady && StreamsReached(b) && !BlockedByEarlier(head, b)) {
        StartBatch(b);
        moved = true;
      }
      if (b->stage == BatchStage::kRunning && StepBatch(b, &moved)) {
        FinishBatch(b);
        moved = true;
      }
      if (b->stage == BatchStage::kWaitCopies && CopiesDone(b)) {
        *link = b->next;
        if (tail_link == &b->next) tail_link = link;
        RecycleBatch(b);
        moved = true;
        continue;
      }
      ReportSlow(b);
      link = &b->next;
    }
    if (moved) {
      idle_rounds = 0;
      continue;
    }
    // Spin briefly (a peer or the GPU is usually about to move), then sleep a little
    // longer the longer nothing moves; a new enqueue wakes the sleep at once.
    ++idle_rounds;
    if (idle_rounds < 64) {
      CpuRelax();
      continue;
    }
    const timespec pause{0, idle_rounds < 4096 ? 5 * 1000 : 200 * 1000};
    FutexWait(&g_queue.bell, bell, &pause);
  }
  return nullptr;
}

}  // namespace

// Loads the hold kernel, allocates the flag words and starts the progress thread; called
// once per process under g_queue.mutex, on a thread with the program's CUDA context.
ncclResult_t SetUpQueue(const CudaDriver* d, const char** message) noexcept {
  CUcontext context = nullptr;
  if (d->CtxGetCurrent(&context) != CUDA_SUCCESS || context == nullptr) {
    *message =
        "CUDA mode: the calling thread has no current CUDA context (select the device, "
        "e.g. cudaSetDevice, before the first NCCL call on CUDA buffers)";
    return ncclInvalidUsage;
  }
  CUmoduleLoadingMode loading = CU_MODULE_EAGER_LOADING;
  if (d->ModuleGetLoadingMode(&loading) == CUDA_SUCCESS && loading == CU_MODULE_LAZY_LOADING) {
    // Loading a kernel lazily waits for running kernels: behind a held stream, every first
    // launch of a kernel in this process would hang until the collective completed.
    *message =
        "CUDA mode: CUDA lazy module loading is on in this process; set "
        "CUDA_MODULE_LOADING=EAGER before CUDA starts (libnccl.so.2 of collwatch sets it "
        "when it is loaded before CUDA is initialised)";
    return ncclInvalidUsage;
  }
  CUmodule module = nullptr;
  CUresult r = d->ModuleLoadData(&module, kStreamHoldPtx);
  if (r == CUDA_SUCCESS) r = d->ModuleGetFunction(&g_queue.hold, module, kStreamHoldKernelName);
  if (r != CUDA_SUCCESS) {
    *message = DescribeCudaError(d, "loading the stream-hold kernel (cuModuleLoadData)", r);
    return ncclUnhandledCudaError;
  }
  void* flags = nullptr;
  r = d->MemHostAlloc(&flags, sizeof(HoldFlags) * kFlagSlots,
                      CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
  if (r != CUDA_SUCCESS) {
    *message = DescribeCudaError(d, "cuMemHostAlloc of the stream-hold flags", r);
    return ncclUnhandledCudaError;
  }
  std::memset(flags, 0, sizeof(HoldFlags) * kFlagSlots);
  g_queue.flags = static_cast<HoldFlags*>(flags);
  // One launch that exits at once (release already at its token) on a private stream: the
  // kernel is resident before any stream is held.
  CUstream warm = nullptr;
  r = d->StreamCreate(&warm, CU_STREAM_NON_BLOCKING);
  if (r == CUDA_SUCCESS) {
    HoldFlags* f = &g_queue.flags[0];
    f->release.store(1);
    uint32_t token = 1;
    void* ready = &f->ready;
    void* release = &f->release;
    void* params[] = {&ready, &release, &token};
    r = d->LaunchKernel(g_queue.hold, 1, 1, 1, 1, 1, 1, 0, warm, params, nullptr);
    if (r == CUDA_SUCCESS) r = d->StreamSynchronize(warm);
    d->StreamDestroy(warm);
  }
  if (r != CUDA_SUCCESS) {
    *message = DescribeCudaError(d, "the first launch of the stream-hold kernel", r);
    return ncclUnhandledCudaError;
  }
  void* jobs = nullptr;
  r = d->MemHostAlloc(&jobs, sizeof(DeviceMoveJob) * kMoveJobsPerSlot * kFlagSlots,
                      CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
  if (r != CUDA_SUCCESS) {
    *message = DescribeCudaError(d, "cuMemHostAlloc of the move kernels' jobs", r);
    return ncclUnhandledCudaError;
  }
  std::memset(jobs, 0, sizeof(DeviceMoveJob) * kMoveJobsPerSlot * kFlagSlots);
  g_queue.jobs = static_cast<DeviceMoveJob*>(jobs);
  r = d->MemAlloc(&g_queue.device_jobs, sizeof(DeviceMoveJob) * kMoveJobsPerSlot * kFlagSlots);
  if (r != CUDA_SUCCESS) {
    *message = DescribeCudaError(d, "cuMemAlloc of the move kernels' jobs", r);
    return ncclUnhandledCudaError;
  }
  CUmodule move_module = nullptr;
  r = d->ModuleLoadData(&move_module, kMovePtx);
  if (r == CUDA_SUCCESS) r = d->ModuleGetFunction(&g_queue.move, move_module, kMoveKernelName);
  if (r == CUDA_SUCCESS) {
    r = d->ModuleGetFunction(&g_queue.hold_then_fetch, move_module, kHoldThenFetchKernelName);
  }
  if (r != CUDA_SUCCESS) {
    *message = DescribeCudaError(d, "loading the move kernels (cuModuleLoadData)", r);
    return ncclUnhandledCudaError;
  }
  g_queue.context = context;
  g_queue.driver = d;
  g_queue.trace = std::strcmp(SettingValue(Setting::kCpuNcclTrace), "1") == 0;
  g_queue.next_token = 2;
  g_queue.nfree_slots = 0;
  for (int s = kFlagSlots - 1; s >= 0; --s) g_queue.free_slots[g_queue.nfree_slots++] = s;
  g_queue.events_capacity = kFlagSlots;
  g_queue.free_events = static_cast<CUevent*>(std::calloc(kFlagSlots, sizeof(CUevent)));
  if (g_queue.free_events == nullptr) {
    *message = "CUDA mode: out of memory";
    return ncclSystemError;
  }
  // The progress thread takes no signals: they stay with the program's threads.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  pthread_t thread;
  const int created = pthread_create(&thread, nullptr, ProgressMain, nullptr);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (created != 0) {
    *message = "CUDA mode: cannot start the progress thread";
    return ncclSystemError;
  }
  pthread_detach(thread);
  pthread_atfork(nullptr, nullptr, ResetAfterFork);
  g_queue.set_up = true;
  return ncclSuccess;
}

}  // namespace collwatch::cpu_nccl
