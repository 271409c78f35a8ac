// What a load has seen of its inputs' processes, so that no input is read as what it is
// not: a copied trace or ring (the same process: host, pid and start time) is read once,
// and two processes that claim one rank of one job (two jobs, or two attempts of one,
// under one job id) are never read as one job. Threading: single-threaded (one load).
#ifndef COLLWATCH_CLI_PROCESSES_SEEN_H_
#define COLLWATCH_CLI_PROCESSES_SEEN_H_

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "absl/status/status.h"

namespace collwatch {

// One input's process, as its trace or ring names it.
struct InputProcess {
  std::string input;  // the rank trace folder or ring file
  std::string job;
  std::string host;
  int32_t pid = 0;
  uint64_t start_ns = 0;  // CLOCK_REALTIME the process (its ring) started
  int32_t rank = -1;      // global rank; below 0: none known
};

class ProcessesSeen {
 public:
  // First sight of this process: "" (read it). A process seen before: the input that gave
  // it first (this one is a copy, not read).
  std::string CopyOf(const InputProcess& process);

  // Two processes of one rank of one job seen so far: INVALID_ARGUMENT naming both inputs
  // (checked once every input was looked at); OK otherwise.
  absl::Status RankClash() const;

  // The note for an input not read as a copy of `first`.
  static std::string CopyNote(const InputProcess& copy, const std::string& first);

 private:
  std::map<std::tuple<std::string, int32_t, uint64_t>, std::string> inputs_;  // (host, pid, start) -> input
  std::map<std::pair<std::string, int32_t>, InputProcess> ranks_;  // (job, rank) -> its first process
  std::string clash_;  // the first clash, in words ("" none)
};

}  // namespace collwatch

#endif  // COLLWATCH_CLI_PROCESSES_SEEN_H_
