// What `collwatch run` hands its command: the preload (found beside this binary), the job
// id its rings carry, and the environment that turns recording on there (with --one-gpu,
// the CPU NCCL backend too). Threading: any thread.
#ifndef COLLWATCH_CLI_RUN_ENVIRONMENT_H_
#define COLLWATCH_CLI_RUN_ENVIRONMENT_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/one_gpu_mode.h"

namespace collwatch {

// libcollwatch.so: COLLWATCH_PRELOAD, else as built (../interposer) or installed (../lib,
// or this binary's own folder).
absl::StatusOr<std::string> FindPreload();

// `requested` in the alphabet and length the interposer writes into ring headers: at
// most 63 characters, each one not alphanumeric nor '-', '_' or '.' (nor '.' first)
// turned into '_'.
std::string SanitizedJobId(std::string_view requested);

// The job id of a run and where it came from. Every node of a job wrapped in its own
// `collwatch run` must reach the same one: a collector serves one job.
struct RunJobId {
  std::string id;      // in the interposer's alphabet (SanitizedJobId)
  static constexpr const char* kOwn = "this run";  // no other node can know it
  std::string source;  // "COLLWATCH_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "--rdzv-id", kOwn
  bool own() const { return source == kOwn; }
};

// The launcher's job id, sanitized: COLLWATCH_JOB_ID, TORCHELASTIC_RUN_ID, Slurm's job and
// step (ring/settings.h JobIdSetting), a torchrun `command`'s --rdzv-id; else this run's
// own, "run-YYYYmmdd-HHMMSS-PID" (local time). An error for a value that starts with '.'
// ("." and ".." name no job folder; a typo is likelier than a wish for "_.").
absl::StatusOr<RunJobId> ChooseJobId(const std::vector<std::string>& command);

// The preload's settings in this environment that would make the run pointless or that
// the preload would replace by its defaults: COLLWATCH_DISABLE set to anything but 0,
// COLLWATCH_RING_RECORDS or COLLWATCH_RING_LANES outside their bounds. The error names
// the variable, its value and what it may be.
absl::Status CheckRecorderSettings();

// With --profiler-plugin (`profiler_plugin`), an NCCL_PROFILER_PLUGIN naming a plugin other
// than `preload` (libcollwatch.so) is an error naming both and the choice: NCCL loads one
// profiler plugin, and collwatch does not forward NCCL's profiler calls to another.
absl::Status CheckProfilerPluginFree(bool profiler_plugin, const std::string& preload);

// Where the command's rings go.
struct RingFolder {
  std::string path;
  bool owned = false;  // made for this run: removed after it once every record is shipped
};

// `requested` when given; else a new private folder (mode 0700) in /dev/shm, or in
// `out_dir` when /dev/shm cannot have one. `out_dir` must exist.
absl::StatusOr<RingFolder> RingFolderForRun(const std::string& requested, const std::string& out_dir);

// What the command's environment gets from a run.
struct CommandEnvironmentInputs {
  std::string preload;                       // libcollwatch.so
  std::optional<OneGpuEnvironment> one_gpu;  // set with --one-gpu
  std::string inherited_ld_preload;          // LD_PRELOAD as collwatch run found it
  // NVTX_INJECTION64_PATH as collwatch run found it (Nsight Systems sets it), when
  // COLLWATCH_NVTX_CHAIN is not set already.
  std::string inherited_nvtx_injection;
  bool profiler_plugin = false;              // --profiler-plugin: NCCL_PROFILER_PLUGIN names the preload
  std::string ring_dir;
  std::string job;
};

// The variables set for the command: LD_PRELOAD (what was preloaded already, then the
// preload, then with --one-gpu the CPU NCCL backend), NVTX_INJECTION64_PATH (the preload
// is also the NVTX injection library; another one found there moves to
// COLLWATCH_NVTX_CHAIN, which the preload hands NVTX on to), COLLWATCH_RING_DIR,
// COLLWATCH_JOB_ID, with
// --profiler-plugin NCCL_PROFILER_PLUGIN (the preload is NCCL's profiler plugin too), and
// the one-GPU mode's own switches.
std::map<std::string, std::string> CommandEnvironment(const CommandEnvironmentInputs& inputs);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_RUN_ENVIRONMENT_H_
