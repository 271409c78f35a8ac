// The stop signals are blocked before the service starts its threads, then the main
// thread waits for them (sigtimedwait), so gRPC threads never take them. Threading: see
// daemon_commands.h.
#include "cli/daemon_commands.h"

#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/exit_codes.h"
#include "cli/stop_signals.h"

namespace collwatch {

int RunCollectorCommand(const CollectorOptions& options) {
  BlockStopSignals();
  absl::StatusOr<std::unique_ptr<CollectorServer>> server = CollectorServer::Start(options);
  if (!server.ok()) {
    std::cerr << "collwatch collector: " << server.status().message() << "\n";
    return kExitBadInput;
  }
  std::cerr << "collwatch collector: listening on " << (*server)->address() << ", traces in " << options.out_dir
            << (options.fsync ? " (fdatasync before each ack)" : "") << "\n";
  while (WaitForStopSignal(3600) == 0) {
  }
  (*server)->Shutdown();
  if (!(*server)->StoreStillInPlace()) {
    std::cerr << "collwatch collector: " << options.out_dir
              << " was removed or moved while the collector ran: the records it took since are lost (the agents "
                 "were told they were stored)\n";
    return 1;
  }
  return 0;
}

int RunAgentCommand(const AgentOptions& options) {
  BlockStopSignals();
  absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Start(options);
  if (!agent.ok()) {
    std::cerr << "collwatch agent: " << agent.status().message() << "\n";
    return kExitBadInput;
  }
  const std::string ring_dir = options.ring_dir.empty() ? DefaultRingDir() : options.ring_dir;
  std::cerr << "collwatch agent: shipping rings of " << ring_dir << " to " << options.collector << "\n";
  std::error_code error;
  if (!std::filesystem::is_directory(ring_dir, error)) {
    std::cerr << "collwatch agent: " << ring_dir << " does not exist yet; waiting for the first ring there\n";
  }
  while (WaitForStopSignal(0.2) == 0) {
    if ((*agent)->IdleExpired()) {
      std::cerr << "collwatch agent: no live ring for " << options.idle_exit_s << " s; exiting\n";
      break;
    }
  }
  (*agent)->Stop();
  // Its job was to ship every ring: say what it did not, and fail (the records stay in the rings).
  const AgentStats stats = (*agent)->Stats();
  if (stats.rings == 0) std::cerr << "collwatch agent: no ring appeared in " << ring_dir << "\n";
  if (stats.drained < stats.rings) {
    std::cerr << "collwatch agent: " << stats.rings - stats.drained << " of " << stats.rings
              << " rings were not shipped whole (" << stats.failed
              << " refused by the collector, the rest unfinished or the collector unreachable); their records stay in "
              << ring_dir << "\n";
    return 1;
  }
  return 0;
}

}  // namespace collwatch
