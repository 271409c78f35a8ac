// `collwatch collector`, `collwatch agent` and `collwatch run`: the long-running
// commands, as functions main.cc calls after parsing flags. Each returns the process
// exit code. Threading: called from main; they start their own threads.
#ifndef COLLWATCH_CLI_DAEMON_COMMANDS_H_
#define COLLWATCH_CLI_DAEMON_COMMANDS_H_

#include <string>
#include <vector>

#include "agent/agent.h"
#include "collector/collector_service.h"

namespace collwatch {

// Runs the collector until SIGINT or SIGTERM.
int RunCollectorCommand(const CollectorOptions& options);

// Runs the agent until SIGINT or SIGTERM (or its idle timeout).
int RunAgentCommand(const AgentOptions& options);

struct RunOptions {
  std::vector<std::string> command;  // CMD and its arguments
  std::string out_dir = "collwatch-out";
  std::string collector;   // an external collector; empty: embedded one on loopback
  std::string ring_dir;    // keep rings here; empty: a private temporary folder, removed after
  std::string token;       // for an external collector
  std::string tls_ca_pem;  // root certificates of an external TLS collector
  double stall_after_s = 0;   // floor of the stall threshold; 0: the analyzer's default
  bool kill_on_hang = false;  // stop the job at the first finding, exit kExitStoppedHungJob
  bool one_gpu = false;       // every rank on one GPU through the CPU NCCL backend (one_gpu_mode.h)
  double kill_grace_s = 5;    // SIGTERM, then SIGKILL after this long
  double drain_timeout_s = 30;
  double status_interval_s = 1;
  // On a terminal, show the dashboard (collwatch top) while the job runs; the job's
  // output then goes to DIR/job.log.
  bool dashboard = true;
};

// `collwatch run`'s exit status when it stopped a hung job (--kill-on-hang).
inline constexpr int kExitStoppedHungJob = 3;

// Runs CMD under collwatch and returns CMD's exit status (128 + signal if killed).
int RunJobCommand(const RunOptions& options);

// Reads a secret file (trailing newline removed); an error message in `error` if unusable.
bool ReadSecretFile(const std::string& path, std::string* contents, std::string* error);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_DAEMON_COMMANDS_H_
