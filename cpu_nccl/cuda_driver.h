// The CUDA driver API as the CPU NCCL backend uses it: libcuda.so.1 loaded with dlopen at
// run time (the library itself depends on libc only), the mode setting, and the question
// "is this buffer CUDA memory?". Threading: Driver() initialises once (pthread_once); the
// table is read-only afterwards and its functions are the driver's (thread-safe).
#ifndef COLLWATCH_CPU_NCCL_CUDA_DRIVER_H_
#define COLLWATCH_CPU_NCCL_CUDA_DRIVER_H_

#include <cuda.h>

#include <cstddef>

namespace collwatch::cpu_nccl {

// COLLWATCH_CPU_NCCL_CUDA: when buffers may be CUDA memory.
enum class CudaMode {
  kAuto,  // only if libcuda.so.1 is already loaded: only then can a CUDA buffer exist
  kOn,    // load libcuda.so.1; a call fails with a clear message if that is impossible
  kOff,   // every buffer is host memory; libcuda is never touched
};

// "auto", "on" or "off" (also 1/0); false for anything else.
bool ParseCudaMode(const char* text, CudaMode* mode) noexcept;

// The driver functions used, by their ABI names (cuda.h maps some to _v2 symbols).
struct CudaDriver {
  decltype(&::cuInit) Init;
  decltype(&::cuGetErrorString) GetErrorString;
  decltype(&::cuCtxGetCurrent) CtxGetCurrent;
  decltype(&::cuCtxSetCurrent) CtxSetCurrent;
  decltype(&::cuPointerGetAttribute) PointerGetAttribute;
  decltype(&::cuMemAlloc) MemAlloc;
  decltype(&::cuMemHostAlloc) MemHostAlloc;
  decltype(&::cuMemFreeHost) MemFreeHost;
  decltype(&::cuMemcpyAsync) MemcpyAsync;
  decltype(&::cuEventCreate) EventCreate;
  decltype(&::cuEventRecord) EventRecord;
  decltype(&::cuEventQuery) EventQuery;
  decltype(&::cuEventDestroy) EventDestroy;
  decltype(&::cuModuleLoadData) ModuleLoadData;
  decltype(&::cuModuleGetFunction) ModuleGetFunction;
  decltype(&::cuModuleGetLoadingMode) ModuleGetLoadingMode;
  decltype(&::cuLaunchKernel) LaunchKernel;
  decltype(&::cuStreamCreate) StreamCreate;
  decltype(&::cuStreamSynchronize) StreamSynchronize;
  decltype(&::cuStreamDestroy) StreamDestroy;
  decltype(&::cuIpcGetMemHandle) IpcGetMemHandle;
  decltype(&::cuIpcOpenMemHandle) IpcOpenMemHandle;
  decltype(&::cuStreamIsCapturing) StreamIsCapturing;
};

// Outcome of looking for the driver, fixed at the first call of Driver().
struct CudaAvailability {
  CudaMode mode = CudaMode::kAuto;
  const CudaDriver* driver = nullptr;  // nullptr: buffers are host memory
  // Why driver is nullptr in kOn mode (or the mode setting is unusable): a sentence for
  // ncclGetLastError. Empty when nothing is wrong.
  const char* problem = "";
  bool bad_setting = false;  // the problem is an unusable COLLWATCH_CPU_NCCL_CUDA value
};

// Reads COLLWATCH_CPU_NCCL_CUDA and, in kAuto mode, looks for an already loaded
// libcuda.so.1 on every call until found (a program may load CUDA after its first NCCL
// call); in kOn mode loads it (COLLWATCH_CPU_NCCL_LIBCUDA names another file) once.
CudaAvailability Driver() noexcept;

// Where a buffer lives, asked of the driver (nullptr driver: always kHost).
enum class BufferKind { kHost, kCuda, kInvalid };

// kCuda for device, managed and CUDA-registered host memory (copied in stream order);
// kHost for memory the driver does not know; kInvalid when it is neither mapped host
// memory nor known to a loaded driver (probed with mincore when no driver is loaded).
BufferKind ClassifyBuffer(const CudaDriver* driver, const void* buffer) noexcept;

// "cuXxx failed: <driver's error string>" into a static per-thread buffer.
const char* DescribeCudaError(const CudaDriver* driver, const char* what, CUresult result) noexcept;

}  // namespace collwatch::cpu_nccl

#endif  // COLLWATCH_CPU_NCCL_CUDA_DRIVER_H_
