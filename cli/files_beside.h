// The files collwatch hands to the jobs it runs (the preload, the CPU NCCL backend): named
// by an environment variable, else found beside this binary. Threading: any thread.
#ifndef COLLWATCH_CLI_FILES_BESIDE_H_
#define COLLWATCH_CLI_FILES_BESIDE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ring/settings.h"

namespace collwatch {

// `variable`'s value when set (an error when it cannot be read), else the first readable
// of `relative_paths` (relative to this binary's folder, e.g. "../interposer/libcollwatch.so"),
// canonical. The error names `what`, where it looked (`looked_in`) and the variable.
absl::StatusOr<std::string> FindFileBesideThisBinary(Setting variable,
                                                     const std::vector<std::string>& relative_paths,
                                                     const std::string& what, const std::string& looked_in);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_FILES_BESIDE_H_
