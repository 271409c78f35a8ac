// The exported NCCL 2.28 C API: NCCL's argument checks and error codes, then tasks for the
// engine; pnccl* are aliases of nccl*. Threading: NCCL's rules (one thread at a time per
// communicator; abort, revoke and queries from any thread). Built without exceptions, so
// none can escape; allocation only at communicator creation, split and group growth.
#include <sys/random.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "cpu_nccl/comm.h"
#include "cpu_nccl/cuda_driver.h"
#include "cpu_nccl/engine.h"
#include "cpu_nccl/reduce_kernels.h"
#include "cpu_nccl/task.h"
#include "ring/hash.h"

// Dummy window handle (nccl.h only declares the type).
struct ncclWindow_vidmem {
  uint64_t magic;
  void* buff;
  size_t size;
};

namespace collwatch::cpu_nccl {
namespace {

constexpr unsigned kConfigMagic = 0xcafebeef;  // NCCL_CONFIG_INITIALIZER
constexpr unsigned kSimInfoMagic = 0x74685283;  // NCCL_SIM_INFO_INITIALIZER
constexpr uint64_t kRegMagic = 0x6765722d6c636363ull;
constexpr uint64_t kWindowMagic = 0x6e69772d6c636363ull;

// The value of an enum argument without an enum load: callers may pass values outside
// the enumeration (NCCL rejects them), which UBSan would flag if read as the enum type.
template <class E>
int EnumValue(const E& e) noexcept {
  static_assert(sizeof(E) == sizeof(int));
  int value;
  std::memcpy(&value, &e, sizeof value);
  return value;
}

ncclResult_t Fail(ncclResult_t result, const char* message) noexcept {
  SetLastError(message);
  return result;
}

// For operations NCCL enqueues: an argument error inside a group also fails GroupEnd.
ncclResult_t FailEnqueue(ncclResult_t result, const char* message) noexcept {
  NoteGroupError(result);
  return Fail(result, message);
}

ncclResult_t Finish(ncclResult_t result) noexcept {
  if (result != ncclSuccess) SetLastError("operation failed: communicator aborted or revoked");
  return result;
}

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

bool ConfigValid(const ncclConfig_t* config) noexcept {
  return config == nullptr || config->magic == kConfigMagic;
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
  return SubmitOperation(task);
}

ncclResult_t EnqueueP2p(TaskKind kind, const void* send, void* recv, size_t count,
                        ncclDataType_t datatype, int peer, ncclComm* comm,
                        cudaStream_t stream) noexcept {
  const int dtype = EnumValue(datatype);
  const ncclResult_t check = CheckCommunication(comm, dtype, peer);
  if (check != ncclSuccess) return check;
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
  return SubmitOperation(task);
}

// Creates the communicator `comm` (made by NewComm) by running or queueing its init.
// *out gets the handle at once, as NCCL does, so that another thread can abort a hanging
// init; it is reset to NULL if a blocking init fails.
ncclResult_t StartInit(ncclComm* comm, ncclComm_t* out, const ncclConfig_t* config) noexcept {
  if (config != nullptr && config->blocking == 0) comm->blocking = false;
  RetainComm(comm);  // this call's reference
  *out = comm;
  Task task{};
  task.kind = TaskKind::kInit;
  task.comm = comm;
  const bool grouped = InGroup();
  const ncclResult_t result = Submit(task);
  if (result != ncclSuccess && !grouped) {
    ReleaseHandle(comm);
    *out = nullptr;
  }
  ReleaseComm(comm);
  return result != ncclSuccess ? Fail(result, "communicator creation failed") : result;
}

// 128 random bytes: the id names the job's segments, so it must not be guessable.
ncclResult_t RandomId(ncclUniqueId* id) noexcept {
  size_t filled = 0;
  while (filled < sizeof id->internal) {
    const ssize_t got = getrandom(id->internal + filled, sizeof id->internal - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return Fail(ncclSystemError, "getrandom failed");
    }
    filled += static_cast<size_t>(got);
  }
  return ncclSuccess;
}

ncclResult_t InitRankWithKey(ncclComm_t* out, int nranks, uint64_t key, int rank,
                             const ncclConfig_t* config) noexcept {
  if (out == nullptr) return Fail(ncclInvalidArgument, "NULL communicator pointer");
  if (nranks < 1 || rank < 0 || rank >= nranks) return Fail(ncclInvalidArgument, "invalid rank");
  if (!ConfigValid(config)) return Fail(ncclInvalidArgument, "config not from NCCL_CONFIG_INITIALIZER");
  // A CUDA mode that cannot work is said before the job starts, not at its first call.
  const CudaAvailability cuda = Driver();
  if (cuda.problem[0] != '\0') {
    return Fail(cuda.bad_setting ? ncclInvalidUsage : ncclUnhandledCudaError, cuda.problem);
  }
  ncclComm* comm = NewComm(rank, nranks, key);
  if (comm == nullptr) return Fail(ncclSystemError, "out of memory");
  return StartInit(comm, out, config);  // NewComm's reference becomes the handle's
}

}  // namespace
}  // namespace collwatch::cpu_nccl

namespace cn = collwatch::cpu_nccl;

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return cn::Fail(ncclInvalidArgument, "NULL version");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr) return cn::Fail(ncclInvalidArgument, "NULL uniqueId");
  return cn::RandomId(uniqueId);
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return cn::InitRankWithKey(comm, nranks, collwatch::Hash64(commId.internal, sizeof commId.internal),
                             rank, nullptr);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  return cn::InitRankWithKey(comm, nranks, collwatch::Hash64(commId.internal, sizeof commId.internal),
                             rank, config);
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config) {
  if (nId < 1 || commIds == nullptr) return cn::Fail(ncclInvalidArgument, "invalid ids");
  // The ids together are one key: every rank passes the same ids in the same order.
  const uint64_t key =
      collwatch::Hash64(commIds, static_cast<size_t>(nId) * sizeof(ncclUniqueId));
  return cn::InitRankWithKey(newcomm, nranks, key, myrank, config);
}

ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  if (comm == nullptr || ndev < 1) return cn::Fail(ncclInvalidArgument, "invalid arguments");
  if (devlist != nullptr) {
    for (int i = 0; i < ndev; ++i) {
      if (devlist[i] < 0) return cn::Fail(ncclInvalidArgument, "invalid device");
      for (int j = 0; j < i; ++j) {
        if (devlist[j] == devlist[i]) return cn::Fail(ncclInvalidUsage, "duplicate device");
      }
    }
  }
  ncclUniqueId id;
  ncclResult_t result = cn::RandomId(&id);  // not through the PLT: a preload would see it
  if (result != ncclSuccess) return result;
  const uint64_t key = collwatch::Hash64(id.internal, sizeof id.internal);
  for (int i = 0; i < ndev; ++i) comm[i] = nullptr;
  const bool outer_group = cn::InGroup();
  cn::GroupStart();
  for (int i = 0; i < ndev && result == ncclSuccess; ++i) {
    result = cn::InitRankWithKey(&comm[i], ndev, key, i, nullptr);
  }
  if (result != ncclSuccess) cn::NoteGroupError(result);  // drop the queued ranks
  const ncclResult_t end = cn::GroupEnd(false, nullptr);
  if (result == ncclSuccess) result = end;
  if (result != ncclSuccess && !outer_group) {
    for (int i = 0; i < ndev; ++i) {
      if (comm[i] != nullptr) cn::ReleaseHandle(comm[i]);
      comm[i] = nullptr;
    }
  }
  return result;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (!cn::CommValid(comm)) return cn::Fail(ncclInvalidArgument, "invalid communicator");
  if (comm->state.load() == cn::kCommRevoked) {
    return cn::Fail(ncclInvalidUsage, "ncclCommFinalize after ncclCommRevoke");
  }
  // Host-buffer operations completed when their calls returned; those on streams complete
  // when their peers join, as NCCL's blocking finalize waits for them.
  cn::WaitForDeviceTasks(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  if (!cn::CommValid(comm)) return cn::Fail(ncclInvalidArgument, "invalid communicator");
  cn::InterruptComm(comm, cn::kCommAborted);
  cn::ReleaseHandle(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  if (!cn::CommValid(comm)) return cn::Fail(ncclInvalidArgument, "invalid communicator");
  cn::InterruptComm(comm, cn::kCommAborted);  // blocked operations return ncclSystemError
  cn::ReleaseHandle(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  if (!cn::CommValid(comm)) return cn::Fail(ncclInvalidArgument, "invalid communicator");
  if (revokeFlags != NCCL_REVOKE_DEFAULT) return cn::Fail(ncclInvalidArgument, "invalid flags");
  if (comm->state.load() == cn::kCommLive) cn::InterruptComm(comm, cn::kCommRevoked);
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  if (!cn::CommValid(comm)) return cn::Fail(ncclInvalidArgument, "invalid communicator");
  if (newcomm == nullptr) return cn::Fail(ncclInvalidArgument, "NULL newcomm");
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR) return cn::Fail(ncclInvalidArgument, "invalid color");
  if (!cn::ConfigValid(config)) return cn::Fail(ncclInvalidArgument, "config not from NCCL_CONFIG_INITIALIZER");
  if (comm->state.load() != cn::kCommLive) {
    return cn::Fail(ncclInvalidUsage, "split of a revoked communicator is not supported");
  }
  *newcomm = nullptr;
  const size_t ints = 2 + 2 * static_cast<size_t>(comm->nranks);
  auto* buffer = static_cast<int32_t*>(std::malloc(ints * sizeof(int32_t)));
  if (buffer == nullptr) return cn::Fail(ncclSystemError, "out of memory");
  buffer[0] = color;
  buffer[1] = key;
  cn::Task task{};
  task.kind = cn::TaskKind::kSplit;
  task.comm = comm;
  task.split.color = color;
  task.split.key = key;
  task.split.buffer = buffer;
  task.split.out = newcomm;
  task.split.stage = cn::kSplitGather;
  cn::Reduction none{};
  none.desc_op = -1;
  cn::InitCollState(&task.split.gather, cn::OpKind::kSplitGather, buffer, buffer + 2, 2,
                    ncclInt32, -1, none);
  return cn::Finish(cn::Submit(task));
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  if (!cn::CommValid(comm)) return cn::Fail(ncclInvalidArgument, "invalid communicator");
  if (newcomm == nullptr || excludeRanksCount < 0 ||
      (excludeRanksCount > 0 && excludeRanksList == nullptr)) {
    return cn::Fail(ncclInvalidArgument, "invalid arguments");
  }
  if (!cn::ConfigValid(config)) return cn::Fail(ncclInvalidArgument, "config not from NCCL_CONFIG_INITIALIZER");
  // Sorted, without duplicates: the same list on every rank however it was written.
  const int n = comm->nranks;
  auto* excluded = static_cast<int*>(std::malloc(sizeof(int) * (excludeRanksCount + 1u)));
  if (excluded == nullptr) return cn::Fail(ncclSystemError, "out of memory");
  int nexcluded = 0;
  for (int i = 0; i < excludeRanksCount; ++i) {
    const int r = excludeRanksList[i];
    if (r < 0 || r >= n || r == comm->rank) {
      std::free(excluded);
      return cn::Fail(ncclInvalidArgument, "invalid excluded rank");
    }
    int k = nexcluded;
    while (k > 0 && excluded[k - 1] > r) --k;
    if (k > 0 && excluded[k - 1] == r) continue;
    std::memmove(excluded + k + 1, excluded + k, sizeof(int) * static_cast<size_t>(nexcluded - k));
    excluded[k] = r;
    ++nexcluded;
  }
  int below = 0;
  while (below < nexcluded && excluded[below] < comm->rank) ++below;
  if ((shrinkFlags & NCCL_SHRINK_ABORT) && comm->state.load() == cn::kCommLive) {
    cn::InterruptComm(comm, cn::kCommRevoked);  // ongoing parent operations end first
  }
  const uint64_t serial = ++comm->child_serial;
  const uint64_t key = cn::ShrinkChildKey(comm->key, serial, excluded, nexcluded);
  std::free(excluded);
  ncclComm* child = cn::NewComm(comm->rank - below, n - nexcluded, key);
  if (child == nullptr) return cn::Fail(ncclSystemError, "out of memory");
  child->spin = comm->spin;
  return cn::StartInit(child, newcomm, config);
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (cn::EnumValue(result)) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t /*comm*/) { return cn::LastError(); }

void ncclResetDebugInit() {}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (!cn::CommValid(comm)) return cn::Fail(ncclInvalidArgument, "invalid communicator");
  if (asyncError == nullptr) return cn::Fail(ncclInvalidArgument, "NULL asyncError");
  const int32_t stream_error = comm->async_error.load();
  if (comm->state.load() == cn::kCommAborted) {
    *asyncError = ncclSystemError;
  } else if (stream_error != ncclSuccess) {
    *asyncError = static_cast<ncclResult_t>(stream_error);  // an operation on a stream failed
  } else {
    *asyncError = comm->ready.load() ? ncclSuccess : ncclInProgress;  // grouped init pending
  }
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (!cn::CommValid(comm)) return cn::Fail(ncclInvalidArgument, "invalid communicator");
  if (count == nullptr) return cn::Fail(ncclInvalidArgument, "NULL count");
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (!cn::CommValid(comm)) return cn::Fail(ncclInvalidArgument, "invalid communicator");
  if (device == nullptr) return cn::Fail(ncclInvalidArgument, "NULL device");
  *device = 0;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (!cn::CommValid(comm)) return cn::Fail(ncclInvalidArgument, "invalid communicator");
  if (rank == nullptr) return cn::Fail(ncclInvalidArgument, "NULL rank");
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  if (!cn::CommValid(comm)) return cn::Fail(ncclInvalidArgument, "invalid communicator");
  if (handle == nullptr) return cn::Fail(ncclInvalidArgument, "NULL handle");
  auto* token = static_cast<ncclWindow_vidmem*>(std::malloc(sizeof(ncclWindow_vidmem)));
  if (token == nullptr) return cn::Fail(ncclSystemError, "out of memory");
  *token = ncclWindow_vidmem{cn::kRegMagic, buff, size};
  *handle = token;
  return ncclSuccess;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  if (!cn::CommValid(comm)) return cn::Fail(ncclInvalidArgument, "invalid communicator");
  auto* token = static_cast<ncclWindow_vidmem*>(handle);
  if (token == nullptr || token->magic != cn::kRegMagic) {
    return cn::Fail(ncclInvalidArgument, "invalid registration handle");
  }
  token->magic = 0;
  std::free(token);
  return ncclSuccess;
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int /*winFlags*/) {
  if (!cn::CommValid(comm)) return cn::Fail(ncclInvalidArgument, "invalid communicator");
  if (win == nullptr) return cn::Fail(ncclInvalidArgument, "NULL window");
  auto* window = static_cast<ncclWindow_vidmem*>(std::malloc(sizeof(ncclWindow_vidmem)));
  if (window == nullptr) return cn::Fail(ncclSystemError, "out of memory");
  *window = ncclWindow_vidmem{cn::kWindowMagic, buff, size};
  *win = window;
  return ncclSuccess;
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  if (!cn::CommValid(comm)) return cn::Fail(ncclInvalidArgument, "invalid communicator");
  if (win == nullptr || win->magic != cn::kWindowMagic) {
    return cn::Fail(ncclInvalidArgument, "invalid window");
  }
  win->magic = 0;
  std::free(win);
  return ncclSuccess;
}

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) return cn::Fail(ncclInvalidArgument, "NULL pointer");
  void* memory = nullptr;
  if (posix_memalign(&memory, 4096, size == 0 ? 1 : size) != 0) {
    return cn::Fail(ncclSystemError, "out of memory");
  }
  *ptr = memory;
  return ncclSuccess;
}

ncclResult_t ncclMemFree(void* ptr) {
  std::free(ptr);
  return ncclSuccess;
}

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

// The profiling entry points (pnccl*) are the same functions under a second name.
#define COLLWATCH_PNCCL_ALIAS(name) __typeof__(name) p##name __attribute__((alias(#name)))

COLLWATCH_PNCCL_ALIAS(ncclGetVersion);
COLLWATCH_PNCCL_ALIAS(ncclGetUniqueId);
COLLWATCH_PNCCL_ALIAS(ncclCommInitRank);
COLLWATCH_PNCCL_ALIAS(ncclCommInitRankConfig);
COLLWATCH_PNCCL_ALIAS(ncclCommInitRankScalable);
COLLWATCH_PNCCL_ALIAS(ncclCommInitAll);
COLLWATCH_PNCCL_ALIAS(ncclCommFinalize);
COLLWATCH_PNCCL_ALIAS(ncclCommDestroy);
COLLWATCH_PNCCL_ALIAS(ncclCommAbort);
COLLWATCH_PNCCL_ALIAS(ncclCommRevoke);
COLLWATCH_PNCCL_ALIAS(ncclCommSplit);
COLLWATCH_PNCCL_ALIAS(ncclCommShrink);
COLLWATCH_PNCCL_ALIAS(ncclGetErrorString);
COLLWATCH_PNCCL_ALIAS(ncclGetLastError);
COLLWATCH_PNCCL_ALIAS(ncclCommGetAsyncError);
COLLWATCH_PNCCL_ALIAS(ncclCommCount);
COLLWATCH_PNCCL_ALIAS(ncclCommCuDevice);
COLLWATCH_PNCCL_ALIAS(ncclCommUserRank);
COLLWATCH_PNCCL_ALIAS(ncclCommRegister);
COLLWATCH_PNCCL_ALIAS(ncclCommDeregister);
COLLWATCH_PNCCL_ALIAS(ncclCommWindowRegister);
COLLWATCH_PNCCL_ALIAS(ncclCommWindowDeregister);
COLLWATCH_PNCCL_ALIAS(ncclMemAlloc);
COLLWATCH_PNCCL_ALIAS(ncclMemFree);
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
// Declared deprecated in nccl.h; naming it in the alias is not a use by the program.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
COLLWATCH_PNCCL_ALIAS(ncclResetDebugInit);
#pragma GCC diagnostic pop
