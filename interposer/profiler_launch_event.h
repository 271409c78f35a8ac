// NCCL's profiler descriptors of versions 1 to 4 (NCCL 2.23-2.27) read into one form of a
// launch event, and the names NCCL's descriptors use (collective function, datatype) read
// into the ring's. Threading: pure functions, noexcept, no allocation (run inside NCCL's
// calls).
#ifndef COLLWATCH_INTERPOSER_PROFILER_LAUNCH_EVENT_H_
#define COLLWATCH_INTERPOSER_PROFILER_LAUNCH_EVENT_H_

#include <cstdint>

#include "ring/nccl_profiler_abi.h"
#include "ring/ring_format.h"

namespace collwatch {

// A Coll or P2p event of versions 1 to 4 (NCCL launching a task), in one form.
struct LaunchEvent {
  ring::ApiFn fn = ring::ApiFn::kNone;  // kNone: nothing collwatch records
  uint64_t comm_hash = 0;   // v1..v3 (0: the communicator's from init)
  int32_t rank = -1;        // v1..v3
  uint64_t count = 0;       // as NCCL gives it: all-gather and broadcast in bytes
  int dtype = ring::kNoDtype;
  int root_or_peer = ring::kUnset;
  int channels = -1;  // its KernelCh events (v4); -1: the version does not say
};

// "AllReduce" -> the ring's all-reduce (kNone for a name that is no collective).
ring::ApiFn CollectiveFn(const char* func) noexcept;
// "ncclFloat32" -> ncclFloat32 (kNoDtype for a name NCCL 2.28 does not have).
int DtypeOf(const char* name) noexcept;

LaunchEvent LaunchOfV4(const nccl_profiler::EventDescrV4& descr) noexcept;
LaunchEvent LaunchOfV3(const nccl_profiler::EventDescrV3& descr) noexcept;
LaunchEvent LaunchOfV2(const nccl_profiler::EventDescrV2& descr) noexcept;
LaunchEvent LaunchOfV1(const nccl_profiler::EventDescrV1& descr) noexcept;

}  // namespace collwatch

#endif  // COLLWATCH_INTERPOSER_PROFILER_LAUNCH_EVENT_H_
