// The exported NCCL 2.28 API for communication: collectives, send and receive, group
// calls, user reduction ops (PreMulSum), and the device API that a host backend refuses.
// Each call checks its arguments as NCCL does, then hands a task to the engine.
// Threading: NCCL's rules (one thread at a time per communicator). Built without
// exceptions, so none can escape; allocation only at group and reduction-op table growth.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "cpu_nccl/api_internal.h"
#include "cpu_nccl/comm.h"
#include "cpu_nccl/cuda_driver.h"
#include "cpu_nccl/engine.h"
#include "cpu_nccl/profiler.h"
#include "cpu_nccl/reduce_kernels.h"
#include "cpu_nccl/task.h"

namespace collwatch::cpu_nccl {
namespace {

constexpr unsigned kSimInfoMagic = 0x74685283;  // NCCL_SIM_INFO_INITIALIZER

// Submits a collective or send/recv; a failure the engine did not explain (an abort) gets
// the generic message, one it explained (the CUDA mode's) keeps its own.
ncclResult_t SubmitOperation(const Task& task) noexcept {
  const char* before = LastError();
  const ncclResult_t result = Submit(task);
  return LastError() == before ? Finish(result) : result;
}

// Fills task->dev: which buffers are CUDA memory (the CUDA mode), or refuses buffers that
// cannot be used. `send`/`recv` are nullptr where the rank does not use them.
ncclResult_t PrepareDeviceIo(Task* task, const void* send, uint64_t send_bytes, void* recv,
                             uint64_t recv_bytes, const void* scalar, CUstream stream) noexcept {
  const CudaAvailability cuda = Driver();
  if (cuda.problem[0] != '\0') {
    return FailEnqueue(cuda.bad_setting ? ncclInvalidUsage : ncclUnhandledCudaError, cuda.problem);
  }
  if (cuda.mode == CudaMode::kOff) return ncclSuccess;
  DeviceIo& dev = task->dev;
  const BufferKind send_kind = send != nullptr && send_bytes > 0 ? ClassifyBuffer(cuda.driver, send)
                                                                 : BufferKind::kHost;
  const BufferKind recv_kind = recv != nullptr && recv_bytes > 0 ? ClassifyBuffer(cuda.driver, recv)
                                                                 : BufferKind::kHost;
  if (send_kind == BufferKind::kInvalid || recv_kind == BufferKind::kInvalid) {
    return FailEnqueue(ncclInvalidArgument,
                       "buffer is neither host memory nor CUDA memory: no CUDA driver is loaded "
                       "in this process, so the CPU NCCL backend takes buffers as host memory "
                       "(load CUDA first, or set COLLWATCH_CPU_NCCL_CUDA=on)");
  }
  if (send_kind == BufferKind::kCuda) {
    dev.user_send = send;
    dev.send_bytes = send_bytes;
  }
  if (recv_kind == BufferKind::kCuda) {
    dev.user_recv = recv;
    dev.recv_bytes = recv_bytes;
  }
  if (scalar != nullptr && ClassifyBuffer(cuda.driver, scalar) == BufferKind::kCuda) {
    dev.user_scalar = scalar;
  }
  dev.active = dev.user_send != nullptr || dev.user_recv != nullptr || dev.user_scalar != nullptr;
  dev.stream = stream;
  return ncclSuccess;
}

ncclResult_t ResolveOp(const ncclComm* comm, int o, int dtype, Reduction* red) noexcept {
  *red = Reduction{};
  if (o < 0) return ncclInvalidArgument;
  if (o < static_cast<int>(ncclNumOps)) {
    red->desc_op = o;
    switch (o) {
      case ncclSum: red->base = BaseOp::kSum; break;
      case ncclProd: red->base = BaseOp::kProd; break;
      case ncclMax: red->base = BaseOp::kMax; break;
      case ncclMin: red->base = BaseOp::kMin; break;
      default:  // ncclAvg: PreMulSum by 1/n for floating types, sum then divide for integers
        red->base = BaseOp::kSum;
        if (IsFloatingDtype(dtype)) {
          red->premul = true;
          red->scalar = ReciprocalBits(dtype, comm->nranks);
        } else {
          red->postdiv = true;
        }
        break;
    }
    return ncclSuccess;
  }
  const int index = o - static_cast<int>(ncclNumOps);
  if (index >= comm->redop_capacity || !comm->redops[index].live) return ncclInvalidArgument;
  const UserRedOp& user = comm->redops[index];
  if (user.dtype != dtype) return ncclInvalidArgument;
  red->base = BaseOp::kSum;
  red->premul = true;
  red->scalar_is_ptr = user.scalar_is_ptr;
  red->scalar = user.scalar;
  red->desc_op = kDescPreMulSum;
  return ncclSuccess;
}

// Checks shared by every communication call (NCCL's CommCheck and ArgsCheck).
ncclResult_t CheckCommunication(const ncclComm* comm, int dtype, int root) noexcept {
  if (!CommValid(comm)) return FailEnqueue(ncclInvalidArgument, "invalid communicator");
  if (comm->state.load() != kCommLive) {
    return FailEnqueue(ncclInvalidUsage, "communicator revoked");
  }
  if (root < 0 || root >= comm->nranks) return FailEnqueue(ncclInvalidArgument, "invalid root or peer");
  if (dtype < 0 || dtype >= static_cast<int>(ncclNumTypes)) {
    return FailEnqueue(ncclInvalidArgument, "invalid data type");
  }
  return ncclSuccess;
}

ncclResult_t EnqueueColl(OpKind kind, const void* send, void* recv, size_t count,
                         ncclDataType_t datatype, const ncclRedOp_t* op, int root,
                         ncclComm* comm, cudaStream_t stream) noexcept {
  const int dtype = EnumValue(datatype);
  const bool rooted = kind == OpKind::kReduce || kind == OpKind::kBroadcast ||
                      kind == OpKind::kGather || kind == OpKind::kScatter;
  // NCCL checks the root of every collective (0 where the op has none).
  const ncclResult_t check = CheckCommunication(comm, dtype, rooted ? root : 0);
  if (check != ncclSuccess) return check;
  Reduction red{};
  red.desc_op = -1;
  if (op != nullptr && ResolveOp(comm, EnumValue(*op), dtype, &red) != ncclSuccess) {
    return FailEnqueue(ncclInvalidArgument, "invalid reduction operation");
  }
  if (count == 0) return ncclSuccess;  // NCCL discards empty collectives
  const bool is_root = comm->rank == root;
  bool needs_send = true;
  bool needs_recv = true;
  if (kind == OpKind::kBroadcast || kind == OpKind::kScatter) needs_send = is_root;
  if (kind == OpKind::kReduce || kind == OpKind::kGather) needs_recv = is_root;
  // NCCL checks pointers only under NCCL_CHECK_POINTERS; on the host a NULL buffer would
  // crash instead, so refuse it like NCCL's pointer check does.
  if ((needs_send && send == nullptr) || (needs_recv && recv == nullptr)) {
    return FailEnqueue(ncclInvalidArgument, "NULL buffer");
  }
  Task task{};
  task.kind = TaskKind::kColl;
  task.comm = comm;
  InitCollState(&task.coll, kind, send, recv, count, dtype, root, red);
  // Bytes each side of the call holds: n blocks where the op has one per rank.
  const uint64_t bytes = count * DtypeSize(dtype);
  const uint64_t all_bytes = bytes * static_cast<uint64_t>(comm->nranks);
  const bool send_blocks =
      kind == OpKind::kReduceScatter || kind == OpKind::kAlltoAll || kind == OpKind::kScatter;
  const bool recv_blocks =
      kind == OpKind::kAllGather || kind == OpKind::kAlltoAll || kind == OpKind::kGather;
  const void* scalar = red.premul && red.scalar_is_ptr ? reinterpret_cast<const void*>(red.scalar)
                                                        : nullptr;
  const ncclResult_t prepared =
      PrepareDeviceIo(&task, needs_send ? send : nullptr, send_blocks ? all_bytes : bytes,
                      needs_recv ? recv : nullptr, recv_blocks ? all_bytes : bytes, scalar, stream);
  if (prepared != ncclSuccess) return prepared;
  if (Capturing()) {
    if (InGroup() || task.dev.active) {
      return FailEnqueue(ncclInvalidUsage, "graph emulation: grouped calls and CUDA buffers are not captured");
    }
    profiler::Call(&task, count, dtype, root, stream, /*captured=*/true);
    return CaptureTask(task);
  }
  profiler::Call(&task, count, dtype, root, stream);
  return SubmitOperation(task);
}

ncclResult_t EnqueueP2p(TaskKind kind, const void* send, void* recv, size_t count,
                        ncclDataType_t datatype, int peer, ncclComm* comm,
                        cudaStream_t stream) noexcept {
  const int dtype = EnumValue(datatype);
  const ncclResult_t check = CheckCommunication(comm, dtype, peer);
  if (check != ncclSuccess) return check;
  if (Capturing()) return FailEnqueue(ncclInvalidUsage, "graph emulation: sends and receives are not captured");
  if (count > 0 && (kind == TaskKind::kSend ? send == nullptr : recv == nullptr)) {
    return FailEnqueue(ncclInvalidArgument, "NULL buffer");
  }
  Task task{};
  task.kind = kind;
  task.comm = comm;
  task.p2p.send = send;
  task.p2p.recv = recv;
  task.p2p.bytes = count * DtypeSize(dtype);
  task.p2p.peer = peer;
  task.p2p.stage = kP2pHeader;
  const ncclResult_t prepared =
      PrepareDeviceIo(&task, send, task.p2p.bytes, recv, task.p2p.bytes, nullptr, stream);
  if (prepared != ncclSuccess) return prepared;
  profiler::Call(&task, count, dtype, -1, stream);
  return SubmitOperation(task);
}

}  // namespace
}  // namespace collwatch::cpu_nccl

namespace cn = collwatch::cpu_nccl;

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  if (!cn::CommValid(comm)) return cn::Fail(ncclInvalidArgument, "invalid communicator");
  const int dtype = cn::EnumValue(datatype);
  const int where = cn::EnumValue(residence);
  if (op == nullptr || scalar == nullptr || dtype < 0 || dtype >= static_cast<int>(ncclNumTypes) ||
      (where != ncclScalarDevice && where != ncclScalarHostImmediate)) {
    return cn::Fail(ncclInvalidArgument, "invalid arguments");
  }
  int index = 0;
  while (index < comm->redop_capacity && comm->redops[index].live) ++index;
  if (index == comm->redop_capacity) {
    const int capacity = comm->redop_capacity < 4 ? 4 : comm->redop_capacity * 2;
    void* grown = std::realloc(comm->redops, sizeof(cn::UserRedOp) * static_cast<size_t>(capacity));
    if (grown == nullptr) return cn::Fail(ncclSystemError, "out of memory");
    comm->redops = static_cast<cn::UserRedOp*>(grown);
    for (int i = comm->redop_capacity; i < capacity; ++i) comm->redops[i] = cn::UserRedOp{};
    comm->redop_capacity = capacity;
  }
  cn::UserRedOp& user = comm->redops[index];
  user.live = true;
  user.dtype = dtype;
  user.scalar_is_ptr = where == ncclScalarDevice;
  user.scalar = 0;
  if (user.scalar_is_ptr) {
    user.scalar = reinterpret_cast<uintptr_t>(scalar);  // read when an operation runs
  } else {
    std::memcpy(&user.scalar, scalar, cn::DtypeSize(dtype));
  }
  *op = static_cast<ncclRedOp_t>(static_cast<int>(ncclNumOps) + index);
  return ncclSuccess;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  const int o = cn::EnumValue(op);
  if (o >= 0 && o < static_cast<int>(ncclNumOps)) {
    return cn::Fail(ncclInvalidArgument, "operator is a NCCL builtin");
  }
  if (o < 0) return cn::Fail(ncclInvalidArgument, "operator is garbage");
  if (!cn::CommValid(comm)) return cn::Fail(ncclInvalidArgument, "invalid communicator");
  const int index = o - static_cast<int>(ncclNumOps);
  if (index >= comm->redop_capacity || !comm->redops[index].live) {
    return cn::Fail(ncclInvalidArgument, "operator unknown to this communicator");
  }
  comm->redops[index].live = false;
  return ncclSuccess;
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return cn::EnqueueColl(cn::OpKind::kReduce, sendbuff, recvbuff, count, datatype, &op, root, comm,
                         stream);
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return cn::EnqueueColl(cn::OpKind::kBroadcast, buff, buff, count, datatype, nullptr, root, comm,
                         stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return cn::EnqueueColl(cn::OpKind::kBroadcast, sendbuff, recvbuff, count, datatype, nullptr, root,
                         comm, stream);
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return cn::EnqueueColl(cn::OpKind::kAllReduce, sendbuff, recvbuff, count, datatype, &op, -1, comm,
                         stream);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  return cn::EnqueueColl(cn::OpKind::kReduceScatter, sendbuff, recvbuff, recvcount, datatype, &op,
                         -1, comm, stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return cn::EnqueueColl(cn::OpKind::kAllGather, sendbuff, recvbuff, sendcount, datatype, nullptr,
                         -1, comm, stream);
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return cn::EnqueueColl(cn::OpKind::kAlltoAll, sendbuff, recvbuff, count, datatype, nullptr, -1,
                         comm, stream);
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return cn::EnqueueColl(cn::OpKind::kGather, sendbuff, recvbuff, count, datatype, nullptr, root,
                         comm, stream);
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                         int root, ncclComm_t comm, cudaStream_t stream) {
  return cn::EnqueueColl(cn::OpKind::kScatter, sendbuff, recvbuff, count, datatype, nullptr, root,
                         comm, stream);
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return cn::EnqueueP2p(cn::TaskKind::kSend, sendbuff, nullptr, count, datatype, peer, comm, stream);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return cn::EnqueueP2p(cn::TaskKind::kRecv, nullptr, recvbuff, count, datatype, peer, comm, stream);
}

ncclResult_t ncclGroupStart() { return cn::GroupStart(); }

ncclResult_t ncclGroupEnd() {
  const ncclResult_t result = cn::GroupEnd(false, nullptr);
  return result == ncclInvalidUsage ? cn::Fail(result, "ncclGroupEnd: not in a group call")
                                    : cn::Finish(result);
}

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  if (simInfo != nullptr && simInfo->magic != cn::kSimInfoMagic) {
    return cn::Fail(ncclInvalidArgument, "simInfo not from NCCL_SIM_INFO_INITIALIZER");
  }
  float estimate = 0.0f;
  const ncclResult_t result = cn::GroupEnd(true, &estimate);
  if (result == ncclSuccess && simInfo != nullptr) simInfo->estimatedTime = estimate;
  return result;
}

// CUDA graphs emulated for tests, not part of NCCL (engine.h): collectives this thread
// issues between Begin and End are captured; Replay runs them again, in order, on a thread
// of its own, and returns when they are done.
extern "C" __attribute__((visibility("default"))) void collwatchCpuNcclCaptureBegin() { cn::BeginCapture(); }
extern "C" __attribute__((visibility("default"))) void* collwatchCpuNcclCaptureEnd() { return cn::EndCapture(); }
extern "C" __attribute__((visibility("default"))) ncclResult_t collwatchCpuNcclGraphReplay(void* graph) {
  if (graph == nullptr) return cn::Fail(ncclInvalidArgument, "graph emulation: no graph");
  return cn::ReplayGraph(static_cast<const cn::Graph*>(graph));
}
extern "C" __attribute__((visibility("default"))) void collwatchCpuNcclGraphDestroy(void* graph) {
  cn::DestroyGraph(static_cast<cn::Graph*>(graph));
}

// NCCL 2.28's device API (nccl_device/core.h, a CUDA header): device-side communicators
// for kernels that communicate themselves, which a host backend cannot give. PyTorch
// imports both (symmetric memory); the arguments are opaque here.
extern "C" __attribute__((visibility("default"))) ncclResult_t ncclDevCommCreate(
    ncclComm_t comm, const void* /*requirements*/, void* out_dev_comm) {
  if (!cn::CommValid(comm)) return cn::Fail(ncclInvalidArgument, "invalid communicator");
  if (out_dev_comm == nullptr) return cn::Fail(ncclInvalidArgument, "NULL outDevComm");
  return cn::Fail(ncclInvalidUsage,
                  "ncclDevCommCreate: NCCL's device API is not available in the CPU NCCL backend "
                  "(PyTorch: do not use NCCL symmetric memory, e.g. leave "
                  "TORCH_SYMM_MEM_ALLOW_NCCL / symm_mem backends unset)");
}

extern "C" __attribute__((visibility("default"))) ncclResult_t ncclDevCommDestroy(
    ncclComm_t comm, const void* /*dev_comm*/) {
  if (!cn::CommValid(comm)) return cn::Fail(ncclInvalidArgument, "invalid communicator");
  return cn::Fail(ncclInvalidUsage,
                  "ncclDevCommDestroy: no device communicator exists in the CPU NCCL backend");
}

COLLWATCH_PNCCL_ALIAS(ncclRedOpCreatePreMulSum);
COLLWATCH_PNCCL_ALIAS(ncclRedOpDestroy);
COLLWATCH_PNCCL_ALIAS(ncclReduce);
COLLWATCH_PNCCL_ALIAS(ncclBcast);
COLLWATCH_PNCCL_ALIAS(ncclBroadcast);
COLLWATCH_PNCCL_ALIAS(ncclAllReduce);
COLLWATCH_PNCCL_ALIAS(ncclReduceScatter);
COLLWATCH_PNCCL_ALIAS(ncclAllGather);
COLLWATCH_PNCCL_ALIAS(ncclAlltoAll);
COLLWATCH_PNCCL_ALIAS(ncclGather);
COLLWATCH_PNCCL_ALIAS(ncclScatter);
COLLWATCH_PNCCL_ALIAS(ncclSend);
COLLWATCH_PNCCL_ALIAS(ncclRecv);
COLLWATCH_PNCCL_ALIAS(ncclGroupStart);
COLLWATCH_PNCCL_ALIAS(ncclGroupEnd);
COLLWATCH_PNCCL_ALIAS(ncclGroupSimulateEnd);
