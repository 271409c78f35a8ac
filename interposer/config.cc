// Reads the interposer's environment variables (table in config.h). Runs once.
#include "interposer/config.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace collwatch {
namespace {

const char* Env(const char* name) noexcept {
  const char* value = std::getenv(name);
  return (value != nullptr && value[0] != '\0') ? value : nullptr;
}

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
  if (const char* value = Env("COLLWATCH_DISABLE")) config.disabled = std::strcmp(value, "0") != 0;
  if (const char* value = Env("COLLWATCH_COMPLETION")) {
    config.completion = std::strcmp(value, "off") != 0;
  }
  if (const char* value = Env("COLLWATCH_CLOCK")) {
    config.tsc_clock = std::strcmp(value, "monotonic") != 0;
  }
  if (const char* value = Env("COLLWATCH_VERBOSE")) config.verbose = std::strcmp(value, "0") != 0;
  if (const char* value = Env("COLLWATCH_RING_RECORDS")) {
    char* end = nullptr;
    unsigned long long records = std::strtoull(value, &end, 10);
    // Bounds: at least a few pages of records, at most 128 MiB per lane.
    if (end != value && *end == '\0' && records >= 64 && records <= (1ull << 20)) {
      config.ring_records = RoundUpToPowerOfTwo(records);
    }
  }
  if (const char* value = Env("COLLWATCH_RING_LANES")) {
    char* end = nullptr;
    unsigned long lanes = std::strtoul(value, &end, 10);
    if (end != value && *end == '\0' && lanes >= 2 && lanes <= 64) {
      config.ring_lanes = static_cast<uint32_t>(lanes);
    }
  }
  if (const char* value = Env("COLLWATCH_RING_DIR")) {
    CopyString(config.ring_dir, sizeof config.ring_dir, value);
  } else {
    std::snprintf(config.ring_dir, sizeof config.ring_dir, "/dev/shm/collwatch-%u",
                  static_cast<unsigned>(getuid()));
  }
  if (const char* value = Env("COLLWATCH_COLLECTOR")) CopyString(config.collector, sizeof config.collector, value);
  if (const char* value = Env("COLLWATCH_AGENT")) CopyString(config.agent_path, sizeof config.agent_path, value);
  if (const char* value = Env("COLLWATCH_TOKEN_FILE")) CopyString(config.token_file, sizeof config.token_file, value);
  if (const char* value = Env("COLLWATCH_TLS_CA")) CopyString(config.tls_ca, sizeof config.tls_ca, value);
  const char* job = Env("COLLWATCH_JOB_ID");
  if (job == nullptr) job = Env("TORCHELASTIC_RUN_ID");
  if (job == nullptr) job = Env("SLURM_JOB_ID");
  CopyString(config.job, sizeof config.job, job != nullptr ? job : "local");
  // The job name becomes part of a file name: keep it to a safe alphabet.
  for (char* c = config.job; *c != '\0'; ++c) {
    bool safe = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                *c == '-' || *c == '_' || *c == '.';
    if (!safe) *c = '_';
  }
  if (config.verbose) {
    for (const EnvVar& var : kEnvVars) {
      const char* value = std::getenv(var.name);
      std::fprintf(stderr, "collwatch: %s=%s (%s)\n", var.name,
                   value != nullptr ? value : var.default_value, var.description);
    }
  }
  return config;
}

}  // namespace collwatch
