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
  if (const char* value = SettingIfSet(Setting::kCompletion)) {
    config.completion = std::strcmp(value, "off") != 0;
  }
  if (const char* value = SettingIfSet(Setting::kClock)) {
    config.tsc_clock = std::strcmp(value, "monotonic") != 0;
  }
  if (const char* value = SettingIfSet(Setting::kVerbose)) config.verbose = std::strcmp(value, "0") != 0;
  // A bad value keeps the default and says so once: the job runs either way.
  if (const char* value = SettingIfSet(Setting::kRingRecords)) {
    unsigned long long records = 0;
    if (WholeNumberIn(value, kMinRingRecords, kMaxRingRecords, &records)) {
      config.ring_records = RoundUpToPowerOfTwo(records);
      config.ring_records_set = true;
    } else {
      std::fprintf(stderr, "collwatch: COLLWATCH_RING_RECORDS=%s is not a whole number from %llu to %llu; using %llu\n",
                   value, kMinRingRecords, kMaxRingRecords, static_cast<unsigned long long>(config.ring_records));
    }
  }
  if (const char* value = SettingIfSet(Setting::kRingLanes)) {
    unsigned long long lanes = 0;
    if (WholeNumberIn(value, kMinRingLanes, kMaxRingLanes, &lanes)) {
      config.ring_lanes = static_cast<uint32_t>(lanes);
    } else {
      std::fprintf(stderr, "collwatch: COLLWATCH_RING_LANES=%s is not a whole number from %llu to %llu; using %u\n",
                   value, kMinRingLanes, kMaxRingLanes, config.ring_lanes);
    }
  }
  RingDirSetting(config.ring_dir, sizeof config.ring_dir);
  if (const char* value = SettingIfSet(Setting::kCollector)) CopyString(config.collector, sizeof config.collector, value);
  if (const char* value = SettingIfSet(Setting::kAgent)) CopyString(config.agent_path, sizeof config.agent_path, value);
  if (const char* value = SettingIfSet(Setting::kTokenFile)) CopyString(config.token_file, sizeof config.token_file, value);
  if (const char* value = SettingIfSet(Setting::kTlsCa)) CopyString(config.tls_ca, sizeof config.tls_ca, value);
  char job[sizeof config.job];
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
