// Reads the environment table of config.h. Threading: reentrant (getenv only).
#include "cpu_nccl/config.h"

#include <cstdlib>
#include <cstring>

namespace collwatch::cpu_nccl {

const char* EnvValue(int index) noexcept {
  const char* value = std::getenv(kEnvVars[index].name);
  return value != nullptr && value[0] != '\0' ? value : kEnvVars[index].default_value;
}

Settings LoadSettings() noexcept {
  Settings s;
  const char* dir = EnvValue(kEnvShmDir);
  if (std::strlen(dir) >= sizeof s.shm_dir) dir = kEnvVars[kEnvShmDir].default_value;
  std::strcpy(s.shm_dir, dir);
  char* end = nullptr;
  const long spin = std::strtol(EnvValue(kEnvSpin), &end, 10);
  s.spin = (end != nullptr && *end == '\0' && spin >= 0 && spin <= 1000000)
               ? static_cast<int>(spin)
               : static_cast<int>(std::strtol(kEnvVars[kEnvSpin].default_value, nullptr, 10));
  s.mismatch_completes = std::strcmp(EnvValue(kEnvMismatch), "complete") == 0;
  return s;
}

}  // namespace collwatch::cpu_nccl
