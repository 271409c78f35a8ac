// Before `collwatch run --kill-on-hang` stops a PyTorch job: asks each rank's Flight
// Recorder for a dump through its debug-info pipe (named in the rank's environment), waits
// a bounded time for the files to be written, and says where they are.
// Threading: the supervising thread; blocks only for the wait it is given, never on a pipe.
#ifndef COLLWATCH_CLI_FLIGHT_RECORDER_DUMP_H_
#define COLLWATCH_CLI_FLIGHT_RECORDER_DUMP_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/job_processes.h"

namespace collwatch {

// How long --kill-on-hang waits for the dumps it asked for before it stops the job. A
// rank's Flight Recorder polls its pipe about once a second (PyTorch's heartbeat monitor)
// and writes a few MB at most: 5 s covers both, and holds a hung job only that long.
inline constexpr double kFlightRecorderDumpWaitS = 5;

// One rank's dump, asked for through its pipe.
struct FlightRecorderDump {
  int32_t rank = -1;  // global: the number in the pipe's and the dump's names
  pid_t pid = 0;
  std::string pipe;                // <pipe prefix><rank>.pipe
  std::vector<std::string> files;  // where PyTorch writes it: <dump prefix><rank> (unset: both defaults)
  std::string not_asked;           // why no byte went into the pipe; "" once one did
  std::string file;                // the dump written since the ask ("" while none)
  bool still_growing = false;      // `file` was still being written when the wait ended

  bool asked() const { return not_asked.empty(); }
  bool written() const { return !file.empty(); }
};

// The dump a rank process would be asked for, from its environment block
// (ProcessEnvironment): nullopt when it names no pipe (TORCH_FR_DEBUG_INFO_PIPE_FILE, else
// TORCH_NCCL_DEBUG_INFO_PIPE_FILE, unset or empty).
std::optional<FlightRecorderDump> FlightRecorderDumpOf(pid_t pid, int32_t rank, const std::string& environment);

// Writes one byte into the FIFO at `path`, which PyTorch reads as "dump now": never blocks,
// never opens what is not a FIFO of this user (a symbolic link, a file, a device).
// Returns "" when the byte went in (or the pipe was full: a dump is asked already), else
// why not, in words ("nobody reads it" when no process has it open).
std::string PokeDumpPipe(const std::string& path);

// The dumps of the rank processes still there whose environment names a pipe, by rank.
std::vector<FlightRecorderDump> FlightRecorderDumpsOf(const std::map<pid_t, RankProcess>& ranks);

// Pokes each dump's pipe, then waits up to `wait_s`, returning as soon as each asked rank's
// dump file is there, new or changed since the ask, and no longer growing; sets each
// dump's `not_asked`, `file` and `still_growing`.
void AskFlightRecorderDumps(double wait_s, std::vector<FlightRecorderDump>* dumps);

// One line of words for a dump: stderr and the report's notes say it.
std::string FlightRecorderDumpText(const FlightRecorderDump& dump);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_FLIGHT_RECORDER_DUMP_H_
