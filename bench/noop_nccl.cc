// A no-op NCCL for benchmarks: every entry point the interposer wraps returns success at
// once, so a benchmark measures the interposer's cost and nothing else.
#include <nccl.h>

#include <cstdint>

#define NOOP_API extern "C" __attribute__((visibility("default")))

namespace {
uintptr_t g_next_comm = 0x1000;
}

NOOP_API ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; ++i) id->internal[i] = static_cast<char>(i);
  return ncclSuccess;
}
NOOP_API ncclResult_t ncclCommInitRank(ncclComm_t* comm, int, ncclUniqueId, int) {
  g_next_comm += 0x100;
  *comm = reinterpret_cast<ncclComm_t>(g_next_comm);
  return ncclSuccess;
}
NOOP_API ncclResult_t ncclCommUserRank(const ncclComm_t, int* rank) {
  *rank = 0;
  return ncclSuccess;
}
NOOP_API ncclResult_t ncclCommCount(const ncclComm_t, int* count) {
  *count = 8;
  return ncclSuccess;
}
NOOP_API ncclResult_t ncclCommDestroy(ncclComm_t) { return ncclSuccess; }
NOOP_API ncclResult_t ncclAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                    ncclComm_t, cudaStream_t) {
  return ncclSuccess;
}
NOOP_API ncclResult_t ncclSend(const void*, size_t, ncclDataType_t, int, ncclComm_t,
                               cudaStream_t) {
  return ncclSuccess;
}
NOOP_API ncclResult_t ncclGroupStart() { return ncclSuccess; }
NOOP_API ncclResult_t ncclGroupEnd() { return ncclSuccess; }
