// The processes of `collwatch run`'s command, seen from outside: walks /proc for the
// command's descendants, finds those that are ranks (RANK in their environment) and
// samples them, so that a rank that has made no NCCL call yet (no ring, nothing for the
// agent to read) still reaches the analysis. Threading: single-threaded (the run loop).
#ifndef COLLWATCH_CLI_JOB_PROCESSES_H_
#define COLLWATCH_CLI_JOB_PROCESSES_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/job_model.h"
#include "process/process_sample.h"

namespace collwatch {

// The environment `pid` started with: /proc/PID/environ, NUL-separated `NAME=value`
// entries ("" when it cannot be read: another user's process, one gone).
std::string ProcessEnvironment(pid_t pid);

// NAME's value in such a block (possibly empty), or nullptr when it is not there; the
// pointer lives as long as `block`.
const char* EnvironmentValue(const std::string& block, const char* name);

// One rank process of the job and a look at it.
struct RankProcess {
  ProcessInfo info;  // this host, its pid, RANK and WORLD_SIZE
  ProcessSample sample;
};

class JobProcessTree {
 public:
  explicit JobProcessTree(pid_t root);

  // Lists the root's descendants (the root included) from the parent pids in
  // /proc/*/stat and samples each rank process among them: the topmost process of each
  // RANK, since workers forked by a rank inherit its environment. A rank process gone
  // since the previous walk is reported once more, as gone. Reads a process's
  // environment once (/proc/PID/environ: readable for our own processes).
  std::vector<RankProcess> Walk(int64_t now_realtime_ns);

 private:
  // RANK and WORLD_SIZE from the environment a process started with.
  struct RankEnvironment {
    int32_t rank = -1;
    int32_t world_size = -1;
    int reads = 0;  // a process read before its exec shows its parent's environment
  };
  const RankEnvironment& EnvironmentOf(pid_t pid);

  pid_t root_;
  std::string host_;
  std::map<pid_t, RankEnvironment> environments_;  // of the descendants seen
  std::map<pid_t, RankProcess> ranks_;            // rank processes and their latest look
};

}  // namespace collwatch

#endif  // COLLWATCH_CLI_JOB_PROCESSES_H_
