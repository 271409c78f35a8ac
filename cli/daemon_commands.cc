// The stop signals are blocked before the service starts its threads, then the main
// thread waits for them (sigtimedwait), so gRPC threads never take them. Threading: see
// daemon_commands.h.
#include "cli/daemon_commands.h"

#include <iostream>
#include <memory>

#include "cli/stop_signals.h"

namespace collwatch {

int RunCollectorCommand(const CollectorOptions& options) {
  BlockStopSignals();
  absl::StatusOr<std::unique_ptr<CollectorServer>> server = CollectorServer::Start(options);
  if (!server.ok()) {
    std::cerr << "collwatch collector: " << server.status().message() << "\n";
    return 1;
  }
  std::cerr << "collwatch collector: listening on " << (*server)->address() << ", traces in " << options.out_dir
            << (options.fsync ? " (fdatasync before each ack)" : "") << "\n";
  while (WaitForStopSignal(3600) == 0) {
  }
  (*server)->Shutdown();
  return 0;
}

int RunAgentCommand(const AgentOptions& options) {
  BlockStopSignals();
  absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Start(options);
  if (!agent.ok()) {
    std::cerr << "collwatch agent: " << agent.status().message() << "\n";
    return 1;
  }
  std::cerr << "collwatch agent: shipping rings of "
            << (options.ring_dir.empty() ? DefaultRingDir() : options.ring_dir) << " to " << options.collector << "\n";
  while (WaitForStopSignal(0.2) == 0) {
    if ((*agent)->IdleExpired()) {
      std::cerr << "collwatch agent: no live ring for " << options.idle_exit_s << " s; exiting\n";
      break;
    }
  }
  (*agent)->Stop();
  return 0;
}

}  // namespace collwatch
