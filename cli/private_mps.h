// `collwatch run --one-gpu --mps`: an MPS server private to the job (pipe and log folders
// of its own), so the ranks' kernels share the GPU at once instead of in the driver's time
// slices, where every collective costs milliseconds (cpu_nccl/README.md, "Sharing the GPU").
// Started before the command, asked to quit after it, killed if it does not.
// Threading: the supervising thread.
#ifndef COLLWATCH_CLI_PRIVATE_MPS_H_
#define COLLWATCH_CLI_PRIVATE_MPS_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace collwatch {

class PrivateMpsServer {
 public:
  // Starts `nvidia-cuda-mps-control -d` (found in PATH) on new folders under $TMPDIR, or
  // /tmp when that is long (MPS's socket paths must stay short). Errors are sentences for
  // the user.
  static absl::StatusOr<std::unique_ptr<PrivateMpsServer>> Start();

  PrivateMpsServer(const PrivateMpsServer&) = delete;
  PrivateMpsServer& operator=(const PrivateMpsServer&) = delete;
  ~PrivateMpsServer();

  // CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY, for the command.
  std::map<std::string, std::string> JobEnvironment() const;
  const std::string& folder() const { return folder_; }

  // Asks the server to quit, waits up to `grace_s` for its processes to end, then kills
  // what is left; removes the folders. Returns a sentence on what went wrong ("" if
  // nothing). Later calls do nothing.
  std::string Stop(double grace_s = 10);

 private:
  explicit PrivateMpsServer(std::string folder) : folder_(std::move(folder)) {}
  std::string PipeFolder() const { return folder_ + "/pipe"; }
  std::string LogFolder() const { return folder_ + "/log"; }
  // This server's processes: this user's processes named nvidia-cuda-mps* whose
  // environment holds this pipe folder (the control daemon), and such processes whose
  // parent is one of those (the server it started, which need not carry the variable).
  // The job's ranks, MPS clients with the same variable, are not among them.
  std::vector<pid_t> ServerProcesses() const;

  std::string folder_;
  bool stopped_ = false;
};

}  // namespace collwatch

#endif  // COLLWATCH_CLI_PRIVATE_MPS_H_
