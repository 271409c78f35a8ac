// Settings of the CPU NCCL backend: one table of environment variables (name, default,
// description), read when a communicator is created (not on the operation path).
// Threading: LoadSettings() only reads the environment; call it from any thread.
#ifndef COLLWATCH_TRAINER_CPU_NCCL_CONFIG_H_
#define COLLWATCH_TRAINER_CPU_NCCL_CONFIG_H_

namespace collwatch::cpu_nccl {

struct EnvVar {
  const char* name;
  const char* default_value;
  const char* description;
};

// Every variable the backend reads, in one place (README.md lists them too).
inline constexpr EnvVar kEnvVars[] = {
    {"COLLWATCH_CPU_NCCL_SHM_DIR", "/dev/shm",
     "folder of the per-communicator shared-memory files (tmpfs recommended)"},
    {"COLLWATCH_CPU_NCCL_SPIN", "64",
     "polls of a blocked operation before it sleeps on its futex (0: sleep at once)"},
    {"COLLWATCH_CPU_NCCL_ONE_GPU", "",
     "1: the one-GPU mode's view of each rank: LOCAL_RANK reads 0 (the launcher's value in "
     "COLLWATCH_ORIGINAL_LOCAL_RANK) and CUDA modules load eagerly; read once, at load"},
};
inline constexpr const char* kOneGpuVariable = kEnvVars[2].name;

struct Settings {
  char shm_dir[200] = {};
  int spin = 64;
};

// Reads kEnvVars. Never fails: unusable values fall back to the defaults.
Settings LoadSettings() noexcept;

}  // namespace collwatch::cpu_nccl

#endif  // COLLWATCH_TRAINER_CPU_NCCL_CONFIG_H_
