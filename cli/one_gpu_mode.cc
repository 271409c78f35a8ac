// Finds the CPU NCCL backend and counts GPUs through the CUDA driver, loaded at run time
// (collwatch links no CUDA library: it must run on machines without one).
#include "cli/one_gpu_mode.h"

#include <dlfcn.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cli/files_beside.h"
#include "ring/settings.h"

namespace collwatch {

absl::StatusOr<std::string> FindCpuNccl() {
  return FindFileBesideThisBinary(
      Setting::kCpuNcclLibrary, {"../cpu_nccl/libnccl.so.2", "../lib/collwatch-cpu-nccl/libnccl.so.2"},
      "the CPU NCCL backend (libnccl.so.2)", "../cpu_nccl and ../lib/collwatch-cpu-nccl");
}

absl::StatusOr<int> VisibleGpuCount() {
  // The driver stays loaded: unloading it after cuInit is not supported.
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) {
    return absl::FailedPreconditionError("there is no CUDA driver on this machine (libcuda.so.1 cannot be loaded)");
  }
  using InitFn = int (*)(unsigned int);
  using CountFn = int (*)(int*);
  auto init = reinterpret_cast<InitFn>(dlsym(driver, "cuInit"));
  auto count = reinterpret_cast<CountFn>(dlsym(driver, "cuDeviceGetCount"));
  if (init == nullptr || count == nullptr) {
    return absl::FailedPreconditionError("libcuda.so.1 lacks cuInit or cuDeviceGetCount");
  }
  if (const int status = init(0); status != 0) {
    // 100: CUDA_ERROR_NO_DEVICE.
    if (status == 100) return 0;
    return absl::FailedPreconditionError(absl::StrCat("the CUDA driver cannot start (cuInit error ", status, ")"));
  }
  int devices = 0;
  if (const int status = count(&devices); status != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cuDeviceGetCount failed (error ", status, ")"));
  }
  return devices;
}

absl::StatusOr<OneGpuEnvironment> PrepareOneGpuMode() {
  absl::StatusOr<std::string> cpu_nccl = FindCpuNccl();
  if (!cpu_nccl.ok()) return absl::Status(cpu_nccl.status().code(), absl::StrCat("--one-gpu: ", cpu_nccl.status().message()));
  absl::StatusOr<int> gpus = VisibleGpuCount();
  if (!gpus.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--one-gpu runs every rank on one GPU, and ", gpus.status().message(),
        ". On a machine without a GPU, leave --one-gpu off: the CPU NCCL backend runs host-memory jobs as they are."));
  }
  if (*gpus == 0) {
    return absl::FailedPreconditionError(
        "--one-gpu runs every rank on one GPU, and the CUDA driver shows none (CUDA_VISIBLE_DEVICES may hide them)");
  }
  if (*gpus > 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--one-gpu runs every rank on one GPU, and ", *gpus,
        " are visible: choose one with CUDA_VISIBLE_DEVICES=N (or run the job on its GPUs without --one-gpu)"));
  }
  OneGpuEnvironment environment;
  environment.cpu_nccl_path = *cpu_nccl;
  environment.extra.emplace(SettingInfoOf(Setting::kCpuNcclOneGpu).name, "1");
  // CUDA buffers must work: fail clearly at the first call rather than fall back.
  environment.extra.emplace(SettingInfoOf(Setting::kCpuNcclCuda).name, "on");
  // As on GPUs, where NCCL often runs a collective the ranks disagree on to completion on
  // garbage, the ranks go on issuing calls: collwatch then sees as far as it would there.
  environment.extra.emplace(SettingInfoOf(Setting::kCpuNcclMismatch).name, "complete");
  return environment;
}

}  // namespace collwatch
