// The exported NCCL 2.28 API for communicators: unique ids, creation (by id, config,
// several ids, InitAll), split and shrink, finalize, destroy, abort, revoke, and the
// queries (error strings, last error, async error, count, device, rank).
// Threading: NCCL's rules (one thread at a time per communicator; abort, revoke and
// queries from any thread). Built without exceptions, so none can escape; allocation only
// at communicator creation, split and shrink.
#include <sys/random.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "cpu_nccl/api_internal.h"
#include "cpu_nccl/comm.h"
#include "cpu_nccl/cuda_driver.h"
#include "cpu_nccl/engine.h"
#include "cpu_nccl/task.h"
#include "ring/hash.h"

namespace collwatch::cpu_nccl {
namespace {

constexpr unsigned kConfigMagic = 0xcafebeef;  // NCCL_CONFIG_INITIALIZER

bool ConfigValid(const ncclConfig_t* config) noexcept {
  return config == nullptr || config->magic == kConfigMagic;
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
// Declared deprecated in nccl.h; naming it in the alias is not a use by the program.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
COLLWATCH_PNCCL_ALIAS(ncclResetDebugInit);
#pragma GCC diagnostic pop
