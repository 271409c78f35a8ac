// A CUDA driver on host memory, for testing the CPU NCCL backend's CUDA mode without a GPU
// (loaded through COLLWATCH_CPU_NCCL_LIBCUDA). "Device" memory comes from cuMemAlloc_v2
// (shared memory the fake remembers, so CUDA IPC works between processes: a handle names
// the allocation's memfd in /proc); each stream is a thread that runs its queue in order:
// copies, event records, the stream-hold kernel, emulated as "publish the token in *ready,
// wait until *release reaches it" (then, for collwatch_hold_then_fetch, copy the job), and
// the move kernel, which does its job on the host.
// FAKE_CUDA_LAZY=1 reports lazy module loading, FAKE_CUDA_CAPTURING=1 streams under graph
// capture, FAKE_CUDA_NO_IPC=1 refuses CUDA IPC (as the driver does for managed memory).
// Contexts: one primary context per device (kFakeDevices), device 0's current on every thread
// that set none; streams and events belong to the context current at their creation,
// and an event is refused on another context's stream, as the driver does. The SONAME is
// libcuda.so.1, so a library that looks the driver up by that name finds this one.
// Threading: one worker thread per stream; the API functions may be called from any thread.
#include <cuda.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "cpu_nccl/device_move_kernel.h"
#include "cpu_nccl/float_convert.h"

namespace {

namespace cn = collwatch::cpu_nccl;

// What the move kernel does, on the host, reading its job when it runs (as the kernel).
void RunMoveJob(const cn::DeviceMoveJob* job) {
  const cn::DeviceMoveJob j = *job;
  switch (j.kind) {
    case cn::MoveKind::kNone:
      return;
    case cn::MoveKind::kCopy16:
    case cn::MoveKind::kCopy1:
      for (uint32_t k = 0; k < j.nsources; ++k) {
        std::memmove(reinterpret_cast<void*>(j.out + k * j.out_stride),
                     reinterpret_cast<const void*>(j.sources[k]), j.count);
      }
      return;
    case cn::MoveKind::kSumF32:
    case cn::MoveKind::kSumBf16:
      for (uint64_t i = 0; i < j.count; ++i) {
        float sum = 0;
        for (uint32_t k = 0; k < j.nsources; ++k) {
          float value;
          if (j.kind == cn::MoveKind::kSumF32) {
            value = reinterpret_cast<const float*>(j.sources[k])[i];
          } else {
            value = cn::Bf16ToFloat(reinterpret_cast<const uint16_t*>(j.sources[k])[i]);
          }
          sum = k == 0 ? value : sum + value;
        }
        if (j.kind == cn::MoveKind::kSumF32) {
          reinterpret_cast<float*>(j.out)[i] = sum;
        } else {
          reinterpret_cast<uint16_t*>(j.out)[i] = cn::FloatToBf16(sum);
        }
      }
      return;
  }
}

struct Op {
  enum Kind { kCopy, kHold, kEvent, kMove } kind;
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  std::atomic<uint32_t>* ready = nullptr;
  std::atomic<uint32_t>* release = nullptr;
  uint32_t token = 0;
  std::atomic<int>* event_pending = nullptr;
  const cn::DeviceMoveJob* job = nullptr;
  cn::DeviceMoveJob* job_to = nullptr;  // kHold of collwatch_hold_then_fetch: job -> job_to
};

constexpr int kFakeDevices = 4;
char g_primary_contexts[kFakeDevices];
thread_local CUcontext t_current_context = nullptr;  // none set: device 0's

CUcontext CurrentContext() {
  return t_current_context != nullptr ? t_current_context : reinterpret_cast<CUcontext>(&g_primary_contexts[0]);
}

class FakeStream {
 public:
  FakeStream() : worker_([this] { Work(); }) { worker_.detach(); }

  CUcontext context = CurrentContext();

  void Push(const Op& op) {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(op);
    ++unfinished_;
    wake_.notify_all();
  }
  bool Idle() {
    std::lock_guard<std::mutex> lock(mutex_);
    return unfinished_ == 0;
  }
  void Synchronize() {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return unfinished_ == 0; });
  }

 private:
  void Work() {
    for (;;) {
      Op op;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return !queue_.empty(); });
        op = queue_.front();
        queue_.pop_front();
      }
      Run(op);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--unfinished_ == 0) idle_.notify_all();
    }
  }
  static void Run(const Op& op) {
    switch (op.kind) {
      case Op::kCopy:
        std::memmove(op.dst, op.src, op.bytes);
        break;
      case Op::kHold:
        op.ready->store(op.token);
        while (static_cast<int32_t>(op.release->load() - op.token) < 0) {
          std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
        if (op.job_to != nullptr) *op.job_to = *op.job;
        break;
      case Op::kEvent:
        op.event_pending->fetch_sub(1);
        break;
      case Op::kMove:
        RunMoveJob(op.job);
        break;
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<Op> queue_;
  int unfinished_ = 0;
  std::thread worker_;
};

struct FakeEvent {
  std::atomic<int> pending{0};
  CUcontext context = CurrentContext();
};

struct Range {
  uintptr_t begin;
  uintptr_t end;
  unsigned memory_type;
  int memfd;  // device memory: the allocation's file, for CUDA IPC
};

// A CUDA IPC handle of the fake: the allocating process and its memfd.
struct FakeIpcHandle {
  uint32_t magic;
  int32_t pid;
  int32_t memfd;
  uint64_t bytes;
};
constexpr uint32_t kFakeIpcMagic = 0xfa4ec0de;
static_assert(sizeof(FakeIpcHandle) <= sizeof(CUipcMemHandle));

std::mutex g_ranges_mutex;
std::vector<Range> g_ranges;
std::atomic<int> g_hold_launches{0};
std::atomic<int> g_event_queries{0};
char g_hold_function_token;
char g_move_function_token;
char g_hold_then_fetch_function_token;
char g_other_function_token;

FakeStream* StreamOf(CUstream stream) {
  static FakeStream* legacy = new FakeStream();
  return stream == nullptr ? legacy : reinterpret_cast<FakeStream*>(stream);
}

// The NULL stream belongs to whichever context is current.
CUcontext ContextOf(CUstream stream) {
  return stream == nullptr ? CurrentContext() : StreamOf(stream)->context;
}

void Remember(void* memory, size_t bytes, unsigned memory_type, int memfd = -1) {
  std::lock_guard<std::mutex> lock(g_ranges_mutex);
  const auto begin = reinterpret_cast<uintptr_t>(memory);
  g_ranges.push_back({begin, begin + bytes, memory_type, memfd});
}

bool IpcRefused() {
  const char* refused = std::getenv("FAKE_CUDA_NO_IPC");
  return refused != nullptr && refused[0] == '1';
}

void Forget(void* memory) {
  std::lock_guard<std::mutex> lock(g_ranges_mutex);
  for (size_t i = 0; i < g_ranges.size(); ++i) {
    if (g_ranges[i].begin == reinterpret_cast<uintptr_t>(memory)) {
      g_ranges.erase(g_ranges.begin() + static_cast<long>(i));
      return;
    }
  }
}

}  // namespace

extern "C" {

CUresult cuInit(unsigned int) { return CUDA_SUCCESS; }

CUresult cuGetErrorString(CUresult, const char** text) {
  *text = "fake driver error";
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext* context) {
  *context = CurrentContext();
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext context) {
  t_current_context = context;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  if (device < 0 || device >= kFakeDevices) return CUDA_ERROR_INVALID_DEVICE;
  *context = reinterpret_cast<CUcontext>(&g_primary_contexts[device]);
  return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr pointer) {
  if (attribute != CU_POINTER_ATTRIBUTE_MEMORY_TYPE &&
      attribute != CU_POINTER_ATTRIBUTE_RANGE_START_ADDR) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lock(g_ranges_mutex);
  for (const Range& r : g_ranges) {
    if (pointer >= r.begin && pointer < r.end) {
      if (attribute == CU_POINTER_ATTRIBUTE_MEMORY_TYPE) {
        *static_cast<unsigned*>(data) = r.memory_type;
      } else {
        *static_cast<CUdeviceptr*>(data) = r.begin;
      }
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;  // what the driver says of plain host memory
}

CUresult cuMemAlloc_v2(CUdeviceptr* pointer, size_t bytes) {
  const size_t length = bytes == 0 ? 1 : bytes;
  const int memfd = memfd_create("fake-cuda-device-memory", MFD_CLOEXEC);
  if (memfd < 0 || ftruncate(memfd, static_cast<off_t>(length)) != 0) {
    if (memfd >= 0) close(memfd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  void* memory = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (memory == MAP_FAILED) {
    close(memfd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Remember(memory, length, CU_MEMORYTYPE_DEVICE, memfd);
  *pointer = reinterpret_cast<CUdeviceptr>(memory);
  return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr pointer) {
  size_t length = 0;
  int memfd = -1;
  {
    std::lock_guard<std::mutex> lock(g_ranges_mutex);
    for (const Range& r : g_ranges) {
      if (r.begin == pointer) {
        length = r.end - r.begin;
        memfd = r.memfd;
      }
    }
  }
  if (memfd < 0) return CUDA_ERROR_INVALID_VALUE;
  Forget(reinterpret_cast<void*>(pointer));
  munmap(reinterpret_cast<void*>(pointer), length);
  close(memfd);
  return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void** pointer, size_t bytes, unsigned int) {
  void* memory = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  if (memory == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  Remember(memory, bytes, CU_MEMORYTYPE_HOST);
  *pointer = memory;
  return CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void* pointer) {
  Forget(pointer);
  std::free(pointer);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  Op op{Op::kCopy};
  op.dst = reinterpret_cast<void*>(dst);
  op.src = reinterpret_cast<const void*>(src);
  op.bytes = bytes;
  StreamOf(stream)->Push(op);
  return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent* event, unsigned int) {
  *event = reinterpret_cast<CUevent>(new FakeEvent());
  return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent event, CUstream stream) {
  auto* fake = reinterpret_cast<FakeEvent*>(event);
  if (fake->context != ContextOf(stream)) return CUDA_ERROR_INVALID_HANDLE;
  fake->pending.fetch_add(1);
  Op op{Op::kEvent};
  op.event_pending = &fake->pending;
  StreamOf(stream)->Push(op);
  return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent event) {
  g_event_queries.fetch_add(1);
  return reinterpret_cast<FakeEvent*>(event)->pending.load() == 0 ? CUDA_SUCCESS
                                                                  : CUDA_ERROR_NOT_READY;
}

CUresult cuEventDestroy_v2(CUevent event) {
  delete reinterpret_cast<FakeEvent*>(event);
  return CUDA_SUCCESS;
}

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  // The backend's PTX names its kernels; anything else is a broken image.
  if (std::strstr(static_cast<const char*>(image), ".entry collwatch_") == nullptr) {
    return CUDA_ERROR_INVALID_IMAGE;
  }
  *module = reinterpret_cast<CUmodule>(&g_other_function_token);
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction* function, CUmodule, const char* name) {
  if (std::strncmp(name, "collwatch_", 10) != 0) return CUDA_ERROR_NOT_FOUND;
  if (std::strcmp(name, "collwatch_hold_stream") == 0) {
    *function = reinterpret_cast<CUfunction>(&g_hold_function_token);
  } else if (std::strcmp(name, cn::kMoveKernelName) == 0) {
    *function = reinterpret_cast<CUfunction>(&g_move_function_token);
  } else if (std::strcmp(name, cn::kHoldThenFetchKernelName) == 0) {
    *function = reinterpret_cast<CUfunction>(&g_hold_then_fetch_function_token);
  } else {
    *function = reinterpret_cast<CUfunction>(&g_other_function_token);
  }
  return CUDA_SUCCESS;
}

CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode* mode) {
  const char* lazy = std::getenv("FAKE_CUDA_LAZY");
  *mode = lazy != nullptr && lazy[0] == '1' ? CU_MODULE_LAZY_LOADING : CU_MODULE_EAGER_LOADING;
  return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction function, unsigned int, unsigned int, unsigned int, unsigned int,
                        unsigned int, unsigned int, unsigned int, CUstream stream, void** params,
                        void**) {
  if (function == reinterpret_cast<CUfunction>(&g_move_function_token)) {
    Op op{Op::kMove};
    op.job = *static_cast<const cn::DeviceMoveJob**>(params[0]);
    StreamOf(stream)->Push(op);
    return CUDA_SUCCESS;
  }
  const bool fetch = function == reinterpret_cast<CUfunction>(&g_hold_then_fetch_function_token);
  if (function != reinterpret_cast<CUfunction>(&g_hold_function_token) && !fetch)
    return CUDA_ERROR_NOT_SUPPORTED;
  Op op{Op::kHold};
  op.ready = *static_cast<std::atomic<uint32_t>**>(params[0]);
  op.release = *static_cast<std::atomic<uint32_t>**>(params[1]);
  op.token = *static_cast<uint32_t*>(params[2]);
  if (fetch) {
    op.job = *static_cast<const cn::DeviceMoveJob**>(params[3]);
    op.job_to = reinterpret_cast<cn::DeviceMoveJob*>(*static_cast<CUdeviceptr*>(params[4]));
  }
  StreamOf(stream)->Push(op);
  g_hold_launches.fetch_add(1);
  return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream* stream, unsigned int) {
  *stream = reinterpret_cast<CUstream>(new FakeStream());
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream stream) {
  StreamOf(stream)->Synchronize();
  return CUDA_SUCCESS;
}

CUresult cuStreamQuery(CUstream stream) {
  return StreamOf(stream)->Idle() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr pointer) {
  if (IpcRefused()) return CUDA_ERROR_NOT_SUPPORTED;
  std::lock_guard<std::mutex> lock(g_ranges_mutex);
  for (const Range& r : g_ranges) {
    if (r.begin == pointer && r.memfd >= 0) {
      const FakeIpcHandle fake{kFakeIpcMagic, static_cast<int32_t>(getpid()), r.memfd,
                               r.end - r.begin};
      std::memset(handle, 0, sizeof *handle);
      std::memcpy(handle, &fake, sizeof fake);
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;  // not the start of a cuMemAlloc allocation
}

// Maps the peer's allocation through /proc/PID/fd (same user; never unmapped, as the
// backend never closes what it opened).
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pointer, CUipcMemHandle handle, unsigned int) {
  FakeIpcHandle fake;
  std::memcpy(&fake, &handle, sizeof fake);
  if (fake.magic != kFakeIpcMagic) return CUDA_ERROR_INVALID_HANDLE;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/fd/%d", fake.pid, fake.memfd);
  const int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_INVALID_HANDLE;
  void* memory = mmap(nullptr, fake.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (memory == MAP_FAILED) return CUDA_ERROR_MAP_FAILED;
  *pointer = reinterpret_cast<CUdeviceptr>(memory);
  return CUDA_SUCCESS;
}

// FAKE_CUDA_CAPTURING=1: every stream is being captured into a graph.
CUresult cuStreamIsCapturing(CUstream, CUstreamCaptureStatus* status) {
  const char* capturing = std::getenv("FAKE_CUDA_CAPTURING");
  *status = capturing != nullptr && capturing[0] == '1' ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                                        : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

CUresult cuStreamGetCtx(CUstream stream, CUcontext* context) {
  *context = ContextOf(stream);
  return CUDA_SUCCESS;
}

CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  *mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  return CUDA_SUCCESS;
}

// Streams are never freed: their detached workers may still be waking up.
CUresult cuStreamDestroy_v2(CUstream) { return CUDA_SUCCESS; }

// For the tests: stream-hold kernels launched so far in this process (one per stream and
// stream-ordered call or group).
int FakeCudaHoldLaunches() { return g_hold_launches.load(); }

// For the tests: cuEventQuery calls so far in this process.
int FakeCudaEventQueries() { return g_event_queries.load(); }

// For the tests: `stream` now belongs to `context`, as a handle the driver reused for a new
// stream of another context after the old one was destroyed.
void FakeCudaMoveStream(CUstream stream, CUcontext context) { StreamOf(stream)->context = context; }

}  // extern "C"
