// Tasks: one NCCL call each (collective, send, recv, init, split), made resumable so that
// one thread can progress many at once (a group). Threading: a task is owned by the thread
// that submitted it; its progress functions run on that thread only.
#ifndef COLLWATCH_CPU_NCCL_TASK_H_
#define COLLWATCH_CPU_NCCL_TASK_H_

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "cpu_nccl/comm.h"
#include "cpu_nccl/profiler.h"
#include "cpu_nccl/reduce_kernels.h"

namespace collwatch::cpu_nccl {

// Collective kinds as they appear in OpDesc::kind (part of the segment ABI).
enum class OpKind : uint32_t {
  kAllReduce = 1,
  kBroadcast = 2,
  kReduce = 3,
  kAllGather = 4,
  kReduceScatter = 5,
  kAlltoAll = 6,
  kGather = 7,
  kScatter = 8,
  kSplitGather = 9,  // internal: the (color, key) exchange of ncclCommSplit
};

// How a collective combines values, resolved from ncclRedOp_t when the call is made
// (NCCL copies the op state at enqueue too; a PreMulSum scalar behind a pointer is read
// when the operation runs).
struct Reduction {
  BaseOp base;
  bool premul;         // multiply this rank's input by the scalar first
  bool scalar_is_ptr;  // scalar holds a pointer to the value
  bool postdiv;        // integer ncclAvg: divide the sum by nranks
  int32_t desc_op;     // what peers compare (OpDesc::redop)
  uint64_t scalar;
};

enum CollStage : uint8_t {
  kCollStart = 0,
  kCollGuard,
  kCollWrite,
  kCollWait,
  kCollHung,
  kCollMoveData,  // CUDA IPC: the data moves between the two phases (IpcMoveData)
};

// CUDA mode with COLLWATCH_CPU_NCCL_IPC: a collective whose data moves GPU to GPU through
// CUDA IPC (cuda_ipc.cc). The engine then runs it as two data-free phases over the slots:
// phase 0 publishes each rank's buffer descriptor (and compares the op descriptors as
// always), the GPU copies between the phases, phase 1 waits until every rank's copies are
// done, so that no buffer is reused while a peer still reads it.
struct IpcTransfer;
inline constexpr size_t kIpcDescriptorBytes = 96;
// This rank's descriptor, written into its slot in phase 0.
const void* IpcOwnDescriptor(const IpcTransfer* transfer) noexcept;
// Peer p's descriptor, read from its slot in phase 0.
void IpcNotePeerDescriptor(IpcTransfer* transfer, int peer, const void* descriptor) noexcept;
// Moves the data once every rank's descriptor is known: GPU to GPU when every rank's buffer
// can be shared, else (the same choice on every rank) as a host collective of its own
// between pinned staging copies. Called until it returns kDone (or kFailed).
Status IpcMoveData(IpcTransfer* transfer, ncclComm* comm, bool* moved) noexcept;

struct CollState {
  OpKind kind;
  const void* send;
  void* recv;
  size_t count;
  int dtype;
  int root;  // -1 when the op has none
  Reduction red;
  IpcTransfer* ipc;  // non-null: the data moves GPU to GPU (see IpcTransfer)
  // Progress.
  CollStage stage;
  uint8_t phase;           // phase within the chunk
  int cursor;              // next rank to check in a wait
  uint64_t seq;            // collective sequence number
  uint64_t chunk;          // chunk within this op
  uint64_t nchunks;
  uint64_t chunk_elems;    // elements per chunk (per block for the n-block kinds)
  uint64_t global_chunk;   // the communicator's chunk number (slot parity)
  uint64_t target;         // step the current wait needs
  uint64_t scalar_bits;    // resolved PreMulSum scalar
};

enum P2pStage : uint8_t { kP2pHeader = 0, kP2pPayload, kP2pHung };

struct P2pState {
  const void* send;  // for kSend
  void* recv;        // for kRecv
  uint64_t bytes;
  int peer;
  P2pStage stage;
  uint64_t done_bytes;  // of the padded payload
};

enum SplitStage : uint8_t { kSplitGather = 0, kSplitInit };

struct SplitState {
  int color;
  int key;
  int32_t* buffer;    // heap: [2] this rank's (color, key), then [2*nranks] everyone's
  ncclComm** out;     // where the child handle goes
  ncclComm* child;
  SplitStage stage;
  CollState gather;
};

// The CUDA side of a collective or send/recv whose buffers are CUDA memory (CUDA mode):
// the call only enqueues on `stream`; the progress thread runs the task on pinned staging
// copies (cuda_queue.h). Buffers that are host memory are used in place.
struct DeviceIo {
  bool active;              // some buffer is CUDA memory: the task goes to the progress thread
  CUstream stream;          // the call's stream (nullptr: the legacy default stream)
  const void* user_send;    // CUDA input copied to staging before the task runs, or nullptr
  void* user_recv;          // CUDA output filled from staging after it ran, or nullptr
  uint64_t send_bytes;
  uint64_t recv_bytes;
  const void* user_scalar;  // a ncclScalarDevice PreMulSum scalar in CUDA memory, or nullptr
};

enum class TaskKind : uint8_t { kInit, kColl, kSend, kRecv, kSplit };

struct Task {
  TaskKind kind;
  ncclComm* comm;  // kInit: the communicator being created; kSplit: the parent
  int prev;        // the task before this one in its queue (engine), or -1
  bool done;
  ncclResult_t result;
  int32_t blocked_on;
  CollState coll;
  P2pState p2p;
  SplitState split;
  DeviceIo dev;
  TaskEvents prof;  // the profiler plugin's events of this task
};

// Progress functions: advance as far as possible without sleeping. On kBlocked,
// *blocked_on says whose progress is awaited; *moved is set when any state changed.
Status ProgressColl(ncclComm* comm, CollState& s, int32_t* blocked_on, bool* moved) noexcept;
Status ProgressSend(ncclComm* comm, P2pState& s, int32_t* blocked_on, bool* moved) noexcept;
Status ProgressRecv(ncclComm* comm, P2pState& s, int32_t* blocked_on, bool* moved) noexcept;

// Fills the fields of a fresh collective state.
void InitCollState(CollState* s, OpKind kind, const void* send, void* recv, size_t count,
                   int dtype, int root, const Reduction& red) noexcept;

}  // namespace collwatch::cpu_nccl

#endif  // COLLWATCH_CPU_NCCL_TASK_H_
