// What the pieces of the CUDA mode share (cuda_queue.cc: enqueue and staging pools;
// cuda_progress.cc: the progress thread; cuda_ipc.cc: GPU to GPU transfers;
// cuda_queue_trace.cc: COLLWATCH_CPU_NCCL_TRACE): the queue state, a batch, the pools.
// Threading: g_queue.mutex guards the pools and the inbox (user threads and the progress
// thread); batches in the progress thread's list belong to it alone. Not for other files.
#ifndef COLLWATCH_CPU_NCCL_CUDA_QUEUE_INTERNAL_H_
#define COLLWATCH_CPU_NCCL_CUDA_QUEUE_INTERNAL_H_

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "cpu_nccl/cuda_driver.h"
#include "cpu_nccl/device_move_kernel.h"
#include "cpu_nccl/task.h"

namespace collwatch::cpu_nccl {

inline constexpr int kFlagSlots = 4096;  // hold kernels in flight per process
inline constexpr size_t kMinStagingBytes = 64 * 1024;
inline constexpr int kSizeClasses = 40;  // 64 KiB << 39: more than any host has
inline constexpr uint64_t kStagingAlign = 256;
// A CUDA IPC collective holds its stream three times: before each of its two move
// kernels and after them (cuda_ipc.cc); each slot has a job for each move kernel.
inline constexpr uint32_t kIpcHoldKernels = 3;
inline constexpr int kMoveJobsPerSlot = 2;

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
  uint32_t token;  // of the last hold kernel; releasing it releases every one before it
  uint32_t holds;  // hold kernels on the stream: 1, or kIpcHoldKernels for a CUDA IPC task
};

// The token of the stream's first hold kernel (the k-th has this + k).
inline uint32_t FirstHoldToken(const HeldStream& h) noexcept { return h.token - (h.holds - 1); }

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
  CUfunction move;             // device_move_kernel.h
  CUfunction hold_then_fetch;  // likewise
  bool set_up;  // module loaded, flags allocated, progress thread started
  CUcontext context;
  CUfunction hold;
  HoldFlags* flags;
  DeviceMoveJob* jobs;       // kMoveJobsPerSlot per flag slot, pinned and mapped
  CUdeviceptr device_jobs;   // where the hold kernels fetch them to, likewise
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

// The one queue of this process (cuda_queue.cc), constant-initialised.
extern QueueState g_queue;

inline uint64_t AlignStaging(uint64_t bytes) noexcept {
  return (bytes + kStagingAlign - 1) / kStagingAlign * kStagingAlign;
}

inline CUresult CopyAsync(const CudaDriver* d, void* dst, const void* src, uint64_t bytes,
                          CUstream stream) noexcept {
  if (bytes == 0) return CUDA_SUCCESS;
  return d->MemcpyAsync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src),
                        bytes, stream);
}

// ---- Staging pools and batch memory (cuda_queue.cc) ----

// Pinned staging of at least `bytes`, from the pool or newly allocated (outside the lock:
// cuMemHostAlloc is slow).
StagingBlock* AcquireBlock(const CudaDriver* d, uint64_t bytes, const char** message) noexcept;
void ReleaseBlock(StagingBlock* block) noexcept;
// Frees a batch's arrays, its IPC transfers and the batch itself; not its staging.
void FreeBatchArrays(DeviceBatch* b) noexcept;
// Returns the staging, slots and events of a batch whose streams have passed it.
void RecycleBatch(DeviceBatch* b) noexcept;

// ---- The progress thread (cuda_progress.cc) ----

// Loads the hold kernel, allocates the flag words and starts the progress thread; called
// once per process under g_queue.mutex, on a thread with the program's CUDA context.
ncclResult_t SetUpQueue(const CudaDriver* d, const char** message) noexcept;

// ---- CUDA IPC transfers (cuda_ipc.cc) ----

// Collectives the GPU does between the ranks' buffers: all-gathers, and reduce-scatters
// that sum float32 or bfloat16, over at most 8 ranks (the move kernel's sources).
bool IpcCapable(const Task& t) noexcept;
// Describes `send` for the peers; an IpcTransfer for an all-gather of `block_bytes` per
// rank, or nullptr when memory runs out.
IpcTransfer* NewIpcTransfer(const CudaDriver* d, const Task& t, const char** message) noexcept;
// The hold flags slot and first hold token of the transfer's stream, once assigned.
void IpcAttachHolds(IpcTransfer* x, int slot, uint32_t first_token) noexcept;
// The grid of the transfer's move kernels.
unsigned IpcMoveBlocks(const IpcTransfer* x) noexcept;
void FreeIpcTransfer(IpcTransfer* x) noexcept;

// ---- Tracing and stage times (cuda_queue_trace.cc) ----

// One line on stderr, "collwatch cpu_nccl[pid] <ms> ...", when tracing is on.
void Trace(const char* format, ...) noexcept __attribute__((format(printf, 1, 2)));
// "AllGather count 1024 dtype 7 comm 0x.. rank 0/2 stream 0x.. ipc" of a batch's tasks.
void TraceBatch(const char* what, const DeviceBatch* b) noexcept;
void SetStage(DeviceBatch* b, BatchStage stage) noexcept;
// Says once per stage when a batch has waited more than 5 s (trace on only).
void ReportSlow(DeviceBatch* b) noexcept;

}  // namespace collwatch::cpu_nccl

#endif  // COLLWATCH_CPU_NCCL_CUDA_QUEUE_INTERNAL_H_
