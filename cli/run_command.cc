// Everything that can be checked is checked before anything starts (the preload, the
// one-GPU mode, the folders); a failure there is exit 2 with a sentence on stderr.
// Threading: see run_command.h.
#include "cli/run_command.h"

#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "cli/one_gpu_mode.h"
#include "cli/private_mps.h"
#include "cli/run_environment.h"
#include "cli/run_services.h"
#include "cli/run_supervisor.h"
#include "cli/stop_signals.h"
#include "files/safe_files.h"
#include "process/log_line.h"
#include "ring/settings.h"

namespace collwatch {

int RunJobCommand(const RunOptions& options) {
  // First of all: from the background (`collwatch run ... &`, `timeout` without
  // --foreground) any line on the terminal could stop collwatch (stty tostop).
  IgnoreTerminalStops();
  if (options.command.empty()) {
    LogLine(LogLevel::kError, "collwatch run") << "no command given (collwatch run [options] -- CMD ...)";
    return kExitRunFailed;
  }
  CommandEnvironmentInputs inputs;
  if (absl::StatusOr<std::string> preload = FindPreload(); preload.ok()) {
    inputs.preload = *std::move(preload);
  } else {
    LogLine(LogLevel::kError, "collwatch run") << preload.status().message();
    return kExitRunFailed;
  }
  if (const absl::Status plugin = CheckProfilerPluginFree(options.profiler_plugin, inputs.preload); !plugin.ok()) {
    LogLine(LogLevel::kError, "collwatch run") << plugin.message();
    return kExitRunFailed;
  }
  if (options.one_gpu) {
    // Checked before anything starts: a job put on a GPU it cannot have fails late and unclearly.
    absl::StatusOr<OneGpuEnvironment> one_gpu = PrepareOneGpuMode();
    if (!one_gpu.ok()) {
      LogLine(LogLevel::kError, "collwatch run") << one_gpu.status().message();
      return kExitRunFailed;
    }
    inputs.one_gpu = *std::move(one_gpu);
  }
  if (absl::Status settings = CheckRecorderSettings(); !settings.ok()) {
    LogLine(LogLevel::kError, "collwatch run") << settings.message();
    return kExitRunFailed;
  }
  absl::StatusOr<RunJobId> job = ChooseJobId(options.command);
  if (!job.ok()) {
    LogLine(LogLevel::kError, "collwatch run") << job.status().message();
    return kExitRunFailed;
  }
  if (job->own() && !options.collector.empty()) {
    // The wrapped multi-node form: each node's own id would be another job to the collector.
    LogLine(LogLevel::kError, "collwatch run") << "the job id " << job->id
              << " is this run's own; other nodes wrapped in their own collwatch run get others, and the "
                 "collector serves the first job that connects: export the same COLLWATCH_JOB_ID on every node "
                 "(Slurm's job and step, TORCHELASTIC_RUN_ID and a torchrun command's --rdzv-id are taken when "
                 "set)";
  }
  inputs.job = job->id;
  if (absl::Status folder = PrepareOutputFolder(options.out_dir); !folder.ok()) {
    LogLine(LogLevel::kError, "collwatch run") << "--out " << folder.message();
    return kExitRunFailed;
  }
  absl::StatusOr<RingFolder> rings = RingFolderForRun(options.ring_dir, options.out_dir);
  if (!rings.ok()) {
    LogLine(LogLevel::kError, "collwatch run") << rings.status().message();
    return kExitRunFailed;
  }
  inputs.ring_dir = rings->path;

  // Before the services start their threads: they inherit the block, so the stop signals
  // reach the supervising thread alone.
  BlockStopSignals();
  absl::StatusOr<std::unique_ptr<RunServices>> services = RunServices::Start(options, inputs.job, inputs.ring_dir);
  if (!services.ok()) {
    LogLine(LogLevel::kError, "collwatch run") << services.status().message();
    return kExitRunFailed;
  }
  if (const char* existing = SettingIfSet(Setting::kLdPreload)) inputs.inherited_ld_preload = existing;
  inputs.profiler_plugin = options.profiler_plugin;
  if (const char* tool = SettingIfSet(Setting::kNvtxInjectionPath);
      tool != nullptr && SettingIfSet(Setting::kNvtxChain) == nullptr && tool != inputs.preload) {
    inputs.inherited_nvtx_injection = tool;
    LogLine(LogLevel::kInfo, "collwatch run") << "NVTX_INJECTION64_PATH=" << tool
              << " still sees the job's NVTX ranges: libcollwatch.so hands them on (COLLWATCH_NVTX_CHAIN)";
  }
  // Last before the command: the server runs only as long as the job.
  std::unique_ptr<PrivateMpsServer> mps;
  if (options.mps) {
    absl::StatusOr<std::unique_ptr<PrivateMpsServer>> started = PrivateMpsServer::Start();
    if (!started.ok()) {
      LogLine(LogLevel::kError, "collwatch run") << started.status().message();
      return kExitRunFailed;
    }
    mps = *std::move(started);
    for (const auto& [name, value] : mps->JobEnvironment()) inputs.one_gpu->extra[name] = value;
    LogLine(LogLevel::kInfo, "collwatch run") << "the ranks share the GPU through a private MPS server (" << mps->folder() << ")";
  } else if (options.one_gpu) {
    LogLine(LogLevel::kInfo, "collwatch run") << "the ranks share the GPU in the driver's time slices, where a collective costs "
                 "milliseconds; --mps shares it at once (docs/one-gpu.md)";
  }
  RunSupervisor supervisor(options, inputs.job, *std::move(rings), **services);
  const int status = supervisor.Run(CommandEnvironment(inputs));
  if (mps != nullptr) {
    if (const std::string problem = mps->Stop(); !problem.empty()) LogLine(LogLevel::kError, "collwatch run") << problem;
  }
  return status;
}

}  // namespace collwatch
