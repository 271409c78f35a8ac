// Settings of the CPU NCCL backend, from its environment variables (their names, defaults
// and meanings are rows of the one table, ring/settings.h), read when a communicator is
// created (not on the operation path).
// Threading: LoadSettings() only reads the environment; call it from any thread.
#ifndef COLLWATCH_CPU_NCCL_CONFIG_H_
#define COLLWATCH_CPU_NCCL_CONFIG_H_

#include "ring/settings.h"

namespace collwatch::cpu_nccl {

struct Settings {
  char shm_dir[200] = {};
  int spin = 64;
  bool mismatch_completes = false;  // COLLWATCH_CPU_NCCL_MISMATCH=complete
};

// Reads the backend's settings. Never fails: unusable values fall back to the defaults.
Settings LoadSettings() noexcept;

}  // namespace collwatch::cpu_nccl

#endif  // COLLWATCH_CPU_NCCL_CONFIG_H_
