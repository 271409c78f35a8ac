// The profiler plugin's loading (NCCL's rules for NCCL_PROFILER_PLUGIN) and the events
// the backend emits, with NCCL's descriptor contents. Events are built in version 5's form
// and handed over in the loaded version's (as NCCL 2.28 adapts them for older plugins).
#include "cpu_nccl/profiler.h"

#include <dlfcn.h>
#include <pthread.h>
#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <strings.h>

#include "cpu_nccl/comm.h"
#include "cpu_nccl/reduce_kernels.h"
#include "cpu_nccl/task.h"
#include "ring/nccl_profiler_abi.h"
#include "ring/settings.h"

namespace collwatch::cpu_nccl::profiler {
namespace {

namespace abi = collwatch::nccl_profiler;

// NCCL's lifetime: loaded at the first communicator's init, unloaded (dlclose) after the
// last communicator's finalize, loaded again by the next init.
pthread_mutex_t g_load_mutex = PTHREAD_MUTEX_INITIALIZER;
void* g_library = nullptr;
int g_inits = 0;  // communicators initialised and not yet finalized
bool g_load_failed = false;  // as NCCL: a failed load is not retried
// The plugin found, whatever its interface version; init and start_event are called
// through the version's own table (Init, Start).
struct Plugin {
  int version = 0;
  const void* table = nullptr;
  int (*stop_event)(void* handle) = nullptr;
  int (*record_event_state)(void* handle, int state, abi::EventStateArgs* args) = nullptr;  // v4, v5
  int (*finalize)(void* context) = nullptr;
};
Plugin g_found;
const Plugin* g_plugin = nullptr;  // &g_found while loaded
// NCCL's one process-wide mask: every init gets its address, a plugin may change it.
int g_mask = 0;

// Per thread, as NCCL's: the open GroupApi event.
thread_local void* t_group_api = nullptr;
thread_local bool t_group_api_open = false;

void IgnoreLog(int, unsigned long, const char*, int, const char*, ...) {}

void* OpenPlugin(const char* name) noexcept {
  // Any prefix of STATIC_PLUGIN: the process's own symbols (a preloaded plugin).
  if (strncasecmp(name, "STATIC_PLUGIN", std::strlen(name)) == 0) return dlopen(nullptr, RTLD_NOW);
  if (void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return handle;
  const size_t length = std::strlen(name);
  const bool lib_so = std::strncmp(name, "lib", 3) == 0 && length > 3 && std::strcmp(name + length - 3, ".so") == 0;
  if (std::strchr(name, '/') != nullptr || lib_so) return nullptr;
  char full[512];
  if (std::snprintf(full, sizeof full, "libnccl-profiler-%s.so", name) >= static_cast<int>(sizeof full)) return nullptr;
  return dlopen(full, RTLD_NOW | RTLD_LOCAL);
}

// Under g_load_mutex.
void Load() noexcept {
  const char* name = std::getenv(SettingInfoOf(Setting::kNcclProfilerPlugin).name);
  if (g_load_failed || (name != nullptr && strcasecmp(name, "none") == 0)) return;
  const bool named = name != nullptr && name[0] != '\0';
  g_library = OpenPlugin(named ? name : "libnccl-profiler.so");
  if (g_library == nullptr) {
    if (named) std::fprintf(stderr, "CPU NCCL backend: profiler plugin %s not loaded: %s\n", name, dlerror());
    g_load_failed = true;
    return;
  }
  // As NCCL: the newest version it knows first, then each older one.
  static constexpr const char* kSymbols[] = {abi::kSymbolV1, abi::kSymbolV2, abi::kSymbolV3, abi::kSymbolV4,
                                             abi::kSymbolV5};
  const long newest = std::strtol(SettingValue(Setting::kCpuNcclProfilerVersion), nullptr, 10);
  const int known = newest >= 1 && newest <= 5 ? static_cast<int>(newest) : 5;
  g_found = Plugin{};
  for (int version = known; version >= 1 && g_found.table == nullptr; --version) {
    g_found.table = dlsym(g_library, kSymbols[version - 1]);
    g_found.version = version;
  }
  if (g_found.table == nullptr) {
    if (named) std::fprintf(stderr, "CPU NCCL backend: %s has no ncclProfiler_v%d..v1\n", name, known);
    dlclose(g_library);
    g_library = nullptr;
    g_load_failed = true;
    return;
  }
  switch (g_found.version) {
    case 5: {
      const auto* table = static_cast<const abi::NcclProfilerV5*>(g_found.table);
      g_found = {5, table, table->stop_event, table->record_event_state, table->finalize};
      break;
    }
    case 4: {
      const auto* table = static_cast<const abi::NcclProfilerV4*>(g_found.table);
      g_found = {4, table, table->stop_event, table->record_event_state, table->finalize};
      break;
    }
    default: {
      // v1..v3 share one table layout; they record no state the backend emits.
      const auto* table = static_cast<const abi::NcclProfilerV1*>(g_found.table);
      g_found = {g_found.version, table, table->stop_event, nullptr, table->finalize};
      break;
    }
  }
  g_plugin = &g_found;
}

int Mask() noexcept { return __atomic_load_n(&g_mask, __ATOMIC_RELAXED); }

// The events the loaded version has: API events from v5, kernel channels from v3.
bool VersionHas(uint64_t type) noexcept {
  if (type == abi::kGroupApi || type == abi::kCollApi || type == abi::kP2pApi) return g_plugin->version >= 5;
  if (type == abi::kKernelCh) return g_plugin->version >= 3;
  return true;
}

// NCCL emits an event where the mask asks for it or for an event below it.
bool Wanted(uint64_t type) noexcept {
  if (g_plugin == nullptr || !VersionHas(type)) return false;
  constexpr uint64_t kBelowOp = abi::kProxyOp | abi::kProxyStep | abi::kKernelCh | abi::kNetPlugin;
  uint64_t with = type;
  switch (type) {
    case abi::kGroupApi:
      with |= abi::kCollApi | abi::kP2pApi | abi::kKernelLaunch | abi::kGroup | abi::kColl | abi::kP2p | kBelowOp;
      break;
    case abi::kCollApi: with |= abi::kColl | kBelowOp; break;
    case abi::kP2pApi: with |= abi::kP2p | kBelowOp; break;
    case abi::kGroup: with |= abi::kColl | abi::kP2p | kBelowOp; break;
    case abi::kColl:
    case abi::kP2p: with |= kBelowOp; break;
    default: break;
  }
  return g_plugin != nullptr && (static_cast<uint64_t>(Mask()) & with) != 0;
}

const char* DtypeName(int dtype) noexcept {
  return dtype >= 0 && dtype < abi::kDatatypes ? abi::kDatatypeNames[dtype] : "ncclInt8";
}

// Version 1's numbers for names: ncclDataType_t, ncclFunc_t.
uint8_t DtypeNumber(const char* name) noexcept {
  for (int i = 0; i < abi::kDatatypes; ++i) {
    if (std::strcmp(name, abi::kDatatypeNames[i]) == 0) return static_cast<uint8_t>(i);
  }
  return 0;
}
uint8_t FuncNumber(const char* name) noexcept {
  for (int i = 0; i < abi::kCollFuncs; ++i) {
    if (std::strcmp(name, abi::kCollFuncNames[i]) == 0) return static_cast<uint8_t>(i);
  }
  return std::strcmp(name, "Send") == 0 ? abi::kFuncSend : abi::kFuncRecv;
}

// A version 5 Group, Coll, P2p or KernelCh descriptor in v4's form.
abi::EventDescrV4 AsV4(const abi::EventDescr& in) noexcept {
  abi::EventDescrV4 out{};
  out.type = static_cast<uint8_t>(in.type);
  out.parent = in.parent;
  out.rank = in.rank;
  if (in.type == abi::kColl) {
    out.coll = {in.coll.seq_number, in.coll.func,     in.coll.send_buff, in.coll.recv_buff, in.coll.count, in.coll.root,
                in.coll.datatype,   in.coll.channels, in.coll.warps,     in.coll.algo,      in.coll.proto};
  } else if (in.type == abi::kP2p) {
    out.p2p = {in.p2p.func, in.p2p.buff, in.p2p.datatype, in.p2p.count, in.p2p.peer, in.p2p.channels};
  } else if (in.type == abi::kKernelCh) {
    out.kernel_ch = {in.kernel_ch.channel_id, in.kernel_ch.timer};
  }
  return out;
}

// A function or datatype name where the version carries names (v2, v3), its number where
// it carries numbers (v1).
void SetFunc(const char** field, const char* name) noexcept { *field = name; }
void SetFunc(uint8_t* field, const char* name) noexcept { *field = FuncNumber(name); }
void SetDtype(const char** field, const char* name) noexcept { *field = name; }
void SetDtype(uint8_t* field, const char* name) noexcept { *field = DtypeNumber(name); }

// The same in v1's, v2's or v3's form, with the communicator's hash (v4 gives it at init).
template <typename Descr>
Descr AsBeforeV4(const abi::EventDescr& in, uint64_t comm_hash) noexcept {
  Descr out{};
  out.type = static_cast<uint8_t>(in.type);
  out.parent = in.parent;
  out.rank = in.rank;
  if (in.type == abi::kColl) {
    out.coll.comm_hash = comm_hash;
    out.coll.seq_number = in.coll.seq_number;
    SetFunc(&out.coll.func, in.coll.func);
    out.coll.send_buff = in.coll.send_buff;
    out.coll.recv_buff = in.coll.recv_buff;
    out.coll.count = in.coll.count;
    out.coll.root = in.coll.root;
    SetDtype(&out.coll.datatype, in.coll.datatype);
    out.coll.max_channels = in.coll.channels;
    out.coll.warps = in.coll.warps;
    if constexpr (std::is_same_v<decltype(out.coll.algo), const char*>) {  // v1: numbers, left 0
      out.coll.algo = in.coll.algo;
      out.coll.proto = in.coll.proto;
    }
  } else if (in.type == abi::kP2p) {
    out.p2p.comm_hash = comm_hash;
    SetFunc(&out.p2p.func, in.p2p.func);
    out.p2p.buff = in.p2p.buff;
    SetDtype(&out.p2p.datatype, in.p2p.datatype);
    out.p2p.count = in.p2p.count;
    out.p2p.peer = in.p2p.peer;
  }
  if constexpr (requires { out.kernel_ch; }) {
    if (in.type == abi::kKernelCh) out.kernel_ch.channel_id = in.kernel_ch.channel_id;
  }
  return out;
}

// startEvent through the loaded version's table, the descriptor in its form.
void* Start(ncclComm* comm, abi::EventDescr* descr) noexcept {
  void* handle = nullptr;
  if (!comm->profiler_context_set) return nullptr;
  void* context = comm->profiler_context;
  switch (g_plugin->version) {
    case 5:
      static_cast<const abi::NcclProfilerV5*>(g_plugin->table)->start_event(context, &handle, descr);
      break;
    case 4: {
      abi::EventDescrV4 v4 = AsV4(*descr);
      static_cast<const abi::NcclProfilerV4*>(g_plugin->table)->start_event(context, &handle, &v4);
      break;
    }
    case 3: {
      auto v3 = AsBeforeV4<abi::EventDescrV3>(*descr, comm->key);
      static_cast<const abi::NcclProfilerV3*>(g_plugin->table)->start_event(context, &handle, &v3);
      break;
    }
    case 2: {
      auto v2 = AsBeforeV4<abi::EventDescrV2>(*descr, comm->key);
      static_cast<const abi::NcclProfilerV2*>(g_plugin->table)->start_event(context, &handle, &v2);
      break;
    }
    default: {
      auto v1 = AsBeforeV4<abi::EventDescrV1>(*descr, comm->key);
      static_cast<const abi::NcclProfilerV1*>(g_plugin->table)->start_event(context, &handle, &v1);
      break;
    }
  }
  return handle;
}

void RecordState(void* handle, int state, abi::EventStateArgs* args) noexcept {
  if (g_plugin->record_event_state != nullptr) g_plugin->record_event_state(handle, state, args);
}

// NCCL's function of a collective and its index in the per-communicator seqNumber
// counters (abi::kCollFuncNames); -1: NCCL runs it as sends and receives.
int FuncIndex(OpKind kind, const char** name) noexcept {
  int index = -1;
  switch (kind) {
    case OpKind::kBroadcast: index = 0; break;
    case OpKind::kReduce: index = 1; break;
    case OpKind::kAllGather: index = 2; break;
    case OpKind::kReduceScatter: index = 3; break;
    case OpKind::kAllReduce: index = 4; break;
    default: return -1;
  }
  *name = abi::kCollFuncNames[index];
  return index;
}

uint64_t WallNs() noexcept {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
}

}  // namespace

void CommReady(ncclComm* comm) noexcept {
  pthread_mutex_lock(&g_load_mutex);
  if (g_plugin == nullptr) Load();
  if (g_plugin == nullptr || comm->profiler_context_set) {
    pthread_mutex_unlock(&g_load_mutex);
    return;
  }
  ++g_inits;
  const Plugin plugin = *g_plugin;
  pthread_mutex_unlock(&g_load_mutex);
  void* context = nullptr;
  // The key is equal on every rank, as NCCL's hash of the unique id is. Each version's
  // init: v5 (id, mask, ...), v4 (mask, name, id, ...), v1..v3 (mask only).
  if (plugin.version == 5) {
    static_cast<const abi::NcclProfilerV5*>(plugin.table)
        ->init(&context, comm->key, &g_mask, nullptr, 1, comm->nranks, comm->rank, IgnoreLog);
  } else if (plugin.version == 4) {
    static_cast<const abi::NcclProfilerV4*>(plugin.table)
        ->init(&context, &g_mask, nullptr, comm->key, 1, comm->nranks, comm->rank, IgnoreLog);
  } else {
    static_cast<const abi::NcclProfilerV1*>(plugin.table)->init(&context, &g_mask);
  }
  comm->profiler_context = context;
  comm->profiler_context_set = true;
}

void CommFreed(ncclComm* comm) noexcept {
  if (!comm->profiler_context_set) return;
  comm->profiler_context_set = false;
  pthread_mutex_lock(&g_load_mutex);
  if (comm->profiler_context != nullptr) g_plugin->finalize(comm->profiler_context);
  if (--g_inits == 0) {
    // As NCCL does after the last finalize: a plugin must survive being unloaded.
    g_plugin = nullptr;
    dlclose(g_library);
    g_library = nullptr;
  }
  pthread_mutex_unlock(&g_load_mutex);
}

void Call(Task* task, size_t count, int dtype, int root, void* stream, bool captured) noexcept {
  task->prof = TaskEvents{};
  ncclComm* comm = task->comm;
  if (g_plugin == nullptr || !comm->profiler_context_set) return;
  const bool coll = task->kind == TaskKind::kColl;
  const char* func = task->kind == TaskKind::kSend ? "Send" : "Recv";
  if (coll && FuncIndex(task->coll.kind, &func) < 0) return;
  if (!t_group_api_open && Wanted(abi::kGroupApi)) {
    abi::EventDescr group{};
    group.type = abi::kGroupApi;
    group.group_api.group_depth = 1;
    t_group_api = Start(comm, &group);
    t_group_api_open = true;
    if (t_group_api != nullptr) RecordState(t_group_api, abi::kGroupStartApiStop, nullptr);
  }
  abi::EventDescr api{};
  api.parent = t_group_api;
  if (coll && Wanted(abi::kCollApi)) {
    api.type = abi::kCollApi;
    api.coll_api = {func, count, DtypeName(dtype), root, stream, captured};
  } else if (!coll && Wanted(abi::kP2pApi)) {
    api.type = abi::kP2pApi;
    api.p2p_api = {func, count, DtypeName(dtype), stream, captured};
  } else {
    return;
  }
  task->prof.api = Start(comm, &api);
  if (task->prof.api != nullptr) g_plugin->stop_event(task->prof.api);
}

void Launch(Task* tasks, int count) noexcept {
  if (g_plugin == nullptr) return;
  if (t_group_api != nullptr) RecordState(t_group_api, abi::kGroupEndApiStart, nullptr);
  void* group = nullptr;
  ncclComm* group_comm = nullptr;
  for (int i = 0; i < count; ++i) {
    Task& task = tasks[i];
    ncclComm* comm = task.comm;
    const bool coll = task.kind == TaskKind::kColl;
    if ((!coll && task.kind != TaskKind::kSend && task.kind != TaskKind::kRecv) || !comm->profiler_context_set) continue;
    const char* func = task.kind == TaskKind::kSend ? "Send" : "Recv";
    const int index = coll ? FuncIndex(task.coll.kind, &func) : 0;
    if (index < 0) continue;
    if (group_comm == nullptr && Wanted(abi::kGroup)) {
      abi::EventDescr descr{};
      descr.type = abi::kGroup;
      group = Start(comm, &descr);
      group_comm = comm;
    }
    abi::EventDescr op{};
    // v5: the call's API event; before it, the launch's Group event.
    op.parent = g_plugin->version >= 5 ? task.prof.api : group;
    op.rank = comm->rank;
    if (coll && Wanted(abi::kColl)) {
      const CollState& s = task.coll;
      // NCCL counts all-gathers and broadcasts in bytes.
      const bool in_bytes = s.kind == OpKind::kAllGather || s.kind == OpKind::kBroadcast;
      op.type = abi::kColl;
      op.coll.seq_number = comm->profiler_seq[index]++;
      op.coll.func = func;
      op.coll.send_buff = s.send;
      op.coll.recv_buff = s.recv;
      op.coll.count = in_bytes ? s.count * DtypeSize(s.dtype) : s.count;
      op.coll.root = s.root;
      op.coll.datatype = in_bytes ? "ncclInt8" : DtypeName(s.dtype);
      op.coll.channels = 1;
      op.coll.algo = "RING";
      op.coll.proto = "SIMPLE";
      op.coll.parent_group = group;
    } else if (!coll && Wanted(abi::kP2p)) {
      op.type = abi::kP2p;
      op.p2p.func = func;
      op.p2p.buff = task.kind == TaskKind::kSend ? const_cast<void*>(task.p2p.send) : task.p2p.recv;
      op.p2p.datatype = "ncclInt8";
      op.p2p.count = task.p2p.bytes;
      op.p2p.peer = task.p2p.peer;
      op.p2p.channels = 1;
      op.p2p.parent_group = group;
    } else {
      continue;
    }
    task.prof.op = Start(comm, &op);
    // Stopped once handed on ("launched"), before its channels run, as NCCL does.
    if (task.prof.op != nullptr) g_plugin->stop_event(task.prof.op);
  }
  if (group != nullptr) g_plugin->stop_event(group);
}

void Launched() noexcept {
  if (g_plugin != nullptr && t_group_api != nullptr) g_plugin->stop_event(t_group_api);
  t_group_api = nullptr;
  t_group_api_open = false;
}

void TaskMoving(Task& task) noexcept {
  if (task.prof.op == nullptr || task.prof.channel != nullptr || task.prof.channel_done ||
      !Wanted(abi::kKernelCh)) {
    return;
  }
  abi::EventDescr descr{};
  descr.type = abi::kKernelCh;
  descr.parent = task.prof.op;
  descr.kernel_ch.channel_id = 0;
  descr.kernel_ch.timer = WallNs();  // NCCL: the GPU's %globaltimer, nanoseconds
  task.prof.channel = Start(task.comm, &descr);
  task.prof.channel_done = task.prof.channel == nullptr;
}

void TaskDone(Task& task) noexcept {
  if (task.prof.channel == nullptr || task.prof.channel_done) return;
  abi::EventStateArgs args{};
  args.kernel_ch.timer = WallNs();
  RecordState(task.prof.channel, abi::kKernelChStop, &args);  // v4, v5
  g_plugin->stop_event(task.prof.channel);
  task.prof.channel_done = true;
}

}  // namespace collwatch::cpu_nccl::profiler
