// Stream-ordered operations of the CUDA mode. Per unit (one call or one group), on each
// stream it uses: copy CUDA inputs into pinned staging, launch the hold kernel
// (stream_hold_kernel.h), copy staged outputs back, record an event. The progress thread
// polls the kernels' ready words, runs the host engine on the staging copies, writes the
// release words, and recycles staging once the events say the output copies are done.
// Threading: g_queue.mutex guards the pools and the inbox (user threads and the progress
// thread); batches in the progress thread's list belong to it alone.
#include "cpu_nccl/cuda_queue.h"

#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cpu_nccl/config.h"
#include "cpu_nccl/device_reduce_ptx.h"
#include "cpu_nccl/engine.h"
#include "cpu_nccl/futex.h"
#include "cpu_nccl/stream_hold_kernel.h"

namespace collwatch::cpu_nccl {
namespace {

constexpr int kFlagSlots = 4096;  // hold kernels in flight per process
constexpr size_t kMinStagingBytes = 64 * 1024;
constexpr int kSizeClasses = 40;  // 64 KiB << 39: more than any host has
constexpr uint64_t kStagingAlign = 256;

// The words one hold kernel and the progress thread meet on, each on its own cache line.
struct alignas(64) HoldFlags {
  std::atomic<uint32_t> ready;  // written by the kernel: it runs, its inputs are staged
  uint32_t pad0[15];
  std::atomic<uint32_t> release;  // written by the progress thread: the kernel may exit
  uint32_t pad1[15];
};
static_assert(sizeof(HoldFlags) == 128);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

struct StagingBlock {
  StagingBlock* next;
  uint8_t* memory;  // pinned host memory, kMinStagingBytes << size_class bytes
  int size_class;
};

struct HeldStream {
  CUstream stream;
  CUevent done;  // after the output copies: the staging may be reused once it completed
  int slot;
  uint32_t token;
};

enum class BatchStage : uint8_t { kWaitReady, kRunning, kWaitCopies };

struct DeviceBatch {
  DeviceBatch* next;
  uint64_t serial;     // enqueue order in this process, for the trace
  double stage_since;  // seconds (CLOCK_MONOTONIC) when the stage began, for the trace
  bool reported_slow;
  BatchStage stage;
  ncclResult_t result;
  int count;
  int nstreams;
  int nblocks;
  Task* tasks;
  int* order;
  HeldStream* streams;
  StagingBlock** blocks;
};

struct QueueState {
  pthread_mutex_t mutex;
  const CudaDriver* driver;
  CUstream copy_stream;  // the progress thread's CUDA IPC copies and reductions
  CUfunction sum_f32;
  CUfunction sum_bf16;
  bool set_up;  // module loaded, flags allocated, progress thread started
  CUcontext context;
  CUfunction hold;
  HoldFlags* flags;
  int free_slots[kFlagSlots];
  int nfree_slots;
  uint32_t next_token;
  StagingBlock* free_blocks[kSizeClasses];
  CUevent* free_events;
  int nfree_events;
  int events_capacity;
  DeviceBatch* inbox_head;
  DeviceBatch* inbox_tail;
  std::atomic<uint32_t> bell;  // bumped on every enqueue; the idle progress thread sleeps on it
  bool trace;                  // COLLWATCH_CPU_NCCL_TRACE=1, read at set-up
  uint64_t next_serial;        // under mutex
};

QueueState g_queue = {PTHREAD_MUTEX_INITIALIZER};

// ---- CUDA IPC transfers (COLLWATCH_CPU_NCCL_IPC) ----

// What a rank publishes of its input buffer: the allocation's IPC handle and the offset.
struct IpcBufferInfo {
  uint32_t usable;  // cuIpcGetMemHandle succeeded
  uint32_t pid;
  uint64_t offset;  // of the buffer in its allocation
  CUipcMemHandle handle;
};
static_assert(sizeof(IpcBufferInfo) <= kIpcDescriptorBytes);

// A peer allocation opened in this process (progress thread only); never closed, as
// PyTorch's caching allocator keeps its segments for the life of the process.
struct OpenedPeerBuffer {
  uint32_t pid;
  CUipcMemHandle handle;
  CUdeviceptr base;
};
constexpr int kMaxOpenedPeerBuffers = 4096;
OpenedPeerBuffer g_opened[kMaxOpenedPeerBuffers];
int g_nopened = 0;

}  // namespace

enum class IpcStage : uint8_t {
  kStart,           // descriptors known: choose GPU to GPU or the staged fallback
  kCopying,         // GPU to GPU copies or reduction running on the copy stream
  kStagingIn,       // fallback: input being copied to pinned staging
  kHostCollective,  // fallback: the host engine runs the collective on the staging
  kStagingOut,      // fallback: output being copied from staging
};

struct IpcTransfer {
  OpKind kind;  // kAllGather or kReduceScatter (sum)
  int dtype;
  Reduction red;
  IpcStage stage;
  StagingBlock* staging;      // fallback only
  CollState host_collective;  // fallback only
  union {
    IpcBufferInfo info;
    uint8_t raw[kIpcDescriptorBytes];
  } own;
  IpcBufferInfo* peers;  // nranks entries, filled in phase 0
  int rank;
  int nranks;
  const uint8_t* send;
  uint8_t* recv;
  uint64_t block_bytes;  // one rank's part: the all-gather input, the reduce-scatter output
  uint64_t count;        // elements in one rank's part
  CUevent copies_done;   // the last work enqueued on the copy stream for this transfer
};

const void* IpcOwnDescriptor(const IpcTransfer* transfer) noexcept { return transfer->own.raw; }

void IpcNotePeerDescriptor(IpcTransfer* transfer, int peer, const void* descriptor) noexcept {
  std::memcpy(&transfer->peers[peer], descriptor, sizeof(IpcBufferInfo));
}

namespace {

void Trace(const char* format, ...) noexcept __attribute__((format(printf, 1, 2)));

// The device address of a peer's buffer in this process, opening its allocation once.
CUdeviceptr OpenPeerBuffer(const IpcBufferInfo& info, const char** message) noexcept {
  for (int i = 0; i < g_nopened; ++i) {
    const OpenedPeerBuffer& o = g_opened[i];
    if (o.pid == info.pid && std::memcmp(&o.handle, &info.handle, sizeof o.handle) == 0) {
      return o.base + info.offset;
    }
  }
  if (g_nopened == kMaxOpenedPeerBuffers) {
    *message = "CUDA IPC: more than 4096 peer allocations opened";
    return 0;
  }
  CUdeviceptr base = 0;
  const CUresult r =
      g_queue.driver->IpcOpenMemHandle(&base, info.handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  if (r != CUDA_SUCCESS) {
    *message = DescribeCudaError(g_queue.driver, "cuIpcOpenMemHandle of a peer's buffer", r);
    return 0;
  }
  g_opened[g_nopened++] = OpenedPeerBuffer{info.pid, info.handle, base};
  Trace("  opened an allocation of pid %u at %p (%d open)", info.pid, reinterpret_cast<void*>(base),
        g_nopened);
  return base + info.offset;
}

// Collectives the GPU does between the ranks' buffers: all-gathers, and reduce-scatters
// that sum float32 or bfloat16 over at most 8 ranks (the reduction kernels' limits).
bool IpcCapable(const Task& t) noexcept {
  if (t.kind != TaskKind::kColl || t.dev.user_send == nullptr || t.dev.user_recv == nullptr) {
    return false;
  }
  const CollState& s = t.coll;
  if (s.kind == OpKind::kAllGather) return true;
  return s.kind == OpKind::kReduceScatter && s.red.base == BaseOp::kSum && !s.red.premul &&
         !s.red.postdiv && (s.dtype == ncclFloat32 || s.dtype == ncclBfloat16) &&
         t.comm->nranks <= kMaxDeviceReduceSources;
}

// Describes `send` for the peers; an IpcTransfer for an all-gather of `block_bytes` per
// rank, or nullptr when memory runs out.
IpcTransfer* NewIpcTransfer(const CudaDriver* d, const Task& t, const char** message) noexcept {
  auto* x = static_cast<IpcTransfer*>(std::calloc(1, sizeof(IpcTransfer)));
  if (x == nullptr) return nullptr;
  x->nranks = t.comm->nranks;
  x->rank = t.comm->rank;
  x->peers = static_cast<IpcBufferInfo*>(std::calloc(x->nranks, sizeof(IpcBufferInfo)));
  if (x->peers == nullptr ||
      d->EventCreate(&x->copies_done, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
    std::free(x->peers);
    std::free(x);
    *message = "CUDA IPC: out of memory";
    return nullptr;
  }
  x->kind = t.coll.kind;
  x->dtype = t.coll.dtype;
  x->red = t.coll.red;
  x->count = t.coll.count;
  x->send = static_cast<const uint8_t*>(t.dev.user_send);
  x->recv = static_cast<uint8_t*>(t.dev.user_recv);
  x->block_bytes = t.coll.count * DtypeSize(t.coll.dtype);
  CUdeviceptr base = 0;
  const auto address = reinterpret_cast<CUdeviceptr>(t.dev.user_send);
  IpcBufferInfo& info = x->own.info;
  info.pid = static_cast<uint32_t>(getpid());
  if (d->PointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, address) ==
          CUDA_SUCCESS &&
      d->IpcGetMemHandle(&info.handle, base) == CUDA_SUCCESS) {
    info.usable = 1;
    info.offset = address - base;
  }
  return x;
}

void ReleaseBlock(StagingBlock* block) noexcept;

CUevent IpcCopiesEvent(const IpcTransfer* x) noexcept { return x->copies_done; }

void FreeIpcTransfer(IpcTransfer* x) noexcept {
  if (x == nullptr) return;
  if (x->staging != nullptr) ReleaseBlock(x->staging);
  if (x->copies_done != nullptr) g_queue.driver->EventDestroy(x->copies_done);
  std::free(x->peers);
  std::free(x);
}

double MonotonicSeconds() noexcept {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// One line on stderr, "collwatch cpu_nccl[pid] ...", when tracing is on.
void Trace(const char* format, ...) noexcept {
  if (!g_queue.trace) return;
  char line[512];
  int n = std::snprintf(line, sizeof line, "collwatch cpu_nccl[%d] ", static_cast<int>(getpid()));
  va_list args;
  va_start(args, format);
  n += std::vsnprintf(line + n, sizeof line - static_cast<size_t>(n) - 1, format, args);
  va_end(args);
  if (n > static_cast<int>(sizeof line) - 2) n = static_cast<int>(sizeof line) - 2;
  line[n++] = '\n';
  const ssize_t written = write(STDERR_FILENO, line, static_cast<size_t>(n));
  (void)written;  // a lost trace line is no error
}

// "AllGather count 1024 dtype 7 comm 0x.. rank 0/2 stream 0x.. ipc" of a batch's tasks.
void TraceBatch(const char* what, const DeviceBatch* b) noexcept {
  if (!g_queue.trace) return;
  for (int i = 0; i < b->count; ++i) {
    const Task& t = b->tasks[i];
    const bool coll = t.kind == TaskKind::kColl;
    Trace("%s batch %llu task %d/%d: %s%d count %llu dtype %d comm %p rank %d/%d stream %p%s", what,
          static_cast<unsigned long long>(b->serial), i, b->count,
          coll ? "coll kind " : (t.kind == TaskKind::kSend ? "send peer " : "recv peer "),
          coll ? static_cast<int>(t.coll.kind) : t.p2p.peer,
          static_cast<unsigned long long>(coll ? t.coll.count : t.p2p.bytes),
          coll ? t.coll.dtype : -1, static_cast<void*>(t.comm), t.comm->rank, t.comm->nranks,
          static_cast<void*>(t.dev.stream), coll && t.coll.ipc != nullptr ? " ipc" : "");
  }
}

void SetStage(DeviceBatch* b, BatchStage stage) noexcept {
  b->stage = stage;
  b->reported_slow = false;
  if (g_queue.trace) b->stage_since = MonotonicSeconds();
}

// Says once per stage when a batch has waited more than 5 s (trace on only).
void ReportSlow(DeviceBatch* b) noexcept {
  if (!g_queue.trace || b->reported_slow || MonotonicSeconds() - b->stage_since < 5.0) return;
  b->reported_slow = true;
  const char* why = "waits for its output copies";
  if (b->stage == BatchStage::kWaitReady) {
    why = "waits for its streams to reach it, or for an earlier operation of its communicator";
  } else if (b->stage == BatchStage::kRunning) {
    why = "waits for its peers (or its GPU copies)";
  }
  Trace("batch %llu %s for 5 s", static_cast<unsigned long long>(b->serial), why);
  if (b->stage == BatchStage::kRunning) {
    for (int i = 0; i < b->count; ++i) {
      const Task& t = b->tasks[i];
      Trace("  task %d done %d blocked_on %d coll stage %d phase %d", i, t.done ? 1 : 0,
            t.blocked_on, t.kind == TaskKind::kColl ? static_cast<int>(t.coll.stage) : -1,
            t.kind == TaskKind::kColl ? static_cast<int>(t.coll.phase) : -1);
    }
  }
}

uint64_t AlignStaging(uint64_t bytes) noexcept {
  return (bytes + kStagingAlign - 1) / kStagingAlign * kStagingAlign;
}

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

bool StreamsReached(const DeviceBatch* b) noexcept {
  for (int k = 0; k < b->nstreams; ++k) {
    const HeldStream& h = b->streams[k];
    if (g_queue.flags[h.slot].ready.load(std::memory_order_acquire) != h.token) return false;
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
  // An aborted transfer may still have copies on the copy stream (an event never recorded
  // counts as complete).
  for (int i = 0; i < b->count; ++i) {
    const Task& t = b->tasks[i];
    if (t.kind == TaskKind::kColl && t.coll.ipc != nullptr &&
        g_queue.driver->EventQuery(IpcCopiesEvent(t.coll.ipc)) == CUDA_ERROR_NOT_READY) {
      return false;
    }
  }
  return true;
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

// Loads the hold kernel, allocates the flag words and starts the progress thread; called
// once per process under g_queue.mutex, on a thread with the program's CUDA context.
ncclResult_t SetUp(const CudaDriver* d, const char** message) noexcept {
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
  static char reduce_ptx[16384];  // only the first SetUp (under the mutex) writes it
  CUmodule reduce_module = nullptr;
  if (!BuildDeviceReducePtx(reduce_ptx, sizeof reduce_ptx)) {
    *message = "CUDA mode: the reduction kernels' PTX does not fit its buffer";
    return ncclInternalError;
  }
  r = d->ModuleLoadData(&reduce_module, reduce_ptx);
  if (r == CUDA_SUCCESS)
    r = d->ModuleGetFunction(&g_queue.sum_f32, reduce_module, kSumFloat32KernelName);
  if (r == CUDA_SUCCESS) {
    r = d->ModuleGetFunction(&g_queue.sum_bf16, reduce_module, kSumBfloat16KernelName);
  }
  if (r != CUDA_SUCCESS) {
    *message = DescribeCudaError(d, "loading the reduction kernels (cuModuleLoadData)", r);
    return ncclUnhandledCudaError;
  }
  r = d->StreamCreate(&g_queue.copy_stream, CU_STREAM_NON_BLOCKING);
  if (r != CUDA_SUCCESS) {
    *message = DescribeCudaError(d, "cuStreamCreate of the copy stream", r);
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

CUresult CopyAsync(const CudaDriver* d, void* dst, const void* src, uint64_t bytes,
                   CUstream stream) noexcept {
  if (bytes == 0) return CUDA_SUCCESS;
  return d->MemcpyAsync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src),
                        bytes, stream);
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
    void* ready = &g_queue.flags[h.slot].ready;
    void* release = &g_queue.flags[h.slot].release;
    void* params[] = {&ready, &release, &h.token};
    what = "cuLaunchKernel of the stream-hold kernel";
    r = d->LaunchKernel(g_queue.hold, 1, 1, 1, 1, 1, 1, 0, h.stream, params, nullptr);
    if (r != CUDA_SUCCESS) break;
    ++launched;
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

namespace {

// Polls the copy stream's work for `x`: kDone, kBlocked or kFailed (with the message).
Status CopiesStatus(const IpcTransfer* x, const char* what) noexcept {
  const CUresult r = g_queue.driver->EventQuery(x->copies_done);
  if (r == CUDA_ERROR_NOT_READY) return Status::kBlocked;
  if (r == CUDA_SUCCESS) return Status::kDone;
  SetLastError(DescribeCudaError(g_queue.driver, what, r));
  return Status::kFailed;
}

// Enqueues a copy on the copy stream and records copies_done after it.
Status CopyOnCopyStream(IpcTransfer* x, void* dst, const void* src, uint64_t bytes) noexcept {
  const CudaDriver* d = g_queue.driver;
  CUresult r = CopyAsync(d, dst, src, bytes, g_queue.copy_stream);
  if (r == CUDA_SUCCESS) r = d->EventRecord(x->copies_done, g_queue.copy_stream);
  if (r != CUDA_SUCCESS) {
    SetLastError(DescribeCudaError(d, "cuMemcpyAsync to or from staging", r));
    return Status::kFailed;
  }
  return Status::kBlocked;
}

uint64_t IpcSendBytes(const IpcTransfer* x) noexcept {
  return x->kind == OpKind::kReduceScatter ? x->block_bytes * x->nranks : x->block_bytes;
}

uint64_t IpcRecvBytes(const IpcTransfer* x) noexcept {
  return x->kind == OpKind::kAllGather ? x->block_bytes * x->nranks : x->block_bytes;
}

// Every rank sees the same descriptors, so every rank falls back together when one buffer
// cannot be shared (e.g. PyTorch's expandable segments, managed memory).
Status StartStagedFallback(IpcTransfer* x) noexcept {
  const char* message = "";
  x->staging = AcquireBlock(
      g_queue.driver, AlignStaging(IpcSendBytes(x)) + AlignStaging(IpcRecvBytes(x)), &message);
  if (x->staging == nullptr) {
    SetLastError(message);
    return Status::kFailed;
  }
  x->stage = IpcStage::kStagingIn;
  return CopyOnCopyStream(x, x->staging->memory, x->send, IpcSendBytes(x));
}

// Enqueues the GPU to GPU copies (all-gather) or the reduction kernel (reduce-scatter).
Status StartGpuToGpu(IpcTransfer* x) noexcept {
  const CudaDriver* d = g_queue.driver;
  CUdeviceptr sources[kMaxDeviceReduceSources] = {};
  for (int p = 0; p < x->nranks; ++p) {
    const char* message = "";
    CUdeviceptr source = reinterpret_cast<CUdeviceptr>(x->send);
    if (p != x->rank) {
      source = OpenPeerBuffer(x->peers[p], &message);
      if (source == 0) {
        SetLastError(message);
        return Status::kFailed;
      }
    }
    if (x->kind == OpKind::kReduceScatter) {
      sources[p] = source + static_cast<uint64_t>(x->rank) * x->block_bytes;  // our block
      continue;
    }
    const CUresult r = d->MemcpyAsync(reinterpret_cast<CUdeviceptr>(x->recv + p * x->block_bytes),
                                      source, x->block_bytes, g_queue.copy_stream);
    if (r != CUDA_SUCCESS) {
      SetLastError(DescribeCudaError(d, "cuMemcpyAsync between ranks", r));
      return Status::kFailed;
    }
  }
  if (x->kind == OpKind::kReduceScatter) {
    CUdeviceptr out = reinterpret_cast<CUdeviceptr>(x->recv);
    uint32_t nsources = static_cast<uint32_t>(x->nranks);
    void* params[3 + kMaxDeviceReduceSources] = {&out};
    for (int k = 0; k < kMaxDeviceReduceSources; ++k) params[1 + k] = &sources[k];
    params[1 + kMaxDeviceReduceSources] = &nsources;
    params[2 + kMaxDeviceReduceSources] = &x->count;
    constexpr uint64_t kThreads = 256;
    const uint64_t blocks_needed = (x->count + kThreads - 1) / kThreads;
    const unsigned blocks = static_cast<unsigned>(blocks_needed < 1024 ? blocks_needed : 1024);
    const CUresult r =
        d->LaunchKernel(x->dtype == ncclFloat32 ? g_queue.sum_f32 : g_queue.sum_bf16, blocks, 1, 1,
                        kThreads, 1, 1, 0, g_queue.copy_stream, params, nullptr);
    if (r != CUDA_SUCCESS) {
      SetLastError(DescribeCudaError(d, "cuLaunchKernel of a reduction between ranks", r));
      return Status::kFailed;
    }
  }
  const CUresult r = d->EventRecord(x->copies_done, g_queue.copy_stream);
  if (r != CUDA_SUCCESS) {
    SetLastError(DescribeCudaError(d, "cuEventRecord after the CUDA IPC copies", r));
    return Status::kFailed;
  }
  x->stage = IpcStage::kCopying;
  return Status::kBlocked;
}

}  // namespace

Status IpcMoveData(IpcTransfer* x, ncclComm* comm, bool* moved) noexcept {
  // The user's streams are held meanwhile: every rank's input stays as it is and its output
  // is ours until phase 1 has seen every rank's data moved.
  switch (x->stage) {
    case IpcStage::kStart: {
      *moved = true;
      bool all_shared = true;
      for (int p = 0; p < x->nranks; ++p) all_shared = all_shared && x->peers[p].usable != 0;
      Trace("  ipc transfer of comm %p: %s", static_cast<const void*>(comm),
            all_shared ? "GPU to GPU" : "staged (a buffer cannot be shared)");
      return all_shared ? StartGpuToGpu(x) : StartStagedFallback(x);
    }
    case IpcStage::kCopying:
      return CopiesStatus(x, "CUDA IPC copies");
    case IpcStage::kStagingIn: {
      const Status st = CopiesStatus(x, "the copy of an input to staging");
      if (st != Status::kDone) return st;
      uint8_t* in = x->staging->memory;
      uint8_t* out = in + AlignStaging(IpcSendBytes(x));
      InitCollState(&x->host_collective, x->kind, in, out, x->count, x->dtype, -1, x->red);
      x->stage = IpcStage::kHostCollective;
      *moved = true;
      [[fallthrough]];
    }
    case IpcStage::kHostCollective: {
      int32_t blocked_on = kWaitAny;
      const Status st = ProgressColl(comm, x->host_collective, &blocked_on, moved);
      if (st != Status::kDone) return st;
      x->stage = IpcStage::kStagingOut;
      uint8_t* out = x->staging->memory + AlignStaging(IpcSendBytes(x));
      return CopyOnCopyStream(x, x->recv, out, IpcRecvBytes(x));
    }
    case IpcStage::kStagingOut:
      return CopiesStatus(x, "the copy of an output from staging");
  }
  return Status::kFailed;
}

ncclResult_t EnqueueDeviceTasks(const CudaDriver* d, const Task* tasks, int count,
                                const char** message) noexcept {
  pthread_mutex_lock(&g_queue.mutex);
  ncclResult_t result = g_queue.set_up ? ncclSuccess : SetUp(d, message);
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
  const bool use_ipc = std::strcmp(SettingValue(Setting::kCpuNcclIpc), "1") == 0;
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
      h.token = g_queue.next_token++;
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
