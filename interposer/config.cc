// Reads the interposer's environment variables (table in ring/settings.h). Runs once.
// Threading: called by the one thread that creates the ring (recorder_lifecycle.cc).
#include "interposer/config.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace collwatch {
namespace {

void CopyString(char* out, size_t out_size, const char* value) noexcept {
  std::snprintf(out, out_size, "%s", value);
}

uint64_t RoundUpToPowerOfTwo(uint64_t value) noexcept {
  uint64_t power = 1;
  while (power < value) power <<= 1;
  return power;
}

}  // namespace

Config LoadConfig() noexcept {
  Config config;
  if (const char* value = SettingIfSet(Setting::kDisable)) config.disabled = std::strcmp(value, "0") != 0;
  // A bad value keeps the default and says so once (the rule is SettingValid's, which
  // `collwatch env` shows too): the job runs either way.
  char rule[128];
  for (const SettingRule& checked : kSettingRules) {
    const char* value = SettingIfSet(checked.setting);
    if (value == nullptr || SettingValid(checked.setting, value)) continue;
    SettingRuleWords(checked, rule, sizeof rule);
    std::fprintf(stderr, "collwatch: %s=%s is not %s; using %s\n", SettingInfoOf(checked.setting).name, value, rule,
                 SettingInfoOf(checked.setting).default_value);
  }
  config.completion = std::strcmp(SettingInForce(Setting::kCompletion), "off") != 0;
  config.tsc_clock = std::strcmp(SettingInForce(Setting::kClock), "monotonic") != 0;
  if (const char* value = SettingIfSet(Setting::kVerbose)) config.verbose = std::strcmp(value, "0") != 0;
  unsigned long long number = 0;
  if (const char* value = SettingIfSet(Setting::kRingRecords);
      value != nullptr && SettingValid(Setting::kRingRecords, value, &number)) {
    config.ring_records = RoundUpToPowerOfTwo(number);
    config.ring_records_set = true;
  }
  if (const char* value = SettingIfSet(Setting::kRingLanes);
      value != nullptr && SettingValid(Setting::kRingLanes, value, &number)) {
    config.ring_lanes = static_cast<uint32_t>(number);
  }
  RingDirSetting(config.ring_dir, sizeof config.ring_dir);
  if (const char* value = SettingIfSet(Setting::kCollector)) CopyString(config.collector, sizeof config.collector, value);
  if (const char* value = SettingIfSet(Setting::kAgent)) CopyString(config.agent_path, sizeof config.agent_path, value);
  if (const char* value = SettingIfSet(Setting::kTokenFile)) CopyString(config.token_file, sizeof config.token_file, value);
  if (const char* value = SettingIfSet(Setting::kTlsCa)) CopyString(config.tls_ca, sizeof config.tls_ca, value);
  char job[kJobIdSettingBytes];  // whole: SafeJobName hashes what it must cut
  JobIdSetting(job, sizeof job);
  SafeJobName(job, config.job, sizeof config.job);
  if (config.verbose) {
    for (const SettingInfo& info : kSettings) {
      if (std::strstr(info.read_by, "libcollwatch.so") == nullptr) continue;
      const char* value = SettingIfSet(info.setting);
      if (value != nullptr) {
        std::fprintf(stderr, "collwatch: %s=%s\n", info.name, value);
      } else {
        std::fprintf(stderr, "collwatch: %s unset (default %s)\n", info.name, info.default_text);
      }
    }
  }
  return config;
}

}  // namespace collwatch
