// Reading NCCL's profiler descriptors (see profiler_launch_event.h). Threading: pure.
#include "interposer/profiler_launch_event.h"

#include <cstring>

namespace collwatch {

namespace abi = nccl_profiler;
using ring::ApiFn;

namespace {

// NCCL's collectives in the order of abi::kCollFuncNames (= abi::FuncNumber).
constexpr ApiFn kCollectiveFns[abi::kCollFuncs] = {ApiFn::kBroadcast, ApiFn::kReduce, ApiFn::kAllGather,
                                                   ApiFn::kReduceScatter, ApiFn::kAllReduce};

// A P2p event's "Send" or "Recv" (kNone otherwise).
ApiFn P2pFn(const char* func) noexcept {
  if (func == nullptr) return ApiFn::kNone;
  if (std::strcmp(func, "Send") == 0) return ApiFn::kSend;
  return std::strcmp(func, "Recv") == 0 ? ApiFn::kRecv : ApiFn::kNone;
}

// Version 1's numbers for the same.
ApiFn FnOfNumber(uint8_t func) noexcept {
  if (func < abi::kCollFuncs) return kCollectiveFns[func];
  if (func == abi::kFuncSend) return ApiFn::kSend;
  return func == abi::kFuncRecv ? ApiFn::kRecv : ApiFn::kNone;
}

}  // namespace

ApiFn CollectiveFn(const char* func) noexcept {
  for (int i = 0; i < abi::kCollFuncs; ++i) {
    if (func != nullptr && std::strcmp(func, abi::kCollFuncNames[i]) == 0) return kCollectiveFns[i];
  }
  return ApiFn::kNone;
}

int DtypeOf(const char* name) noexcept {
  for (int i = 0; i < abi::kDatatypes; ++i) {
    if (name != nullptr && std::strcmp(name, abi::kDatatypeNames[i]) == 0) return i;
  }
  return ring::kNoDtype;
}

LaunchEvent LaunchOfV4(const abi::EventDescrV4& descr) noexcept {
  LaunchEvent launch;
  if (descr.type == abi::kColl) {
    launch.fn = CollectiveFn(descr.coll.func);
    launch.count = descr.coll.count;
    launch.dtype = DtypeOf(descr.coll.datatype);
    launch.root_or_peer = descr.coll.root;
    launch.channels = descr.coll.channels;
  } else {
    launch.fn = P2pFn(descr.p2p.func);
    launch.count = descr.p2p.count;
    launch.dtype = DtypeOf(descr.p2p.datatype);
    launch.root_or_peer = descr.p2p.peer;
    launch.channels = descr.p2p.channels;
  }
  return launch;
}

namespace {

// v2 and v3 differ only in fields collwatch does not read.
template <typename Descr>
LaunchEvent LaunchOfV2OrV3(const Descr& descr) noexcept {
  LaunchEvent launch;
  launch.rank = descr.rank;
  if (descr.type == abi::kColl) {
    launch.fn = CollectiveFn(descr.coll.func);
    launch.comm_hash = descr.coll.comm_hash;
    launch.count = descr.coll.count;
    launch.dtype = DtypeOf(descr.coll.datatype);
    launch.root_or_peer = descr.coll.root;
  } else {
    launch.fn = P2pFn(descr.p2p.func);
    launch.comm_hash = descr.p2p.comm_hash;
    launch.count = descr.p2p.count;
    launch.dtype = DtypeOf(descr.p2p.datatype);
    launch.root_or_peer = descr.p2p.peer;
  }
  return launch;
}

}  // namespace

LaunchEvent LaunchOfV3(const abi::EventDescrV3& descr) noexcept { return LaunchOfV2OrV3(descr); }
LaunchEvent LaunchOfV2(const abi::EventDescrV2& descr) noexcept { return LaunchOfV2OrV3(descr); }

LaunchEvent LaunchOfV1(const abi::EventDescrV1& descr) noexcept {
  const bool coll = descr.type == abi::kColl;
  const uint8_t dtype = coll ? descr.coll.datatype : descr.p2p.datatype;
  LaunchEvent launch;
  launch.rank = descr.rank;
  launch.fn = FnOfNumber(coll ? descr.coll.func : descr.p2p.func);
  if (coll != ring::IsCollective(launch.fn)) launch.fn = ApiFn::kNone;  // a send in a Coll event: damage
  launch.comm_hash = coll ? descr.coll.comm_hash : descr.p2p.comm_hash;
  launch.count = coll ? descr.coll.count : descr.p2p.count;
  launch.dtype = dtype < abi::kDatatypes ? dtype : ring::kNoDtype;
  launch.root_or_peer = coll ? descr.coll.root : descr.p2p.peer;
  return launch;
}

}  // namespace collwatch
