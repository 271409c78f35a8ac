// The stop signals are blocked before the service starts its threads, then the main
// thread waits for them (sigtimedwait), so gRPC threads never take them. Threading: see
// daemon_commands.h.
#include "cli/daemon_commands.h"

#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/exit_codes.h"
#include "cli/stop_signals.h"
#include "process/log_line.h"

namespace collwatch {

int RunCollectorCommand(const CollectorOptions& options) {
  BlockStopSignals();
  absl::StatusOr<std::unique_ptr<CollectorServer>> server = CollectorServer::Start(options);
  if (!server.ok()) {
    LogLine(LogLevel::kError, "collwatch collector") << server.status().message();
    return kExitBadInput;
  }
  LogLine(LogLevel::kError, "collwatch collector") << "listening on " << (*server)->address() << ", traces in " << options.out_dir
            << (options.fsync ? " (fdatasync before each ack)" : "")
            << ((*server)->metrics_url().empty() ? "" : ", metrics at ") << (*server)->metrics_url();
  while (WaitForStopSignal(3600) == 0) {
  }
  (*server)->Shutdown();
  if (!(*server)->StoreStillInPlace()) {
    LogLine(LogLevel::kError, "collwatch collector") << options.out_dir
              << " was removed or moved while the collector ran: the records it took since are lost (the agents "
                 "were told they were stored)";
    return 1;
  }
  return 0;
}

int RunAgentCommand(const AgentOptions& options) {
  BlockStopSignals();
  absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Start(options);
  if (!agent.ok()) {
    LogLine(LogLevel::kError, "collwatch agent") << agent.status().message();
    return kExitBadInput;
  }
  const std::string ring_dir = options.ring_dir.empty() ? DefaultRingDir() : options.ring_dir;
  LogLine(LogLevel::kInfo, "collwatch agent") << "shipping rings of " << ring_dir << " to " << options.collector;
  std::error_code error;
  if (!std::filesystem::is_directory(ring_dir, error)) {
    LogLine(LogLevel::kInfo, "collwatch agent") << ring_dir << " does not exist yet; waiting for the first ring there";
  }
  while (WaitForStopSignal(0.2) == 0) {
    if ((*agent)->IdleExpired()) {
      LogLine(LogLevel::kInfo, "collwatch agent") << "no live ring for " << options.idle_exit_s << " s; exiting";
      break;
    }
  }
  (*agent)->Stop();
  // Its job was to ship every ring: say what it did not, and fail (the records stay in the rings).
  const AgentStats stats = (*agent)->Stats();
  if (stats.rings == 0) LogLine(LogLevel::kError, "collwatch agent") << "no ring appeared in " << ring_dir;
  if (stats.drained < stats.rings) {
    LogLine(LogLevel::kError, "collwatch agent") << stats.rings - stats.drained << " of " << stats.rings
              << " rings were not shipped whole (" << stats.failed
              << " refused by the collector, the rest unfinished or the collector unreachable); their records stay in "
              << ring_dir;
    return 1;
  }
  return 0;
}

}  // namespace collwatch
