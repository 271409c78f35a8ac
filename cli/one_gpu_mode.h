// `collwatch run --one-gpu`: every rank of an unmodified job on one GPU, through the CPU
// NCCL backend's CUDA mode (cpu_nccl/README.md). This file finds that backend and
// checks, before the job starts, that there is exactly one GPU to put the ranks on.
// Threading: call from the supervising thread before the command is started.
#ifndef COLLWATCH_CLI_ONE_GPU_MODE_H_
#define COLLWATCH_CLI_ONE_GPU_MODE_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace collwatch {

// What the command's environment gets in the mode: the backend's libnccl.so.2 after the
// preload in LD_PRELOAD (so the job's own NCCL is never loaded and the interposer finds
// the backend as "the next" NCCL), and the backend's switches: the one-GPU view and its
// CUDA mode on.
struct OneGpuEnvironment {
  std::string cpu_nccl_path;                  // the backend's libnccl.so.2
  std::map<std::string, std::string> extra;   // variables set for the command
};

// The backend's libnccl.so.2: COLLWATCH_CPU_NCCL, else beside this binary's build tree
// (../cpu_nccl) or carried layout (../lib/collwatch-cpu-nccl). Never a system
// libnccl.so.2: that would be the real NCCL.
absl::StatusOr<std::string> FindCpuNccl();

// How many GPUs the CUDA driver shows this process (CUDA_VISIBLE_DEVICES applies), or an
// error that says why there is none to use (no driver, cuInit failed).
absl::StatusOr<int> VisibleGpuCount();

// Everything the mode needs, checked: the backend found and exactly one visible GPU.
// Errors are full sentences for the user.
absl::StatusOr<OneGpuEnvironment> PrepareOneGpuMode();

}  // namespace collwatch

#endif  // COLLWATCH_CLI_ONE_GPU_MODE_H_
