// Reads the backend's settings (rows of ring/settings.h). Threading: reentrant (getenv only).
#include "cpu_nccl/config.h"

#include <cstdlib>
#include <cstring>

namespace collwatch::cpu_nccl {

Settings LoadSettings() noexcept {
  Settings s;
  const char* dir = SettingValue(Setting::kCpuNcclShmDir);
  if (std::strlen(dir) >= sizeof s.shm_dir) dir = SettingInfoOf(Setting::kCpuNcclShmDir).default_value;
  std::strcpy(s.shm_dir, dir);
  char* end = nullptr;
  const long spin = std::strtol(SettingValue(Setting::kCpuNcclSpin), &end, 10);
  s.spin = (end != nullptr && *end == '\0' && spin >= 0 && spin <= 1000000)
               ? static_cast<int>(spin)
               : static_cast<int>(std::strtol(SettingInfoOf(Setting::kCpuNcclSpin).default_value, nullptr, 10));
  s.mismatch_completes = std::strcmp(SettingValue(Setting::kCpuNcclMismatch), "complete") == 0;
  return s;
}

}  // namespace collwatch::cpu_nccl
