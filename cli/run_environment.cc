// The preload goes after anything already in LD_PRELOAD (a sanitizer runtime must come
// first), and the CPU NCCL backend after the preload, so that the interposer finds it as
// "the next" NCCL. Threading: see run_environment.h.
#include "cli/run_environment.h"

#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "cli/files_beside.h"
#include "ring/ring_format.h"
#include "ring/settings.h"

namespace collwatch {

absl::StatusOr<std::string> FindPreload() {
  return FindFileBesideThisBinary(Setting::kPreload,
                                  {"../interposer/libcollwatch.so", "../lib/libcollwatch.so", "libcollwatch.so"},
                                  "libcollwatch.so", "../interposer, ../lib and its own folder");
}

std::string SanitizedJobId(std::string_view requested) {
  char safe[ring::kJobBytes];
  SafeJobName(std::string(requested).c_str(), safe, sizeof safe);
  return safe;
}

namespace {

// torchrun's --rdzv-id (or --rdzv_id), given as "--rdzv-id=X" or "--rdzv-id X": the job id
// every node's torchrun shares. Its workers get it as TORCHELASTIC_RUN_ID, which a `collwatch
// run` wrapping torchrun cannot see.
std::string RendezvousIdOf(const std::vector<std::string>& command) {
  for (size_t i = 0; i < command.size(); ++i) {
    for (const std::string_view option : {"--rdzv-id", "--rdzv_id"}) {
      const std::string_view argument = command[i];
      if (argument == option && i + 1 < command.size()) return command[i + 1];
      if (argument.size() > option.size() && argument.substr(0, option.size()) == option &&
          argument[option.size()] == '=') {
        return std::string(argument.substr(option.size() + 1));
      }
    }
  }
  return "";
}

}  // namespace

absl::StatusOr<RunJobId> ChooseJobId(const std::vector<std::string>& command) {
  char launcher_id[kJobIdSettingBytes];  // the preload reads as much (SafeJobName hashes it whole)
  const char* variable = JobIdSetting(launcher_id, sizeof launcher_id);
  RunJobId job{.id = variable != nullptr ? launcher_id : RendezvousIdOf(command),
               .source = variable != nullptr ? variable : "--rdzv-id"};
  if (variable == nullptr && job.id == "none") job.id.clear();  // torchrun's default names no job
  if (!job.id.empty()) {
    if (job.id[0] == '.') {
      return absl::InvalidArgumentError(absl::StrCat(
          job.source, "='", job.id, "' is not a job id: give letters, digits, '-', '_' and '.', not '.' first"));
    }
    job.id = SanitizedJobId(job.id);
    return job;
  }
  const time_t now = time(nullptr);
  tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  return RunJobId{.id = absl::StrCat("run-", stamp, "-", getpid()), .source = RunJobId::kOwn};
}

absl::Status CheckRecorderSettings() {
  if (const char* disable = SettingIfSet(Setting::kDisable); disable != nullptr && std::strcmp(disable, "0") != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(SettingInfoOf(Setting::kDisable).name, "=", disable,
                     " turns recording off in the job: collwatch run would see no call (unset it, or give 0)"));
  }
  // The ring's sizes by the rule the preload reads (SettingValid); a bad one would leave the
  // job on a ring of the default size, not the one asked for.
  for (const Setting setting : {Setting::kRingRecords, Setting::kRingLanes}) {
    const char* value = SettingIfSet(setting);
    if (value != nullptr && !SettingValid(setting, value)) {
      char rule[128];
      SettingRuleWords(*SettingRuleOf(setting), rule, sizeof rule);
      return absl::InvalidArgumentError(absl::StrCat(SettingInfoOf(setting).name, "=", value, " is not ", rule));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckProfilerPluginFree(bool profiler_plugin, const std::string& preload) {
  const char* other = SettingIfSet(Setting::kNcclProfilerPlugin);
  if (!profiler_plugin || other == nullptr) return absl::OkStatus();
  std::error_code ignored;
  if (other == preload || std::filesystem::equivalent(other, preload, ignored) ||
      std::filesystem::path(other).filename() == std::filesystem::path(preload).filename()) {
    return absl::OkStatus();  // libcollwatch.so already
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--profiler-plugin makes libcollwatch.so NCCL's profiler plugin, but NCCL_PROFILER_PLUGIN=", other,
      " names another one, and NCCL loads only one: unset NCCL_PROFILER_PLUGIN to record NCCL's profiler events "
      "with collwatch, or run without --profiler-plugin to keep ",
      other, " (collwatch then records through the preload alone; docs/profiler-plugin.md)"));
}

absl::StatusOr<RingFolder> RingFolderForRun(const std::string& requested, const std::string& out_dir) {
  if (!requested.empty()) return RingFolder{.path = requested, .owned = false};
  char pattern[] = "/dev/shm/collwatch-run-XXXXXX";
  std::string fallback = absl::StrCat(out_dir, "/.rings-XXXXXX");
  const char* made = mkdtemp(pattern);
  if (made == nullptr) made = mkdtemp(fallback.data());
  if (made == nullptr) return absl::InternalError(absl::StrCat("cannot create a ring folder: ", std::strerror(errno)));
  return RingFolder{.path = made, .owned = true};
}

std::map<std::string, std::string> CommandEnvironment(const CommandEnvironmentInputs& inputs) {
  std::map<std::string, std::string> environment;
  std::string ld_preload = inputs.preload;
  if (inputs.one_gpu.has_value()) {
    ld_preload = absl::StrCat(inputs.preload, ":", inputs.one_gpu->cpu_nccl_path);
    environment.insert(inputs.one_gpu->extra.begin(), inputs.one_gpu->extra.end());
  }
  if (!inputs.inherited_ld_preload.empty()) ld_preload = absl::StrCat(inputs.inherited_ld_preload, ":", ld_preload);
  // insert, not assign: the one-GPU switches were there first, as they always were.
  environment.insert({{SettingInfoOf(Setting::kLdPreload).name, ld_preload},
                      {SettingInfoOf(Setting::kNvtxInjectionPath).name, inputs.preload},
                      {SettingInfoOf(Setting::kRingDir).name, inputs.ring_dir},
                      {SettingInfoOf(Setting::kJobId).name, inputs.job}});
  if (inputs.profiler_plugin) environment[SettingInfoOf(Setting::kNcclProfilerPlugin).name] = inputs.preload;
  // NVTX loads one injection library: ours, which loads the other one (a path naming the
  // preload by another spelling is caught there, when both load as one library).
  if (!inputs.inherited_nvtx_injection.empty() && inputs.inherited_nvtx_injection != inputs.preload) {
    environment[SettingInfoOf(Setting::kNvtxChain).name] = inputs.inherited_nvtx_injection;
  }
  return environment;
}

}  // namespace collwatch
