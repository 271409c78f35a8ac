// The one-GPU mode's view of a rank (COLLWATCH_CPU_NCCL_ONE_GPU=1, set by `collwatch run
// --one-gpu`). Unmodified jobs pick their GPU by LOCAL_RANK (torch.cuda.set_device(
// local_rank), torch.device(f"cuda:{local_rank}")); on a machine with one GPU only index 0
// exists, so each rank sees LOCAL_RANK=0, its launcher's value kept in
// COLLWATCH_ORIGINAL_LOCAL_RANK. RANK, WORLD_SIZE, LOCAL_WORLD_SIZE and everything else
// stay as they are. (Eager CUDA module loading, which the CUDA mode needs, is set in
// cuda_driver.cc for every process that loads the library.)
//
// Runs as a constructor of the preloaded library: before the program's main, so before
// Python copies the environment into os.environ, and while the process has one thread.
#include <cstdlib>
#include <cstring>

#include "cpu_nccl/config.h"

namespace collwatch::cpu_nccl {
namespace {

__attribute__((constructor)) void ApplyOneGpuView() noexcept {
  if (std::strcmp(SettingValue(Setting::kCpuNcclOneGpu), "1") != 0) return;
  const char* local_rank = std::getenv(SettingInfoOf(Setting::kLocalRank).name);
  const char* original_name = SettingInfoOf(Setting::kOriginalLocalRank).name;
  if (local_rank != nullptr && std::getenv(original_name) == nullptr) {
    setenv(original_name, local_rank, 1);
    setenv(SettingInfoOf(Setting::kLocalRank).name, "0", 1);
  }
}

}  // namespace
}  // namespace collwatch::cpu_nccl
