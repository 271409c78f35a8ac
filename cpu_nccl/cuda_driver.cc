// Finds the CUDA driver (dlopen of libcuda.so.1) and classifies buffers. Threading: the
// driver table is published once through an atomic pointer; the first load in kOn mode is
// serialised by a mutex; everything else is lock-free reads.
#include "cpu_nccl/cuda_driver.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cpu_nccl/config.h"

namespace collwatch::cpu_nccl {
namespace {

CudaDriver g_driver;
std::atomic<const CudaDriver*> g_published{nullptr};
pthread_mutex_t g_load_mutex = PTHREAD_MUTEX_INITIALIZER;
bool g_load_tried = false;  // kOn: one attempt per process (under g_load_mutex)
char g_load_problem[512];

// Fills g_driver from `library`; false (with g_load_problem) when a symbol is missing.
bool ResolveSymbols(void* library) noexcept {
  struct Entry {
    void** slot;
    const char* symbol;
  };
  const Entry entries[] = {
      {reinterpret_cast<void**>(&g_driver.Init), "cuInit"},
      {reinterpret_cast<void**>(&g_driver.GetErrorString), "cuGetErrorString"},
      {reinterpret_cast<void**>(&g_driver.CtxGetCurrent), "cuCtxGetCurrent"},
      {reinterpret_cast<void**>(&g_driver.CtxSetCurrent), "cuCtxSetCurrent"},
      {reinterpret_cast<void**>(&g_driver.PointerGetAttribute), "cuPointerGetAttribute"},
      {reinterpret_cast<void**>(&g_driver.MemAlloc), "cuMemAlloc_v2"},
      {reinterpret_cast<void**>(&g_driver.MemHostAlloc), "cuMemHostAlloc"},
      {reinterpret_cast<void**>(&g_driver.MemFreeHost), "cuMemFreeHost"},
      // Not the _ptsz variants: stream 0 is the legacy default stream, as for NCCL.
      {reinterpret_cast<void**>(&g_driver.MemcpyAsync), "cuMemcpyAsync"},
      {reinterpret_cast<void**>(&g_driver.EventCreate), "cuEventCreate"},
      {reinterpret_cast<void**>(&g_driver.EventRecord), "cuEventRecord"},
      {reinterpret_cast<void**>(&g_driver.EventQuery), "cuEventQuery"},
      {reinterpret_cast<void**>(&g_driver.EventDestroy), "cuEventDestroy_v2"},
      {reinterpret_cast<void**>(&g_driver.ModuleLoadData), "cuModuleLoadData"},
      {reinterpret_cast<void**>(&g_driver.ModuleGetFunction), "cuModuleGetFunction"},
      {reinterpret_cast<void**>(&g_driver.ModuleGetLoadingMode), "cuModuleGetLoadingMode"},
      {reinterpret_cast<void**>(&g_driver.LaunchKernel), "cuLaunchKernel"},
      {reinterpret_cast<void**>(&g_driver.StreamCreate), "cuStreamCreate"},
      {reinterpret_cast<void**>(&g_driver.StreamSynchronize), "cuStreamSynchronize"},
      {reinterpret_cast<void**>(&g_driver.StreamDestroy), "cuStreamDestroy_v2"},
      {reinterpret_cast<void**>(&g_driver.IpcGetMemHandle), "cuIpcGetMemHandle"},
      {reinterpret_cast<void**>(&g_driver.IpcOpenMemHandle), "cuIpcOpenMemHandle_v2"},
      {reinterpret_cast<void**>(&g_driver.StreamIsCapturing), "cuStreamIsCapturing"},
  };
  for (const Entry& e : entries) {
    *e.slot = dlsym(library, e.symbol);
    if (*e.slot == nullptr) {
      std::snprintf(g_load_problem, sizeof g_load_problem,
                    "CUDA mode: the CUDA driver library has no %s (driver too old for CUDA 12?)",
                    e.symbol);
      return false;
    }
  }
  return true;
}

// Resolves and initialises the driver in `library`; publishes it on success.
bool Adopt(void* library) noexcept {
  if (!ResolveSymbols(library)) return false;
  const CUresult init = g_driver.Init(0);
  if (init != CUDA_SUCCESS) {
    const char* text = nullptr;
    if (g_driver.GetErrorString(init, &text) != CUDA_SUCCESS || text == nullptr) text = "?";
    std::snprintf(g_load_problem, sizeof g_load_problem,
                  "CUDA mode: cuInit failed (%d: %s): no usable GPU or driver", init, text);
    return false;
  }
  g_published.store(&g_driver, std::memory_order_release);
  return true;
}

const CudaDriver* LoadOnce(CudaMode mode) noexcept {
  pthread_mutex_lock(&g_load_mutex);
  const CudaDriver* found = g_published.load(std::memory_order_acquire);
  if (found == nullptr && mode == CudaMode::kAuto) {
    // Only a library the program loaded itself: a CUDA buffer cannot exist without it.
    void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (library != nullptr && Adopt(library)) found = &g_driver;
  } else if (found == nullptr && !g_load_tried) {
    g_load_tried = true;
    const char* name = SettingValue(Setting::kCpuNcclLibcuda);
    void* library = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
    if (library == nullptr) {
      const char* why = dlerror();
      std::snprintf(g_load_problem, sizeof g_load_problem,
                    "COLLWATCH_CPU_NCCL_CUDA=on but the CUDA driver %s cannot be loaded (%s): "
                    "run on a machine with the NVIDIA driver, or set COLLWATCH_CPU_NCCL_CUDA=off "
                    "for host buffers",
                    name, why != nullptr ? why : "?");
    } else if (Adopt(library)) {
      found = &g_driver;
    }
  }
  pthread_mutex_unlock(&g_load_mutex);
  return found;
}

// Kernels must be resident before a collective holds a stream: loading one lazily waits
// for running kernels, so with CUDA_MODULE_LOADING=LAZY (PyTorch's default when unset) the
// first launch of any new kernel would hang behind a waiting collective. The driver reads
// the variable at cuInit; this runs when libnccl.so.2 is loaded, which for PyTorch is at
// `import torch`, before CUDA starts. cuda_progress.cc refuses to hold streams if it was late.
__attribute__((constructor)) void PreferEagerModuleLoading() noexcept {
  CudaMode mode = CudaMode::kAuto;
  if (ParseCudaMode(SettingValue(Setting::kCpuNcclCuda), &mode) && mode == CudaMode::kOff) return;
  setenv("CUDA_MODULE_LOADING", "EAGER", 1);
}

}  // namespace

bool ParseCudaMode(const char* text, CudaMode* mode) noexcept {
  if (std::strcmp(text, "auto") == 0) {
    *mode = CudaMode::kAuto;
  } else if (std::strcmp(text, "on") == 0 || std::strcmp(text, "1") == 0) {
    *mode = CudaMode::kOn;
  } else if (std::strcmp(text, "off") == 0 || std::strcmp(text, "0") == 0) {
    *mode = CudaMode::kOff;
  } else {
    return false;
  }
  return true;
}

CudaAvailability Driver() noexcept {
  CudaAvailability out;
  if (!ParseCudaMode(SettingValue(Setting::kCpuNcclCuda), &out.mode)) {
    out.problem = "COLLWATCH_CPU_NCCL_CUDA must be auto, on or off";
    out.bad_setting = true;
    return out;
  }
  if (out.mode == CudaMode::kOff) return out;
  out.driver = g_published.load(std::memory_order_acquire);
  if (out.driver == nullptr) out.driver = LoadOnce(out.mode);
  if (out.driver == nullptr && out.mode == CudaMode::kOn) {
    out.problem = g_load_problem[0] != '\0' ? g_load_problem : "CUDA mode: no CUDA driver";
  }
  return out;
}

BufferKind ClassifyBuffer(const CudaDriver* driver, const void* buffer) noexcept {
  if (driver != nullptr) {
    unsigned int memory_type = 0;
    const CUresult r = driver->PointerGetAttribute(&memory_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                                   reinterpret_cast<CUdeviceptr>(buffer));
    // CUDA_ERROR_INVALID_VALUE: memory the driver does not know, i.e. plain host memory.
    return r == CUDA_SUCCESS ? BufferKind::kCuda : BufferKind::kHost;
  }
  // Without a driver only host memory can be used; a device address is unmapped here and
  // would crash the copy, so refuse it with a message instead.
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  void* start = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(buffer) & ~(page - 1));
  unsigned char resident = 0;
  if (mincore(start, 1, &resident) != 0 && errno == ENOMEM) return BufferKind::kInvalid;
  return BufferKind::kHost;
}

const char* DescribeCudaError(const CudaDriver* driver, const char* what,
                              CUresult result) noexcept {
  static thread_local char message[256];
  const char* text = nullptr;
  if (driver == nullptr || driver->GetErrorString(result, &text) != CUDA_SUCCESS ||
      text == nullptr) {
    text = "unknown error";
  }
  std::snprintf(message, sizeof message, "CUDA mode: %s failed (%d: %s)", what,
                static_cast<int>(result), text);
  return message;
}

}  // namespace collwatch::cpu_nccl
