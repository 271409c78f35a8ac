// A CUDA driver on host memory, for testing the CPU NCCL backend's CUDA mode without a GPU
// (loaded through COLLWATCH_CPU_NCCL_LIBCUDA). "Device" memory comes from cuMemAlloc_v2
// (host memory the fake remembers); each stream is a thread that runs its queue in order:
// copies, event records, and the stream-hold kernel, emulated as "publish the token in
// *ready, wait until *release reaches it". FAKE_CUDA_LAZY=1 reports lazy module loading,
// FAKE_CUDA_CAPTURING=1 streams under graph capture.
// Threading: one worker thread per stream; the API functions may be called from any thread.
#include <cuda.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace {

struct Op {
  enum Kind { kCopy, kHold, kEvent } kind;
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  std::atomic<uint32_t>* ready = nullptr;
  std::atomic<uint32_t>* release = nullptr;
  uint32_t token = 0;
  std::atomic<int>* event_pending = nullptr;
};

class FakeStream {
 public:
  FakeStream() : worker_([this] { Work(); }) { worker_.detach(); }

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
        break;
      case Op::kEvent:
        op.event_pending->fetch_sub(1);
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
};

struct Range {
  uintptr_t begin;
  uintptr_t end;
  unsigned memory_type;
};

std::mutex g_ranges_mutex;
std::vector<Range> g_ranges;
std::atomic<int> g_hold_launches{0};
char g_context_token;
char g_hold_function_token;
char g_other_function_token;

FakeStream* StreamOf(CUstream stream) {
  static FakeStream* legacy = new FakeStream();
  return stream == nullptr ? legacy : reinterpret_cast<FakeStream*>(stream);
}

void Remember(void* memory, size_t bytes, unsigned memory_type) {
  std::lock_guard<std::mutex> lock(g_ranges_mutex);
  const auto begin = reinterpret_cast<uintptr_t>(memory);
  g_ranges.push_back({begin, begin + bytes, memory_type});
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
  *context = reinterpret_cast<CUcontext>(&g_context_token);
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }

CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr pointer) {
  if (attribute != CU_POINTER_ATTRIBUTE_MEMORY_TYPE) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_ranges_mutex);
  for (const Range& r : g_ranges) {
    if (pointer >= r.begin && pointer < r.end) {
      *static_cast<unsigned*>(data) = r.memory_type;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;  // what the driver says of plain host memory
}

CUresult cuMemAlloc_v2(CUdeviceptr* pointer, size_t bytes) {
  void* memory = std::calloc(1, bytes == 0 ? 1 : bytes);
  if (memory == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  Remember(memory, bytes, CU_MEMORYTYPE_DEVICE);
  *pointer = reinterpret_cast<CUdeviceptr>(memory);
  return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr pointer) {
  Forget(reinterpret_cast<void*>(pointer));
  std::free(reinterpret_cast<void*>(pointer));
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
  fake->pending.fetch_add(1);
  Op op{Op::kEvent};
  op.event_pending = &fake->pending;
  StreamOf(stream)->Push(op);
  return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent event) {
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
  *function = reinterpret_cast<CUfunction>(std::strcmp(name, "collwatch_hold_stream") == 0
                                               ? &g_hold_function_token
                                               : &g_other_function_token);
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
  // Only the stream-hold kernel is emulated (the reductions need CUDA IPC, refused here).
  if (function != reinterpret_cast<CUfunction>(&g_hold_function_token))
    return CUDA_ERROR_NOT_SUPPORTED;
  Op op{Op::kHold};
  op.ready = *static_cast<std::atomic<uint32_t>**>(params[0]);
  op.release = *static_cast<std::atomic<uint32_t>**>(params[1]);
  op.token = *static_cast<uint32_t*>(params[2]);
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

// No memory is shared between the fake's processes: CUDA IPC is refused, as the driver
// refuses it for memory that is not cudaMalloc memory.
CUresult cuIpcGetMemHandle(CUipcMemHandle*, CUdeviceptr) { return CUDA_ERROR_NOT_SUPPORTED; }

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr*, CUipcMemHandle, unsigned int) {
  return CUDA_ERROR_INVALID_HANDLE;
}

// FAKE_CUDA_CAPTURING=1: every stream is being captured into a graph.
CUresult cuStreamIsCapturing(CUstream, CUstreamCaptureStatus* status) {
  const char* capturing = std::getenv("FAKE_CUDA_CAPTURING");
  *status = capturing != nullptr && capturing[0] == '1' ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                                        : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

// Streams are never freed: their detached workers may still be waking up.
CUresult cuStreamDestroy_v2(CUstream) { return CUDA_SUCCESS; }

// For the tests: stream-hold kernels launched so far in this process (one per stream and
// stream-ordered call or group).
int FakeCudaHoldLaunches() { return g_hold_launches.load(); }

}  // extern "C"
