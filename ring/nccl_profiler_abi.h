// NCCL's profiler plugin interface, versions 1 to 5, declared here as NCCL defines them
// (src/include/plugin/profiler/profiler_v*.h, which NCCL does not install): the CPU NCCL
// backend calls a plugin through them as NCCL does, and libcollwatch.so is one.
// A plugin exports data objects `ncclProfiler_vN`; NCCL finds them with dlsym in the
// library NCCL_PROFILER_PLUGIN names, newest version it knows first: 2.28 asks for v5, then
// v4, v3, v2, v1; 2.27 starts at v4, 2.26 at v3, 2.24 and 2.25 at v2, 2.23 knows only v1.
// Offsets are NCCL's (LP64), checked below. Threading: NCCL calls a plugin from any of its
// threads, concurrently.
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

// ---- Versions 1 to 4 (NCCL 2.23 to 2.27) ---------------------------------------------
// What they lack against version 5: no GroupApi, CollApi, P2pApi or KernelLaunch events
// (a call is seen only when NCCL launches it: its Coll or P2p event, started and stopped
// on the launching thread, parent the plan's Group event); the type is one byte. v4 has
// v5's Coll/P2p/KernelCh contents without the API events, and an init that names the
// communicator (in another argument order than v5's). v1 to v3 init with the context and
// the mask only: the communicator's hash and the rank come in each Coll and P2p
// descriptor, its size nowhere. v3 adds KernelCh events but says neither how many
// channels a task runs on nor when (no timers); v1 and v2 have no kernel events at all.
// v1 gives func and datatype as NCCL's enum numbers, v2 on as strings.

// ncclFunc_t numbers, as v1 gives them (ncclFuncBroadcast = 0 ... ncclFuncRecv = 7).
enum FuncNumber : uint8_t {
  kFuncBroadcast = 0,
  kFuncReduce = 1,
  kFuncAllGather = 2,
  kFuncReduceScatter = 3,
  kFuncAllReduce = 4,
  kFuncSendRecv = 5,
  kFuncSend = 6,
  kFuncRecv = 7,
};

// ncclProfilerEventDescr_v4_t.
struct EventDescrV4 {
  uint8_t type;
  void* parent;
  int rank;
  union {
    struct {
      uint64_t seq_number;
      const char* func;
      const void* send_buff;
      void* recv_buff;
      size_t count;  // all-gather and broadcast: bytes (datatype "ncclInt8")
      int root;
      const char* datatype;
      uint8_t channels;  // the KernelCh events the task will have
      uint8_t warps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t channels;
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
      uint64_t timer;
    } kernel_ch;
    struct {
      int64_t id;
      void* data;
    } net_plugin;
  };
};

// ncclProfilerEventDescr_v3_t; v2's and v1's below differ only in their coll and p2p.
struct EventDescrV3 {
  uint8_t type;
  void* parent;
  int rank;
  union {
    struct {
      const char* comm_name;
      uint64_t comm_hash;  // NCCL's hash of the unique id: equal on every rank
      uint64_t seq_number;
      const char* func;
      const void* send_buff;
      void* recv_buff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t max_channels;  // an upper bound: a small task may run on fewer
      uint8_t warps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* comm_name;
      uint64_t comm_hash;
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
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
      uint8_t channel_id;  // no timer before v4
    } kernel_ch;
    struct {
      int64_t id;
      void* data;
    } net_plugin;
  };
};

// ncclProfilerEventDescr_v2_t.
struct EventDescrV2 {
  uint8_t type;
  void* parent;
  int rank;
  union {
    struct {
      const char* comm_name;
      uint64_t comm_hash;
      uint64_t seq_number;
      const char* func;
      const void* send_buff;
      void* recv_buff;
      size_t count;
      int root;
      const char* datatype;
      size_t traffic_bytes;
      uint8_t max_channels;
      uint8_t warps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* comm_name;
      uint64_t comm_hash;
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
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
  };
};

// ncclProfilerEventDescr_v1_t.
struct EventDescrV1 {
  uint8_t type;
  void* parent;
  int rank;
  union {
    struct {
      const char* comm_name;
      uint64_t comm_hash;
      uint64_t seq_number;
      uint8_t func;  // FuncNumber
      const void* send_buff;
      void* recv_buff;
      size_t count;
      int root;
      uint8_t datatype;  // ncclDataType_t
      uint32_t redop;
      size_t traffic_bytes;
      uint8_t max_channels;
      uint8_t warps;
      uint8_t algo;
      uint8_t proto;
      int is_collnet;
      int is_nvls;
    } coll;
    struct {
      const char* comm_name;
      uint64_t comm_hash;
      uint8_t func;  // FuncNumber
      void* buff;
      uint8_t datatype;  // ncclDataType_t
      size_t count;
      int peer;
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
  };
};

// ncclProfilerEventStateArgs_v4_t is v5's; v1 to v3 share this one.
union EventStateArgsV1 {
  struct {
    size_t trans_size;
    int steps;
  } proxy_op;
  struct {
    int appended_proxy_ops;
  } proxy_ctrl;
};

// ncclProfiler_v4_t: v5's members, init's arguments in v4's order.
struct NcclProfilerV4 {
  const char* name;
  int (*init)(void** context, int* activation_mask, const char* comm_name, uint64_t comm_hash, int nodes,
              int nranks, int rank, DebugLogger log);
  int (*start_event)(void* context, void** handle, EventDescrV4* descr);
  int (*stop_event)(void* handle);
  int (*record_event_state)(void* handle, int state, EventStateArgs* args);
  int (*finalize)(void* context);
};

// ncclProfiler_v1_t to ncclProfiler_v3_t: init knows nothing of the communicator.
template <typename Descr>
struct NcclProfilerV1To3 {
  const char* name;
  int (*init)(void** context, int* activation_mask);
  int (*start_event)(void* context, void** handle, Descr* descr);
  int (*stop_event)(void* handle);
  int (*record_event_state)(void* handle, int state, EventStateArgsV1* args);
  int (*finalize)(void* context);
};
using NcclProfilerV3 = NcclProfilerV1To3<EventDescrV3>;
using NcclProfilerV2 = NcclProfilerV1To3<EventDescrV2>;
using NcclProfilerV1 = NcclProfilerV1To3<EventDescrV1>;

inline constexpr char kSymbolV4[] = "ncclProfiler_v4";
inline constexpr char kSymbolV3[] = "ncclProfiler_v3";
inline constexpr char kSymbolV2[] = "ncclProfiler_v2";
inline constexpr char kSymbolV1[] = "ncclProfiler_v1";

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

static_assert(sizeof(EventDescrV4) == 104, "ncclProfilerEventDescr_v4_t");
static_assert(offsetof(EventDescrV4, rank) == 16 && offsetof(EventDescrV4, coll.seq_number) == 24 &&
              offsetof(EventDescrV4, coll.count) == 56 && offsetof(EventDescrV4, coll.datatype) == 72 &&
              offsetof(EventDescrV4, coll.channels) == 80 && offsetof(EventDescrV4, coll.proto) == 96);
static_assert(offsetof(EventDescrV4, p2p.count) == 48 && offsetof(EventDescrV4, p2p.peer) == 56 &&
              offsetof(EventDescrV4, p2p.channels) == 60 && offsetof(EventDescrV4, kernel_ch.timer) == 32);
static_assert(sizeof(EventDescrV3) == 120, "ncclProfilerEventDescr_v3_t");
static_assert(offsetof(EventDescrV3, coll.comm_hash) == 32 && offsetof(EventDescrV3, coll.func) == 48 &&
              offsetof(EventDescrV3, coll.count) == 72 && offsetof(EventDescrV3, coll.root) == 80 &&
              offsetof(EventDescrV3, coll.datatype) == 88 && offsetof(EventDescrV3, coll.max_channels) == 96 &&
              offsetof(EventDescrV3, coll.proto) == 112);
static_assert(offsetof(EventDescrV3, p2p.comm_hash) == 32 && offsetof(EventDescrV3, p2p.func) == 40 &&
              offsetof(EventDescrV3, p2p.datatype) == 56 && offsetof(EventDescrV3, p2p.count) == 64 &&
              offsetof(EventDescrV3, p2p.peer) == 72 && offsetof(EventDescrV3, kernel_ch.channel_id) == 24);
static_assert(sizeof(EventDescrV2) == 128, "ncclProfilerEventDescr_v2_t");
static_assert(offsetof(EventDescrV2, coll.datatype) == 88 && offsetof(EventDescrV2, coll.traffic_bytes) == 96 &&
              offsetof(EventDescrV2, coll.max_channels) == 104 && offsetof(EventDescrV2, coll.proto) == 120);
static_assert(offsetof(EventDescrV2, p2p.func) == 40 && offsetof(EventDescrV2, p2p.peer) == 72);
static_assert(sizeof(EventDescrV1) == 120, "ncclProfilerEventDescr_v1_t");
static_assert(offsetof(EventDescrV1, coll.func) == 48 && offsetof(EventDescrV1, coll.count) == 72 &&
              offsetof(EventDescrV1, coll.datatype) == 84 && offsetof(EventDescrV1, coll.redop) == 88 &&
              offsetof(EventDescrV1, coll.max_channels) == 104 && offsetof(EventDescrV1, coll.is_nvls) == 112);
static_assert(offsetof(EventDescrV1, p2p.func) == 40 && offsetof(EventDescrV1, p2p.buff) == 48 &&
              offsetof(EventDescrV1, p2p.datatype) == 56 && offsetof(EventDescrV1, p2p.count) == 64 &&
              offsetof(EventDescrV1, p2p.peer) == 72);
static_assert(sizeof(EventStateArgsV1) == 16 && sizeof(NcclProfilerV4) == 48 && sizeof(NcclProfilerV1) == 48);

}  // namespace collwatch::nccl_profiler

#endif  // COLLWATCH_RING_NCCL_PROFILER_ABI_H_
