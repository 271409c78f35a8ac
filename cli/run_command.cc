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
#include "ring/settings.h"

namespace collwatch {

int RunJobCommand(const RunOptions& options) {
  // First of all: from the background (`collwatch run ... &`, `timeout` without
  // --foreground) any line on the terminal could stop collwatch (stty tostop).
  IgnoreTerminalStops();
  if (options.command.empty()) {
    std::cerr << "collwatch run: no command given (collwatch run [options] -- CMD ...)\n";
    return 2;
  }
  CommandEnvironmentInputs inputs;
  if (absl::StatusOr<std::string> preload = FindPreload(); preload.ok()) {
    inputs.preload = *std::move(preload);
  } else {
    std::cerr << "collwatch run: " << preload.status().message() << "\n";
    return 2;
  }
  if (const absl::Status plugin = CheckProfilerPluginFree(options.profiler_plugin, inputs.preload); !plugin.ok()) {
    std::cerr << "collwatch run: " << plugin.message() << "\n";
    return 2;
  }
  if (options.one_gpu) {
    // Checked before anything starts: a job put on a GPU it cannot have fails late and unclearly.
    absl::StatusOr<OneGpuEnvironment> one_gpu = PrepareOneGpuMode();
    if (!one_gpu.ok()) {
      std::cerr << "collwatch run: " << one_gpu.status().message() << "\n";
      return 2;
    }
    inputs.one_gpu = *std::move(one_gpu);
  }
  if (absl::Status settings = CheckRecorderSettings(); !settings.ok()) {
    std::cerr << "collwatch run: " << settings.message() << "\n";
    return 2;
  }
  absl::StatusOr<std::string> job = DefaultJobId();
  if (!job.ok()) {
    std::cerr << "collwatch run: " << job.status().message() << "\n";
    return 2;
  }
  inputs.job = *std::move(job);
  if (absl::Status folder = PrepareOutputFolder(options.out_dir); !folder.ok()) {
    std::cerr << "collwatch run: --out " << folder.message() << "\n";
    return 2;
  }
  absl::StatusOr<RingFolder> rings = RingFolderForRun(options.ring_dir, options.out_dir);
  if (!rings.ok()) {
    std::cerr << "collwatch run: " << rings.status().message() << "\n";
    return 2;
  }
  inputs.ring_dir = rings->path;

  // Before the services start their threads: they inherit the block, so the stop signals
  // reach the supervising thread alone.
  BlockStopSignals();
  absl::StatusOr<std::unique_ptr<RunServices>> services = RunServices::Start(options, inputs.job, inputs.ring_dir);
  if (!services.ok()) {
    std::cerr << "collwatch run: " << services.status().message() << "\n";
    return 2;
  }
  if (const char* existing = SettingIfSet(Setting::kLdPreload)) inputs.inherited_ld_preload = existing;
  inputs.profiler_plugin = options.profiler_plugin;
  if (const char* tool = SettingIfSet(Setting::kNvtxInjectionPath);
      tool != nullptr && SettingIfSet(Setting::kNvtxChain) == nullptr && tool != inputs.preload) {
    inputs.inherited_nvtx_injection = tool;
    std::cerr << "collwatch run: NVTX_INJECTION64_PATH=" << tool
              << " still sees the job's NVTX ranges: libcollwatch.so hands them on (COLLWATCH_NVTX_CHAIN)\n";
  }
  // Last before the command: the server runs only as long as the job.
  std::unique_ptr<PrivateMpsServer> mps;
  if (options.mps) {
    absl::StatusOr<std::unique_ptr<PrivateMpsServer>> started = PrivateMpsServer::Start();
    if (!started.ok()) {
      std::cerr << "collwatch run: " << started.status().message() << "\n";
      return 2;
    }
    mps = *std::move(started);
    for (const auto& [name, value] : mps->JobEnvironment()) inputs.one_gpu->extra[name] = value;
    std::cerr << "collwatch run: the ranks share the GPU through a private MPS server (" << mps->folder() << ")\n";
  } else if (options.one_gpu) {
    std::cerr << "collwatch run: the ranks share the GPU in the driver's time slices, where a collective costs "
                 "milliseconds; --mps shares it at once (docs/one-gpu.md)\n";
  }
  RunSupervisor supervisor(options, inputs.job, *std::move(rings), **services);
  const int status = supervisor.Run(CommandEnvironment(inputs));
  if (mps != nullptr) {
    if (const std::string problem = mps->Stop(); !problem.empty()) std::cerr << "collwatch run: " << problem << "\n";
  }
  return status;
}

}  // namespace collwatch
