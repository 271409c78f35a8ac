// CUDA IPC transfers (COLLWATCH_CPU_NCCL_IPC=1): all-gathers and summing reduce-scatters
// whose data moves GPU to GPU between the ranks' buffers on the copy stream, with a staged
// fallback through pinned memory and the host engine when a buffer cannot be shared. The
// engine runs such a collective as two data-free phases; IpcMoveData moves the data between.
// Threading: NewIpcTransfer on the calling thread; everything else, and the table of
// opened peer allocations, on the progress thread.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cpu_nccl/cuda_queue_internal.h"
#include "cpu_nccl/device_reduce_ptx.h"
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

CUevent IpcCopiesEvent(const IpcTransfer* x) noexcept { return x->copies_done; }

void FreeIpcTransfer(IpcTransfer* x) noexcept {
  if (x == nullptr) return;
  if (x->staging != nullptr) ReleaseBlock(x->staging);
  if (x->copies_done != nullptr) g_queue.driver->EventDestroy(x->copies_done);
  std::free(x->peers);
  std::free(x);
}

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

}  // namespace collwatch::cpu_nccl
