// Stream-ordered operations of the CUDA mode, the enqueue side. Per unit (one call or one
// group), on each stream it uses: copy CUDA inputs into pinned staging, launch the hold
// kernel (stream_hold_kernel.h), copy staged outputs back, record an event; then hand the
// batch to the progress thread (cuda_progress.cc), which runs the host engine on the
// staging copies and releases the streams. A collective that moves GPU to GPU has hold,
// move kernel, hold, move kernel, hold instead (cuda_ipc.cc). Also the staging, slot and
// event pools.
// Threading: EnqueueDeviceTasks on the calling thread; g_queue.mutex guards the pools and
// the inbox, shared with the progress thread.
#include "cpu_nccl/cuda_queue.h"

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cpu_nccl/comm.h"
#include "cpu_nccl/config.h"
#include "cpu_nccl/cuda_queue_internal.h"
#include "cpu_nccl/futex.h"

namespace collwatch::cpu_nccl {

// Constant-initialised: a constructor of another library may reach the CUDA mode before
// this file's dynamic initialisers would run.
constinit QueueState g_queue = {PTHREAD_MUTEX_INITIALIZER};

// Pinned staging of at least `bytes`, from the pool or newly allocated (outside the lock:
// cuMemHostAlloc is slow).
StagingBlock* AcquireBlock(const CudaDriver* d, uint64_t bytes, const char** message) noexcept {
  int size_class = 0;
  while ((kMinStagingBytes << size_class) < bytes && size_class + 1 < kSizeClasses) ++size_class;
  pthread_mutex_lock(&g_queue.mutex);
  StagingBlock* block = g_queue.free_blocks[size_class];
  if (block != nullptr) g_queue.free_blocks[size_class] = block->next;
  pthread_mutex_unlock(&g_queue.mutex);
  if (block != nullptr) return block;
  block = static_cast<StagingBlock*>(std::calloc(1, sizeof(StagingBlock)));
  if (block == nullptr) {
    *message = "CUDA mode: out of memory";
    return nullptr;
  }
  void* memory = nullptr;
  const CUresult r =
      d->MemHostAlloc(&memory, kMinStagingBytes << size_class, CU_MEMHOSTALLOC_PORTABLE);
  if (r != CUDA_SUCCESS) {
    std::free(block);
    *message = DescribeCudaError(d, "cuMemHostAlloc of staging memory", r);
    return nullptr;
  }
  block->memory = static_cast<uint8_t*>(memory);
  block->size_class = size_class;
  return block;
}

void FreeBatchArrays(DeviceBatch* b) noexcept {
  for (int i = 0; i < b->count; ++i) {
    if (b->tasks[i].kind == TaskKind::kColl) FreeIpcTransfer(b->tasks[i].coll.ipc);
  }
  std::free(b->tasks);
  std::free(b->order);
  std::free(b->streams);
  std::free(b->blocks);
  std::free(b);
}

void ReleaseBlock(StagingBlock* block) noexcept {
  pthread_mutex_lock(&g_queue.mutex);
  block->next = g_queue.free_blocks[block->size_class];
  g_queue.free_blocks[block->size_class] = block;
  pthread_mutex_unlock(&g_queue.mutex);
}

// Returns the staging, slots and events of a batch whose streams have passed it.
void RecycleBatch(DeviceBatch* b) noexcept {
  pthread_mutex_lock(&g_queue.mutex);
  for (int i = 0; i < b->nblocks; ++i) {
    StagingBlock* block = b->blocks[i];
    block->next = g_queue.free_blocks[block->size_class];
    g_queue.free_blocks[block->size_class] = block;
  }
  for (int k = 0; k < b->nstreams; ++k) {
    g_queue.free_slots[g_queue.nfree_slots++] = b->streams[k].slot;
    if (b->streams[k].done != nullptr && g_queue.nfree_events < g_queue.events_capacity) {
      g_queue.free_events[g_queue.nfree_events++] = b->streams[k].done;
    }
  }
  pthread_mutex_unlock(&g_queue.mutex);
  FreeBatchArrays(b);
}

namespace {

// Points the task's CUDA buffers at staging in `block`.
void PlaceInStaging(Task* t, StagingBlock* block) noexcept {
  uint8_t* in = block->memory;
  uint8_t* out = in + AlignStaging(t->dev.send_bytes);
  uint8_t* scalar = out + AlignStaging(t->dev.recv_bytes);
  if (t->kind == TaskKind::kColl) {
    if (t->dev.user_send != nullptr) t->coll.send = in;
    if (t->dev.user_recv != nullptr) t->coll.recv = out;
    if (t->dev.user_scalar != nullptr) t->coll.red.scalar = reinterpret_cast<uintptr_t>(scalar);
  } else {
    if (t->dev.user_send != nullptr) t->p2p.send = in;
    if (t->dev.user_recv != nullptr) t->p2p.recv = out;
  }
}

// Enqueues the batch's work on each of its streams. On failure, releases the kernels
// already launched (their streams go on) and returns the error.
CUresult EnqueueOnStreams(const CudaDriver* d, DeviceBatch* b, const char** message) noexcept {
  int launched = 0;
  CUresult r = CUDA_SUCCESS;
  const char* what = "";
  for (int k = 0; k < b->nstreams && r == CUDA_SUCCESS; ++k) {
    HeldStream& h = b->streams[k];
    for (int i = 0; i < b->count && r == CUDA_SUCCESS; ++i) {
      const Task& t = b->tasks[i];
      if (!t.dev.active || t.dev.stream != h.stream) continue;
      if (t.kind == TaskKind::kColl && t.coll.ipc != nullptr) continue;  // GPU to GPU later
      what = "cuMemcpyAsync of an input to staging";
      if (t.dev.user_send != nullptr) {
        const void* staged = t.kind == TaskKind::kColl ? t.coll.send : t.p2p.send;
        r = CopyAsync(d, const_cast<void*>(staged), t.dev.user_send, t.dev.send_bytes, h.stream);
      }
      if (r == CUDA_SUCCESS && t.dev.user_scalar != nullptr) {
        r = CopyAsync(d, reinterpret_cast<void*>(t.coll.red.scalar), t.dev.user_scalar,
                      DtypeSize(t.coll.dtype), h.stream);
      }
    }
    if (r != CUDA_SUCCESS) break;
    // A CUDA IPC task (alone in its batch) gets its move kernels between hold kernels, each
    // hold in front fetching the job the progress thread wrote before releasing it; the
    // jobs stay kNone unless it did (a release by an abort moves nothing).
    const IpcTransfer* ipc = h.holds == kIpcHoldKernels ? b->tasks[0].coll.ipc : nullptr;
    for (uint32_t hold = 0; hold < h.holds && r == CUDA_SUCCESS; ++hold) {
      void* ready = &g_queue.flags[h.slot].ready;
      void* release = &g_queue.flags[h.slot].release;
      uint32_t token = FirstHoldToken(h) + hold;
      what = "cuLaunchKernel of the stream-hold kernel";
      if (hold + 1 == h.holds) {
        void* params[] = {&ready, &release, &token};
        r = d->LaunchKernel(g_queue.hold, 1, 1, 1, 1, 1, 1, 0, h.stream, params, nullptr);
      } else {
        const int index = h.slot * kMoveJobsPerSlot + static_cast<int>(hold);
        DeviceMoveJob* job = &g_queue.jobs[index];
        *job = DeviceMoveJob{};
        CUdeviceptr device_job = g_queue.device_jobs + sizeof(DeviceMoveJob) * index;
        void* params[] = {&ready, &release, &token, &job, &device_job};
        r = d->LaunchKernel(g_queue.hold_then_fetch, 1, 1, 1, 1, 1, 1, 0, h.stream, params,
                            nullptr);
        if (r == CUDA_SUCCESS) {
          void* move_params[] = {&device_job};
          what = "cuLaunchKernel of the move kernel";
          r = d->LaunchKernel(g_queue.move, IpcMoveBlocks(ipc), 1, 1, kMoveThreadsPerBlock, 1, 1,
                              0, h.stream, move_params, nullptr);
        }
      }
      if (hold == 0 && r == CUDA_SUCCESS) ++launched;
    }
    if (r != CUDA_SUCCESS) break;
    for (int i = 0; i < b->count && r == CUDA_SUCCESS; ++i) {
      const Task& t = b->tasks[i];
      if (!t.dev.active || t.dev.stream != h.stream || t.dev.user_recv == nullptr) continue;
      if (t.kind == TaskKind::kColl && t.coll.ipc != nullptr) continue;
      what = "cuMemcpyAsync of an output from staging";
      const void* staged = t.kind == TaskKind::kColl ? t.coll.recv : t.p2p.recv;
      r = CopyAsync(d, t.dev.user_recv, staged, t.dev.recv_bytes, h.stream);
    }
    if (r == CUDA_SUCCESS) {
      what = "cuEventRecord";
      r = d->EventRecord(h.done, h.stream);
    }
  }
  if (r != CUDA_SUCCESS) {
    *message = DescribeCudaError(d, what, r);
    for (int k = 0; k < launched; ++k) {
      g_queue.flags[b->streams[k].slot].release.store(b->streams[k].token);
    }
  }
  return r;
}

}  // namespace

ncclResult_t EnqueueDeviceTasks(const CudaDriver* d, const Task* tasks, int count,
                                const char** message) noexcept {
  pthread_mutex_lock(&g_queue.mutex);
  ncclResult_t result = g_queue.set_up ? ncclSuccess : SetUpQueue(d, message);
  pthread_mutex_unlock(&g_queue.mutex);
  if (result != ncclSuccess) return result;
  // A captured call would run its host side once, at capture, and its hold kernel at every
  // replay: refuse it rather than hang or return stale data.
  for (int i = 0; i < count; ++i) {
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
    if (tasks[i].dev.active &&
        d->StreamIsCapturing(tasks[i].dev.stream, &capture) == CUDA_SUCCESS &&
        capture != CU_STREAM_CAPTURE_STATUS_NONE) {
      *message =
          "CUDA mode: NCCL calls captured into a CUDA graph are not supported (run the "
          "step without CUDA graphs, e.g. without torch.compile mode=\"reduce-overhead\")";
      return ncclInvalidUsage;
    }
  }

  auto* b = static_cast<DeviceBatch*>(std::calloc(1, sizeof(DeviceBatch)));
  if (b != nullptr) {
    b->tasks = static_cast<Task*>(std::malloc(sizeof(Task) * count));
    b->order = static_cast<int*>(std::malloc(sizeof(int) * count));
    b->streams = static_cast<HeldStream*>(std::calloc(count, sizeof(HeldStream)));
    b->blocks = static_cast<StagingBlock**>(std::calloc(count, sizeof(StagingBlock*)));
  }
  if (b == nullptr || b->tasks == nullptr || b->order == nullptr || b->streams == nullptr ||
      b->blocks == nullptr) {
    if (b != nullptr) FreeBatchArrays(b);
    *message = "CUDA mode: out of memory";
    return ncclSystemError;
  }
  std::memcpy(b->tasks, tasks, sizeof(Task) * count);
  for (int i = 0; i < count; ++i) {
    if (b->tasks[i].kind == TaskKind::kColl) b->tasks[i].coll.ipc = nullptr;
  }
  b->count = count;
  // GPU to GPU only for a collective alone in its unit: its stream then carries nothing
  // else between the hold kernels.
  const bool use_ipc = count == 1 && std::strcmp(SettingValue(Setting::kCpuNcclIpc), "1") == 0;
  SetStage(b, BatchStage::kWaitReady);
  b->result = ncclSuccess;

  // Staging for every CUDA buffer; the distinct streams in order of first use.
  for (int i = 0; i < count && result == ncclSuccess; ++i) {
    Task& t = b->tasks[i];
    if (!t.dev.active) continue;
    // The same choice on every rank: it depends on the op and the settings only (a rank
    // whose buffers cannot be shared fails the op with an asynchronous error).
    if (use_ipc && IpcCapable(t)) {
      t.coll.ipc = NewIpcTransfer(d, t, message);
      if (t.coll.ipc == nullptr) {
        result = ncclSystemError;
        break;
      }
    } else {
      const uint64_t bytes =
          AlignStaging(t.dev.send_bytes) + AlignStaging(t.dev.recv_bytes) + kStagingAlign;
      StagingBlock* block = AcquireBlock(d, bytes, message);
      if (block == nullptr) {
        result = ncclUnhandledCudaError;
        break;
      }
      b->blocks[b->nblocks++] = block;
      PlaceInStaging(&t, block);
    }
    int k = 0;
    while (k < b->nstreams && b->streams[k].stream != t.dev.stream) ++k;
    if (k == b->nstreams) b->streams[b->nstreams++].stream = t.dev.stream;
  }
  int slots_taken = 0;
  if (result == ncclSuccess) {
    pthread_mutex_lock(&g_queue.mutex);
    for (int k = 0; k < b->nstreams && g_queue.nfree_slots > 0; ++k, ++slots_taken) {
      HeldStream& h = b->streams[k];
      h.slot = g_queue.free_slots[--g_queue.nfree_slots];
      h.holds = b->tasks[0].kind == TaskKind::kColl && b->tasks[0].coll.ipc != nullptr
                    ? kIpcHoldKernels
                    : 1;
      g_queue.next_token += h.holds;
      h.token = g_queue.next_token - 1;
      if (h.holds == kIpcHoldKernels) IpcAttachHolds(b->tasks[0].coll.ipc, h.slot, FirstHoldToken(h));
      h.done = g_queue.nfree_events > 0 ? g_queue.free_events[--g_queue.nfree_events] : nullptr;
    }
    pthread_mutex_unlock(&g_queue.mutex);
    if (slots_taken < b->nstreams) {
      *message = "CUDA mode: more than 4096 stream operations in flight in this process";
      result = ncclInternalError;
    }
  }
  for (int k = 0; k < slots_taken && result == ncclSuccess; ++k) {
    if (b->streams[k].done == nullptr) {
      const CUresult r = d->EventCreate(&b->streams[k].done, CU_EVENT_DISABLE_TIMING);
      if (r != CUDA_SUCCESS) {
        *message = DescribeCudaError(d, "cuEventCreate", r);
        result = ncclUnhandledCudaError;
      }
    }
  }
  if (result != ncclSuccess) {
    b->nstreams = slots_taken;
    RecycleBatch(b);  // nothing was enqueued: everything goes back to the pools
    return result;
  }
  if (EnqueueOnStreams(d, b, message) != CUDA_SUCCESS) {
    // Copies may be pending on the streams: the staging is left to them (leaked), the
    // rest freed. A driver failure here is rare and usually fatal to the context anyway.
    FreeBatchArrays(b);
    return ncclUnhandledCudaError;
  }
  for (int i = 0; i < count; ++i) {
    RetainComm(b->tasks[i].comm);
    b->tasks[i].comm->device_tasks.fetch_add(1);
  }
  pthread_mutex_lock(&g_queue.mutex);
  b->serial = g_queue.next_serial++;
  TraceBatch("enqueue", b);
  if (g_queue.inbox_tail != nullptr) {
    g_queue.inbox_tail->next = b;
  } else {
    g_queue.inbox_head = b;
  }
  g_queue.inbox_tail = b;
  pthread_mutex_unlock(&g_queue.mutex);
  g_queue.bell.fetch_add(1);
  FutexWakeAll(&g_queue.bell);
  return ncclSuccess;
}

}  // namespace collwatch::cpu_nccl
