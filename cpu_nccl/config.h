// Settings of the CPU NCCL backend: one table of environment variables (name, default,
// description), read when a communicator is created (not on the operation path).
// Threading: LoadSettings() only reads the environment; call it from any thread.
#ifndef COLLWATCH_CPU_NCCL_CONFIG_H_
#define COLLWATCH_CPU_NCCL_CONFIG_H_

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
    {"COLLWATCH_CPU_NCCL_CUDA", "auto",
     "CUDA buffers: auto (if libcuda.so.1 is loaded), on (load it; fail clearly if not), off"},
    {"COLLWATCH_CPU_NCCL_LIBCUDA", "libcuda.so.1", "the CUDA driver library the CUDA mode loads"},
    {"COLLWATCH_CPU_NCCL_IPC", "0",
     "1: all-gathers and float32/bfloat16 sum reduce-scatters on CUDA buffers move GPU to GPU "
     "through CUDA IPC (staged through host memory when a rank's buffer cannot be shared; "
     "experimental: hangs in an FSDP2 job); 0: every CUDA buffer is staged through host memory"},
    {"COLLWATCH_CPU_NCCL_TRACE", "0",
     "1: the CUDA mode logs each stream operation's enqueue, start and end to stderr, and "
     "operations that wait longer than 5 s"},
    {"COLLWATCH_CPU_NCCL_MISMATCH", "hang",
     "a collective whose ranks disagree (op, count, dtype, reduce op, root) at one position: "
     "hang blocks every rank for good; complete returns on every rank without moving data "
     "(outputs unspecified), as NCCL on GPUs often runs such collectives to completion"},
    {"COLLWATCH_CPU_NCCL_ONE_GPU", "",
     "1 (collwatch run --one-gpu): each rank sees LOCAL_RANK=0, the launcher's value kept in "
     "COLLWATCH_ORIGINAL_LOCAL_RANK; read once, when the library is loaded"},
};

// Indices into kEnvVars.
inline constexpr int kEnvShmDir = 0;
inline constexpr int kEnvSpin = 1;
inline constexpr int kEnvCudaMode = 2;
inline constexpr int kEnvLibcuda = 3;
inline constexpr int kEnvIpc = 4;
inline constexpr int kEnvTrace = 5;
inline constexpr int kEnvMismatch = 6;
inline constexpr int kEnvOneGpu = 7;
inline constexpr const char* kOneGpuVariable = kEnvVars[kEnvOneGpu].name;

// The variable's value, or its default when unset or empty.
const char* EnvValue(int index) noexcept;

struct Settings {
  char shm_dir[200] = {};
  int spin = 64;
  bool mismatch_completes = false;  // COLLWATCH_CPU_NCCL_MISMATCH=complete
};

// Reads kEnvVars. Never fails: unusable values fall back to the defaults.
Settings LoadSettings() noexcept;

}  // namespace collwatch::cpu_nccl

#endif  // COLLWATCH_CPU_NCCL_CONFIG_H_
