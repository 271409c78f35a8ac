// The LD_PRELOAD surface of libcollwatch.so: one definition per public NCCL entry point
// that starts, groups or ends communication or changes communicators. Each finds the
// real function (lazily: a framework may load NCCL after us), forwards to it unchanged
// and tells the recorder before and after. All recording state is in recorder.cc and
// recorder_lifecycle.cc.
// Threading: any thread. A thread-local depth counter keeps NCCL's own calls through its
// exported names (e.g. ncclBcast -> ncclBroadcast) from being recorded twice.
#include <nccl.h>

#include <atomic>
#include <cstdio>

#include "interposer/real_symbols.h"
#include "interposer/recorder.h"
#include "ring/hash.h"

#define COLLWATCH_HOOK extern "C" __attribute__((visibility("default")))

namespace collwatch {
namespace {

using ring::ApiFn;
using ring::kUnset;

__attribute__((tls_model("initial-exec"))) thread_local int t_hook_depth = 0;

// True for the outermost hook on this thread: only that one records.
class HookScope {
 public:
  HookScope() noexcept : outermost_(t_hook_depth++ == 0) {}
  ~HookScope() { --t_hook_depth; }
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;
  bool outermost() const noexcept { return outermost_; }

 private:
  bool outermost_;
};

// The real entry points, resolved on first use.
#define COLLWATCH_NCCL_FUNCTIONS(X)                                                           \
  X(ncclAllReduce) X(ncclBroadcast) X(ncclBcast) X(ncclReduce) X(ncclAllGather)               \
  X(ncclReduceScatter) X(ncclAlltoAll) X(ncclGather) X(ncclScatter) X(ncclSend) X(ncclRecv)   \
  X(ncclGroupStart) X(ncclGroupEnd) X(ncclGroupSimulateEnd) X(ncclCommInitRank)               \
  X(ncclCommInitRankConfig) X(ncclCommInitAll) X(ncclCommInitRankScalable) X(ncclCommSplit)   \
  X(ncclCommShrink) X(ncclCommFinalize) X(ncclCommDestroy) X(ncclCommAbort) X(ncclCommRevoke) \
  X(ncclCommGetAsyncError) X(ncclGetVersion) X(ncclGetUniqueId) X(ncclGetErrorString)         \
  X(ncclCommUserRank) X(ncclCommCount)

struct RealFunctions {
#define COLLWATCH_SLOT(name) std::atomic<decltype(&::name)> name{nullptr};
  COLLWATCH_NCCL_FUNCTIONS(COLLWATCH_SLOT)
#undef COLLWATCH_SLOT
};
RealFunctions g_real;

template <typename Fn>
__attribute__((noinline)) Fn ResolveSlow(std::atomic<Fn>& slot, const char* name) noexcept {
  Fn fn = slot.load(std::memory_order_acquire);
  if (fn == nullptr) {
    fn = reinterpret_cast<Fn>(FindRealSymbol(name));
    if (fn != nullptr) {
      slot.store(fn, std::memory_order_release);
    } else {
      std::fprintf(stderr, "collwatch: no NCCL library provides %s\n", name);
    }
  }
  return fn;
}

template <typename Fn>
inline __attribute__((always_inline)) Fn Resolve(std::atomic<Fn>& slot, const char* name) noexcept {
  Fn fn = slot.load(std::memory_order_acquire);
  return fn != nullptr ? fn : ResolveSlow(slot, name);
}

#define COLLWATCH_REAL(name) ::collwatch::Resolve(::collwatch::g_real.name, #name)

// Brackets `forward` with recording: `begin(&call)` before, `finish(&call, result)` after,
// at the outermost hook level only.
template <typename Begin, typename Forward, typename FinishFn>
auto Recorded(Begin begin, Forward forward, FinishFn finish) {
  HookScope scope;
  if (!scope.outermost()) return forward();
  PendingCall call;
  begin(&call);
  const auto result = forward();
  finish(&call, result);
  return result;
}

void FinishPlain(PendingCall* call, ncclResult_t result) noexcept { Finish(call, result); }
void FinishTeardown(PendingCall* call, ncclResult_t result) noexcept {
  FinishCommTeardown(call, result);
}

int QueryUserRank(const void* comm, int* rank) noexcept {
  auto real = COLLWATCH_REAL(ncclCommUserRank);
  return real != nullptr ? real(static_cast<ncclComm_t>(const_cast<void*>(comm)), rank) : -1;
}

int QueryCount(const void* comm, int* count) noexcept {
  auto real = COLLWATCH_REAL(ncclCommCount);
  return real != nullptr ? real(static_cast<ncclComm_t>(const_cast<void*>(comm)), count) : -1;
}

__attribute__((constructor)) void InstallCommQueries() noexcept {
  SetCommQueries(&QueryUserRank, &QueryCount);
}

template <typename Fn, typename... Args>
ncclResult_t Collective(Fn real, ApiFn fn, const void* comm, size_t count, ncclDataType_t dtype,
                        int redop, int root, cudaStream_t stream, Args... args) {
  if (real == nullptr) return ncclSystemError;
  return Recorded(
      [&](PendingCall* call) {
        BeginCollective(call, fn, comm, count, dtype, redop, root, stream);
      },
      [&] { return real(args...); }, &FinishPlain);
}

template <typename Fn, typename... Args>
ncclResult_t PointToPoint(Fn real, ApiFn fn, const void* comm, size_t count, ncclDataType_t dtype,
                          int peer, cudaStream_t stream, Args... args) {
  if (real == nullptr) return ncclSystemError;
  return Recorded(
      [&](PendingCall* call) { BeginP2p(call, fn, comm, count, dtype, peer, stream); },
      [&] { return real(args...); }, &FinishPlain);
}

template <typename Fn, typename... Args>
ncclResult_t Group(Fn real, ApiFn fn, Args... args) {
  if (real == nullptr) return ncclSystemError;
  return Recorded([&](PendingCall* call) { BeginGroup(call, fn); },
                  [&] { return real(args...); }, &FinishPlain);
}

template <typename Fn, typename... Args>
ncclResult_t Teardown(Fn real, ApiFn fn, ncclComm_t comm, Args... args) {
  if (real == nullptr) return ncclSystemError;
  return Recorded([&](PendingCall* call) { BeginCommTeardown(call, fn, comm); },
                  [&] { return real(comm, args...); }, &FinishTeardown);
}

// Creation calls hand the new communicator back through `out`, valid on success or
// ncclInProgress only.
const void* Created(ncclResult_t result, const ncclComm_t* out) noexcept {
  return (out != nullptr && (result == ncclSuccess || result == ncclInProgress)) ? *out : nullptr;
}

}  // namespace
}  // namespace collwatch

using collwatch::ApiFn;
using collwatch::PendingCall;
using collwatch::kUnset;

// ---- Collectives -------------------------------------------------------------------

COLLWATCH_HOOK ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                          ncclDataType_t datatype, ncclRedOp_t op,
                                          ncclComm_t comm, cudaStream_t stream) {
  return collwatch::Collective(COLLWATCH_REAL(ncclAllReduce), ApiFn::kAllReduce, comm, count,
                               datatype, op, kUnset, stream, sendbuff, recvbuff, count, datatype,
                               op, comm, stream);
}

COLLWATCH_HOOK ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                          ncclDataType_t datatype, int root, ncclComm_t comm,
                                          cudaStream_t stream) {
  return collwatch::Collective(COLLWATCH_REAL(ncclBroadcast), ApiFn::kBroadcast, comm, count,
                               datatype, kUnset, root, stream, sendbuff, recvbuff, count,
                               datatype, root, comm, stream);
}

COLLWATCH_HOOK ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                                      ncclComm_t comm, cudaStream_t stream) {
  return collwatch::Collective(COLLWATCH_REAL(ncclBcast), ApiFn::kBcast, comm, count, datatype,
                               kUnset, root, stream, buff, count, datatype, root, comm, stream);
}

COLLWATCH_HOOK ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                       ncclDataType_t datatype, ncclRedOp_t op, int root,
                                       ncclComm_t comm, cudaStream_t stream) {
  return collwatch::Collective(COLLWATCH_REAL(ncclReduce), ApiFn::kReduce, comm, count, datatype,
                               op, root, stream, sendbuff, recvbuff, count, datatype, op, root,
                               comm, stream);
}

COLLWATCH_HOOK ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                          ncclDataType_t datatype, ncclComm_t comm,
                                          cudaStream_t stream) {
  return collwatch::Collective(COLLWATCH_REAL(ncclAllGather), ApiFn::kAllGather, comm, sendcount,
                               datatype, kUnset, kUnset, stream, sendbuff, recvbuff, sendcount,
                               datatype, comm, stream);
}

COLLWATCH_HOOK ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff,
                                              size_t recvcount, ncclDataType_t datatype,
                                              ncclRedOp_t op, ncclComm_t comm,
                                              cudaStream_t stream) {
  return collwatch::Collective(COLLWATCH_REAL(ncclReduceScatter), ApiFn::kReduceScatter, comm,
                               recvcount, datatype, op, kUnset, stream, sendbuff, recvbuff,
                               recvcount, datatype, op, comm, stream);
}

COLLWATCH_HOOK ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                         ncclDataType_t datatype, ncclComm_t comm,
                                         cudaStream_t stream) {
  return collwatch::Collective(COLLWATCH_REAL(ncclAlltoAll), ApiFn::kAlltoAll, comm, count,
                               datatype, kUnset, kUnset, stream, sendbuff, recvbuff, count,
                               datatype, comm, stream);
}

COLLWATCH_HOOK ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                                       ncclDataType_t datatype, int root, ncclComm_t comm,
                                       cudaStream_t stream) {
  return collwatch::Collective(COLLWATCH_REAL(ncclGather), ApiFn::kGather, comm, count, datatype,
                               kUnset, root, stream, sendbuff, recvbuff, count, datatype, root,
                               comm, stream);
}

COLLWATCH_HOOK ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                                        ncclDataType_t datatype, int root, ncclComm_t comm,
                                        cudaStream_t stream) {
  return collwatch::Collective(COLLWATCH_REAL(ncclScatter), ApiFn::kScatter, comm, count,
                               datatype, kUnset, root, stream, sendbuff, recvbuff, count,
                               datatype, root, comm, stream);
}

// ---- Point to point ----------------------------------------------------------------

COLLWATCH_HOOK ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype,
                                     int peer, ncclComm_t comm, cudaStream_t stream) {
  return collwatch::PointToPoint(COLLWATCH_REAL(ncclSend), ApiFn::kSend, comm, count, datatype,
                                 peer, stream, sendbuff, count, datatype, peer, comm, stream);
}

COLLWATCH_HOOK ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype,
                                     int peer, ncclComm_t comm, cudaStream_t stream) {
  return collwatch::PointToPoint(COLLWATCH_REAL(ncclRecv), ApiFn::kRecv, comm, count, datatype,
                                 peer, stream, recvbuff, count, datatype, peer, comm, stream);
}

// ---- Groups ------------------------------------------------------------------------

COLLWATCH_HOOK ncclResult_t ncclGroupStart() {
  return collwatch::Group(COLLWATCH_REAL(ncclGroupStart), ApiFn::kGroupStart);
}

COLLWATCH_HOOK ncclResult_t ncclGroupEnd() {
  return collwatch::Group(COLLWATCH_REAL(ncclGroupEnd), ApiFn::kGroupEnd);
}

COLLWATCH_HOOK ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  return collwatch::Group(COLLWATCH_REAL(ncclGroupSimulateEnd), ApiFn::kGroupSimulateEnd,
                          simInfo);
}

// ---- Communicator lifecycle --------------------------------------------------------

COLLWATCH_HOOK ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId,
                                             int rank) {
  auto real = COLLWATCH_REAL(ncclCommInitRank);
  if (real == nullptr) return ncclSystemError;
  return collwatch::Recorded(
      [&](PendingCall* call) {
        collwatch::BeginCommInit(call, ApiFn::kCommInitRank, &commId, sizeof commId, rank, nranks);
      },
      [&] { return real(comm, nranks, commId, rank); },
      [&](PendingCall* call, ncclResult_t result) {
        collwatch::FinishCommCreated(call, result, collwatch::Created(result, comm));
      });
}

COLLWATCH_HOOK ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks,
                                                   ncclUniqueId commId, int rank,
                                                   ncclConfig_t* config) {
  auto real = COLLWATCH_REAL(ncclCommInitRankConfig);
  if (real == nullptr) return ncclSystemError;
  return collwatch::Recorded(
      [&](PendingCall* call) {
        collwatch::BeginCommInit(call, ApiFn::kCommInitRankConfig, &commId, sizeof commId, rank,
                                 nranks);
      },
      [&] { return real(comm, nranks, commId, rank, config); },
      [&](PendingCall* call, ncclResult_t result) {
        collwatch::FinishCommCreated(call, result, collwatch::Created(result, comm));
      });
}

COLLWATCH_HOOK ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank,
                                                     int nId, ncclUniqueId* commIds,
                                                     ncclConfig_t* config) {
  auto real = COLLWATCH_REAL(ncclCommInitRankScalable);
  if (real == nullptr) return ncclSystemError;
  const uint64_t id_bytes =
      (commIds != nullptr && nId > 0) ? static_cast<uint64_t>(nId) * sizeof(ncclUniqueId) : 0;
  return collwatch::Recorded(
      [&](PendingCall* call) {
        collwatch::BeginCommInit(call, ApiFn::kCommInitRankScalable, commIds, id_bytes, myrank,
                                 nranks);
      },
      [&] { return real(newcomm, nranks, myrank, nId, commIds, config); },
      [&](PendingCall* call, ncclResult_t result) {
        collwatch::FinishCommCreated(call, result, collwatch::Created(result, newcomm));
      });
}

COLLWATCH_HOOK ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  auto real = COLLWATCH_REAL(ncclCommInitAll);
  if (real == nullptr) return ncclSystemError;
  return collwatch::Recorded(
      [&](PendingCall* call) { collwatch::BeginCommInitAll(call, ndev); },
      [&] { return real(comm, ndev, devlist); },
      [&](PendingCall* call, ncclResult_t result) {
        collwatch::FinishCommInitAll(call, result, reinterpret_cast<const void* const*>(comm));
      });
}

COLLWATCH_HOOK ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key,
                                          ncclComm_t* newcomm, ncclConfig_t* config) {
  auto real = COLLWATCH_REAL(ncclCommSplit);
  if (real == nullptr) return ncclSystemError;
  return collwatch::Recorded(
      [&](PendingCall* call) { collwatch::BeginCommChild(call, ApiFn::kCommSplit, comm, color); },
      [&] { return real(comm, color, key, newcomm, config); },
      [&](PendingCall* call, ncclResult_t result) {
        collwatch::FinishCommCreated(call, result, collwatch::Created(result, newcomm));
      });
}

COLLWATCH_HOOK ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList,
                                           int excludeRanksCount, ncclComm_t* newcomm,
                                           ncclConfig_t* config, int shrinkFlags) {
  auto real = COLLWATCH_REAL(ncclCommShrink);
  if (real == nullptr) return ncclSystemError;
  return collwatch::Recorded(
      [&](PendingCall* call) {
        collwatch::BeginCommChild(call, ApiFn::kCommShrink, comm, excludeRanksCount);
      },
      [&] {
        return real(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
      },
      [&](PendingCall* call, ncclResult_t result) {
        collwatch::FinishCommCreated(call, result, collwatch::Created(result, newcomm));
      });
}

COLLWATCH_HOOK ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  return collwatch::Teardown(COLLWATCH_REAL(ncclCommFinalize), ApiFn::kCommFinalize, comm);
}

COLLWATCH_HOOK ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  return collwatch::Teardown(COLLWATCH_REAL(ncclCommDestroy), ApiFn::kCommDestroy, comm);
}

COLLWATCH_HOOK ncclResult_t ncclCommAbort(ncclComm_t comm) {
  return collwatch::Teardown(COLLWATCH_REAL(ncclCommAbort), ApiFn::kCommAbort, comm);
}

COLLWATCH_HOOK ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  return collwatch::Teardown(COLLWATCH_REAL(ncclCommRevoke), ApiFn::kCommRevoke, comm,
                             revokeFlags);
}

// Polled constantly by frameworks' watchdogs: recorded only when it reports a new error.
COLLWATCH_HOOK ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  auto real = COLLWATCH_REAL(ncclCommGetAsyncError);
  if (real == nullptr) return ncclSystemError;
  collwatch::HookScope scope;
  const ncclResult_t result = real(comm, asyncError);
  if (scope.outermost() && result == ncclSuccess && asyncError != nullptr) {
    collwatch::RecordAsyncError(comm, *asyncError);
  }
  return result;
}

// ---- Queries -----------------------------------------------------------------------

COLLWATCH_HOOK ncclResult_t ncclGetVersion(int* version) {
  auto real = COLLWATCH_REAL(ncclGetVersion);
  if (real == nullptr) return ncclSystemError;
  return collwatch::Recorded(
      [&](PendingCall* call) { collwatch::BeginQuery(call, ApiFn::kGetVersion); },
      [&] { return real(version); },
      [&](PendingCall* call, ncclResult_t result) {
        const bool known = result == ncclSuccess && version != nullptr;
        collwatch::FinishQuery(call, result, known ? static_cast<uint64_t>(*version) : 0);
      });
}

COLLWATCH_HOOK ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  auto real = COLLWATCH_REAL(ncclGetUniqueId);
  if (real == nullptr) return ncclSystemError;
  return collwatch::Recorded(
      [&](PendingCall* call) { collwatch::BeginQuery(call, ApiFn::kGetUniqueId); },
      [&] { return real(uniqueId); },
      [&](PendingCall* call, ncclResult_t result) {
        const bool known = result == ncclSuccess && uniqueId != nullptr;
        collwatch::FinishQuery(call, result,
                               known ? collwatch::Hash64(uniqueId, sizeof *uniqueId) : 0);
      });
}

COLLWATCH_HOOK const char* ncclGetErrorString(ncclResult_t code) {
  auto real = COLLWATCH_REAL(ncclGetErrorString);
  if (real == nullptr) return "collwatch: no NCCL library is loaded";
  return collwatch::Recorded(
      [&](PendingCall* call) { collwatch::BeginQuery(call, ApiFn::kGetErrorString); },
      [&] { return real(code); },
      [&](PendingCall* call, const char*) {
        collwatch::FinishQuery(call, 0, static_cast<uint64_t>(static_cast<uint32_t>(code)));
      });
}
