// CUDA IPC transfers (COLLWATCH_CPU_NCCL_IPC=1): all-gathers and summing reduce-scatters
// whose data moves GPU to GPU between the ranks' buffers, with a staged fallback through
// pinned memory and the host engine when a buffer cannot be shared. The engine runs such a
// collective as two data-free phases; IpcMoveData moves the data between, on the
// collective's own stream: hold, move kernel, hold, move kernel, hold (device_move_kernel.h),
// the progress thread writing each kernel's job and releasing the hold in front of it.
// Threading: NewIpcTransfer on the calling thread; everything else, and the table of
// opened peer allocations, on the progress thread.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cpu_nccl/cuda_queue_internal.h"
#include "cpu_nccl/device_move_kernel.h"
#include "cpu_nccl/engine.h"

namespace collwatch::cpu_nccl {
namespace {

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
  kFirstMove,       // the first move kernel (the GPU to GPU transfer, or the input's
                    // copy to staging) runs: awaiting the second hold kernel
  kHostCollective,  // fallback: the host engine runs the collective on the staging
  kSecondMove,      // the second move kernel (nothing, or the output's copy from
                    // staging) runs: awaiting the last hold kernel
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
  int slot;              // the stream's hold flags and move jobs
  uint32_t entry_token;  // the first of its stream's three hold kernels
};

const void* IpcOwnDescriptor(const IpcTransfer* transfer) noexcept { return transfer->own.raw; }

void IpcNotePeerDescriptor(IpcTransfer* transfer, int peer, const void* descriptor) noexcept {
  std::memcpy(&transfer->peers[peer], descriptor, sizeof(IpcBufferInfo));
}

namespace {

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

}  // namespace

// Collectives the GPU does between the ranks' buffers: all-gathers, and reduce-scatters
// that sum float32 or bfloat16, over at most 8 ranks (the move kernel's sources).
bool IpcCapable(const Task& t) noexcept {
  if (t.kind != TaskKind::kColl || t.dev.user_send == nullptr || t.dev.user_recv == nullptr ||
      t.comm->nranks > kMaxMoveSources) {
    return false;
  }
  const CollState& s = t.coll;
  if (s.kind == OpKind::kAllGather) return true;
  return s.kind == OpKind::kReduceScatter && s.red.base == BaseOp::kSum && !s.red.premul &&
         !s.red.postdiv && (s.dtype == ncclFloat32 || s.dtype == ncclBfloat16);
}

// Describes `send` for the peers; an IpcTransfer for an all-gather of `block_bytes` per
// rank, or nullptr when memory runs out.
IpcTransfer* NewIpcTransfer(const CudaDriver* d, const Task& t, const char** message) noexcept {
  auto* x = static_cast<IpcTransfer*>(std::calloc(1, sizeof(IpcTransfer)));
  if (x == nullptr) return nullptr;
  x->nranks = t.comm->nranks;
  x->rank = t.comm->rank;
  x->peers = static_cast<IpcBufferInfo*>(std::calloc(x->nranks, sizeof(IpcBufferInfo)));
  if (x->peers == nullptr) {
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

void IpcAttachHolds(IpcTransfer* x, int slot, uint32_t first_token) noexcept {
  x->slot = slot;
  x->entry_token = first_token;
}

unsigned IpcMoveBlocks(const IpcTransfer* x) noexcept {
  const uint64_t units = (x->block_bytes * static_cast<uint64_t>(x->nranks) + 15) / 16;
  const uint64_t blocks = (units + kMoveThreadsPerBlock - 1) / kMoveThreadsPerBlock;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks < kMaxMoveBlocks ? blocks : kMaxMoveBlocks));
}

void FreeIpcTransfer(IpcTransfer* x) noexcept {
  if (x == nullptr) return;
  if (x->staging != nullptr) ReleaseBlock(x->staging);
  std::free(x->peers);
  std::free(x);
}

namespace {

DeviceMoveJob& MoveJob(const IpcTransfer* x, int which) noexcept {
  return g_queue.jobs[x->slot * kMoveJobsPerSlot + which];
}

// The hold kernel `index` (0, 1, 2) of the transfer's stream runs: everything queued before
// it on the stream, the move kernel in front of it included, has completed.
bool HoldReached(const IpcTransfer* x, uint32_t index) noexcept {
  return g_queue.flags[x->slot].ready.load(std::memory_order_acquire) == x->entry_token + index;
}

void ReleaseHold(const IpcTransfer* x, uint32_t index) noexcept {
  g_queue.flags[x->slot].release.store(x->entry_token + index);
}

// A job that copies `bytes` from each of `sources` to out + k * stride, in 16-byte units
// where everything is 16-aligned.
void SetCopyJob(DeviceMoveJob* job, uint64_t out, uint64_t stride, const uint64_t* sources,
                int nsources, uint64_t bytes) noexcept {
  uint64_t alignment = out | stride | bytes;
  for (int k = 0; k < nsources; ++k) alignment |= sources[k];
  job->nsources = static_cast<uint32_t>(nsources);
  job->count = bytes;
  job->out = out;
  job->out_stride = stride;
  for (int k = 0; k < nsources; ++k) job->sources[k] = sources[k];
  job->kind = (alignment & 15) == 0 ? MoveKind::kCopy16 : MoveKind::kCopy1;
}

uint64_t IpcSendBytes(const IpcTransfer* x) noexcept {
  return x->kind == OpKind::kReduceScatter ? x->block_bytes * x->nranks : x->block_bytes;
}

uint64_t IpcRecvBytes(const IpcTransfer* x) noexcept {
  return x->kind == OpKind::kAllGather ? x->block_bytes * x->nranks : x->block_bytes;
}

// Every rank sees the same descriptors, so every rank falls back together when one buffer
// cannot be shared (e.g. PyTorch's expandable segments, managed memory): the first move
// kernel copies the input to pinned staging (mapped: the GPU writes it directly).
Status StartStagedFallback(IpcTransfer* x) noexcept {
  const char* message = "";
  x->staging = AcquireBlock(
      g_queue.driver, AlignStaging(IpcSendBytes(x)) + AlignStaging(IpcRecvBytes(x)), &message);
  if (x->staging == nullptr) {
    SetLastError(message);
    return Status::kFailed;
  }
  const uint64_t source = reinterpret_cast<uint64_t>(x->send);
  SetCopyJob(&MoveJob(x, 0), reinterpret_cast<uint64_t>(x->staging->memory), 0, &source, 1,
             IpcSendBytes(x));
  return Status::kBlocked;
}

// The GPU to GPU job: this rank pulls every rank's block (all-gather) or sums every rank's
// block of its own part (reduce-scatter) from the peers' buffers into its output.
Status StartGpuToGpu(IpcTransfer* x) noexcept {
  uint64_t sources[kMaxMoveSources] = {};
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
    sources[p] = x->kind == OpKind::kReduceScatter
                     ? source + static_cast<uint64_t>(x->rank) * x->block_bytes  // our block
                     : source;
  }
  DeviceMoveJob& job = MoveJob(x, 0);
  if (x->kind == OpKind::kAllGather) {
    SetCopyJob(&job, reinterpret_cast<uint64_t>(x->recv), x->block_bytes, sources, x->nranks,
               x->block_bytes);
    return Status::kBlocked;
  }
  job.nsources = static_cast<uint32_t>(x->nranks);
  job.count = x->count;
  job.out = reinterpret_cast<uint64_t>(x->recv);
  job.out_stride = 0;
  for (int k = 0; k < x->nranks; ++k) job.sources[k] = sources[k];
  job.kind = x->dtype == ncclFloat32 ? MoveKind::kSumF32 : MoveKind::kSumBf16;
  return Status::kBlocked;
}

}  // namespace

Status IpcMoveData(IpcTransfer* x, ncclComm* comm, bool* moved) noexcept {
  // The user's stream is held meanwhile, but for the move kernels the progress thread lets
  // through: every rank's input stays as it is and its output is ours until phase 1 has
  // seen every rank's data moved.
  switch (x->stage) {
    case IpcStage::kStart: {
      *moved = true;
      bool all_shared = true;
      for (int p = 0; p < x->nranks; ++p) all_shared = all_shared && x->peers[p].usable != 0;
      Trace("  ipc transfer of comm %p: %s", static_cast<const void*>(comm),
            all_shared ? "GPU to GPU" : "staged (a buffer cannot be shared)");
      const Status st = all_shared ? StartGpuToGpu(x) : StartStagedFallback(x);
      if (st == Status::kFailed) return st;
      x->stage = IpcStage::kFirstMove;
      ReleaseHold(x, 0);
      return Status::kBlocked;
    }
    case IpcStage::kFirstMove: {
      if (!HoldReached(x, 1)) return Status::kBlocked;
      *moved = true;
      Trace("  ipc transfer of comm %p: first move kernel done (job kind %u)",
            static_cast<const void*>(comm), static_cast<unsigned>(MoveJob(x, 0).kind));
      if (x->staging == nullptr) {
        x->stage = IpcStage::kSecondMove;
        ReleaseHold(x, 1);  // its job stays kNone
        return Status::kBlocked;
      }
      uint8_t* in = x->staging->memory;
      uint8_t* out = in + AlignStaging(IpcSendBytes(x));
      InitCollState(&x->host_collective, x->kind, in, out, x->count, x->dtype, -1, x->red);
      x->stage = IpcStage::kHostCollective;
      [[fallthrough]];
    }
    case IpcStage::kHostCollective: {
      int32_t blocked_on = kWaitAny;
      const Status st = ProgressColl(comm, x->host_collective, &blocked_on, moved);
      if (st != Status::kDone) return st;
      const uint64_t staged_out =
          reinterpret_cast<uint64_t>(x->staging->memory + AlignStaging(IpcSendBytes(x)));
      SetCopyJob(&MoveJob(x, 1), reinterpret_cast<uint64_t>(x->recv), 0, &staged_out, 1,
                 IpcRecvBytes(x));
      x->stage = IpcStage::kSecondMove;
      ReleaseHold(x, 1);
      return Status::kBlocked;
    }
    case IpcStage::kSecondMove:
      if (!HoldReached(x, 2)) return Status::kBlocked;
      *moved = true;
      Trace("  ipc transfer of comm %p: second move kernel done", static_cast<const void*>(comm));
      return Status::kDone;
  }
  return Status::kFailed;
}

}  // namespace collwatch::cpu_nccl
