// What `collwatch run` is asked to do (its flags, parsed by main.cc); its exit statuses are
// in cli/exit_codes.h. Threading: plain data.
#ifndef COLLWATCH_CLI_RUN_OPTIONS_H_
#define COLLWATCH_CLI_RUN_OPTIONS_H_

#include <string>
#include <vector>

#include "cli/exit_codes.h"
#include "collector/collector_monitoring.h"

namespace collwatch {

struct RunOptions {
  std::vector<std::string> command;  // CMD and its arguments
  std::string out_dir = "collwatch-out";
  std::string collector;   // an external collector; empty: embedded one on loopback
  std::string ring_dir;    // keep rings here; empty: a private temporary folder, removed after
  std::string token;       // for an external collector
  std::string tls_ca_pem;  // root certificates of an external TLS collector
  std::string token_file;   // the files they were read from, for run.json (`collwatch top DIR`)
  std::string tls_ca_file;
  double stall_after_s = 0;   // floor of the stall threshold; 0: the analyzer's default
  bool kill_on_hang = false;  // stop the job at the first finding, exit kExitStoppedHungJob
  bool fail_on_findings = false;  // exit kExitRunNotHealthy when the command exited 0 but the run is not healthy
  bool one_gpu = false;       // every rank on one GPU through the CPU NCCL backend (one_gpu_mode.h)
  bool mps = false;           // with one_gpu: the ranks under a private MPS server (private_mps.h)
  bool profiler_plugin = false;  // libcollwatch.so is NCCL's profiler plugin too (NCCL_PROFILER_PLUGIN)
  double kill_grace_s = 5;    // SIGTERM, then SIGKILL after this long
  double drain_timeout_s = 30;
  double status_interval_s = 1;
  // On a terminal, show the dashboard (collwatch top) while the job runs; the job's
  // output then goes to DIR/job.log.
  bool dashboard = true;
  // The embedded collector's metrics, --on-finding and --event-log (docs/monitoring.md).
  MonitoringOptions monitoring;
};


}  // namespace collwatch

#endif  // COLLWATCH_CLI_RUN_OPTIONS_H_
