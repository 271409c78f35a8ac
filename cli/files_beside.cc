// Looks up collwatch's own files: an environment variable first, then beside the binary
// (its build tree's or install prefix's layout).
#include "cli/files_beside.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace collwatch {

absl::StatusOr<std::string> FindFileBesideThisBinary(Setting setting, const std::vector<std::string>& relative_paths,
                                                     const std::string& what, const std::string& looked_in) {
  const char* variable = SettingInfoOf(setting).name;
  if (const char* path = SettingIfSet(setting)) {
    if (access(path, R_OK) == 0) return std::string(path);
    return absl::NotFoundError(absl::StrCat(variable, "=", path, " cannot be read"));
  }
  std::error_code ignored;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ignored);
  const std::filesystem::path dir = self.parent_path();
  for (const std::string& relative : relative_paths) {
    const std::filesystem::path candidate = dir / relative;
    if (access(candidate.c_str(), R_OK) == 0) return std::filesystem::weakly_canonical(candidate, ignored).string();
  }
  return absl::NotFoundError(
      absl::StrCat(what, " not found beside ", self.string(), " (looked in ", looked_in, "); set ", variable));
}

}  // namespace collwatch
