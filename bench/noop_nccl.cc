// A no-op NCCL for benchmarks: every entry point the interposer wraps returns success at
// once, so a benchmark measures the interposer's cost and nothing else. A communicator
// remembers the rank and size it was created with (the soak's simulated ranks).
#include <nccl.h>

#include <cstdint>

#define NOOP_API extern "C" __attribute__((visibility("default")))

namespace {
struct NoopComm {
  int rank;
  int nranks;
};
}  // namespace

NOOP_API ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; ++i) id->internal[i] = static_cast<char>(i);
  return ncclSuccess;
}
NOOP_API ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId, int rank) {
  *comm = reinterpret_cast<ncclComm_t>(new NoopComm{rank, nranks});
  return ncclSuccess;
}
NOOP_API ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  *rank = reinterpret_cast<const NoopComm*>(comm)->rank;
  return ncclSuccess;
}
NOOP_API ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  *count = reinterpret_cast<const NoopComm*>(comm)->nranks;
  return ncclSuccess;
}
NOOP_API ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete reinterpret_cast<NoopComm*>(comm);
  return ncclSuccess;
}
NOOP_API ncclResult_t ncclAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                    ncclComm_t, cudaStream_t) {
  return ncclSuccess;
}
NOOP_API ncclResult_t ncclSend(const void*, size_t, ncclDataType_t, int, ncclComm_t,
                               cudaStream_t) {
  return ncclSuccess;
}
NOOP_API ncclResult_t ncclRecv(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
  return ncclSuccess;
}
NOOP_API ncclResult_t ncclGroupStart() { return ncclSuccess; }
NOOP_API ncclResult_t ncclGroupEnd() { return ncclSuccess; }
