// NCCL's profiler plugin interface, version 5 (NCCL 2.28), declared here as NCCL defines
// it (src/include/plugin/profiler/profiler_v5.h, which NCCL does not install): the CPU
// NCCL backend calls a plugin through it as NCCL does, and libcollwatch.so is one.
// A plugin exports a data object `ncclProfiler_v5` of type NcclProfilerV5; NCCL finds it
// with dlsym in the library NCCL_PROFILER_PLUGIN names. Offsets are NCCL's (LP64),
// checked below. Threading: NCCL calls a plugin from any of its threads, concurrently.
#ifndef COLLWATCH_RING_NCCL_PROFILER_ABI_H_
#define COLLWATCH_RING_NCCL_PROFILER_ABI_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace collwatch::nccl_profiler {

// Event types, also the bits of the activation mask.
enum EventType : uint64_t {
  kGroup = 1 << 0,          // one kernel plan of a group launch
  kColl = 1 << 1,           // a collective task, at launch (parent: its CollApi event)
  kP2p = 1 << 2,            // a send or receive task, at launch (parent: its P2pApi event)
  kProxyOp = 1 << 3,
  kProxyStep = 1 << 4,
  kProxyCtrl = 1 << 5,
  kKernelCh = 1 << 6,       // one channel's part of a task on the GPU (parent: Coll or P2p)
  kNetPlugin = 1 << 7,
  kGroupApi = 1 << 8,       // the application's group (or the implicit one of one call)
  kCollApi = 1 << 9,        // a collective call, on the calling thread, inside it
  kP2pApi = 1 << 10,        // a send or receive call, likewise
  kKernelLaunch = 1 << 11,
};

// recordEventState states collwatch uses (NCCL's ncclProfilerEventState_v5_t numbers).
enum EventState : int {
  kKernelChStop = 22,       // args: the channel's GPU stop time (kernel_ch_timer)
  kGroupStartApiStop = 23,
  kGroupEndApiStart = 24,
};

// ncclProfilerEventDescr_v5_t.
struct EventDescr {
  uint64_t type;
  void* parent;  // the handle startEvent returned for the parent event (or null)
  int rank;      // Coll, P2p, ProxyOp, ProxyStep, NetPlugin
  union {
    struct {
      bool graph_captured;
      int group_depth;
    } group_api;
    struct {
      const char* func;      // "AllReduce", ...: the call's
      size_t count;          // the call's, in elements
      const char* datatype;  // "ncclFloat32", ...
      int root;
      void* stream;
      bool graph_captured;
    } coll_api;
    struct {
      const char* func;  // "Send", "Recv"
      size_t count;
      const char* datatype;
      void* stream;
      bool graph_captured;
    } p2p_api;
    struct {
      void* stream;
    } kernel_launch;
    struct {
      uint64_t seq_number;  // per communicator and function, from 0
      const char* func;
      const void* send_buff;
      void* recv_buff;
      size_t count;  // all-gather and broadcast: bytes (datatype "ncclInt8")
      int root;
      const char* datatype;
      uint8_t channels;
      uint8_t warps;
      const char* algo;
      const char* proto;
      void* parent_group;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t channels;
      void* parent_group;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channel_id;
      int peer;
      int steps;
      int chunk_size;
      int is_send;
    } proxy_op;
    struct {
      int step;
    } proxy_step;
    struct {
      uint8_t channel_id;
      uint64_t timer;  // the channel's GPU start time (%globaltimer, ns)
    } kernel_ch;
    struct {
      int64_t id;
      void* data;
    } net_plugin;
  };
};

// ncclProfilerEventStateArgs_v5_t.
union EventStateArgs {
  struct {
    size_t trans_size;
  } proxy_step;
  struct {
    int appended_proxy_ops;
  } proxy_ctrl;
  struct {
    void* data;
  } net_plugin;
  struct {
    uint64_t timer;
  } kernel_ch;
};

using DebugLogger = void (*)(int level, unsigned long flags, const char* file, int line, const char* format, ...);

// ncclProfiler_v5_t. Results are ncclResult_t (0: success); NCCL ignores all but init's.
struct NcclProfilerV5 {
  const char* name;
  int (*init)(void** context, uint64_t comm_id, int* activation_mask, const char* comm_name, int nodes,
              int nranks, int rank, DebugLogger log);
  int (*start_event)(void* context, void** handle, EventDescr* descr);
  int (*stop_event)(void* handle);
  int (*record_event_state)(void* handle, int state, EventStateArgs* args);
  int (*finalize)(void* context);
};

inline constexpr char kSymbolV5[] = "ncclProfiler_v5";

// The strings NCCL puts in descriptors. Datatypes, by ncclDataType_t value (NCCL 2.28).
inline constexpr const char* kDatatypeNames[] = {
    "ncclInt8",    "ncclUint8",  "ncclInt32",   "ncclUint32",   "ncclInt64",      "ncclUint64",
    "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
inline constexpr int kDatatypes = sizeof kDatatypeNames / sizeof kDatatypeNames[0];
// Collective functions, by their index in NCCL's per-communicator seqNumber counters.
inline constexpr const char* kCollFuncNames[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"};
inline constexpr int kCollFuncs = sizeof kCollFuncNames / sizeof kCollFuncNames[0];

static_assert(sizeof(EventDescr) == 112, "ncclProfilerEventDescr_v5_t");
static_assert(offsetof(EventDescr, coll_api.count) == 32 && offsetof(EventDescr, coll_api.graph_captured) == 64);
static_assert(offsetof(EventDescr, coll.seq_number) == 24 && offsetof(EventDescr, coll.channels) == 80 &&
              offsetof(EventDescr, coll.parent_group) == 104);
static_assert(offsetof(EventDescr, p2p.peer) == 56 && offsetof(EventDescr, p2p.channels) == 60);
static_assert(offsetof(EventDescr, kernel_ch.timer) == 32);
static_assert(sizeof(EventStateArgs) == 8 && sizeof(NcclProfilerV5) == 48);

}  // namespace collwatch::nccl_profiler

#endif  // COLLWATCH_RING_NCCL_PROFILER_ABI_H_
