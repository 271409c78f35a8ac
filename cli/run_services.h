// The services `collwatch run` starts beside its command: unless --collector names one, an
// embedded collector on loopback whose fresh secret waits in OUT/.collwatch-token (for
// `collwatch top`), and always the agent that ships the command's rings. Threading: started
// and stopped by the supervising thread; they run gRPC threads of their own, so start them
// after BlockStopSignals (stop_signals.h).
#ifndef COLLWATCH_CLI_RUN_SERVICES_H_
#define COLLWATCH_CLI_RUN_SERVICES_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "agent/agent.h"
#include "cli/run_options.h"
#include "collector/collector_service.h"

namespace collwatch {

class RunServices {
 public:
  // Starts them for the job `job` whose rings are in `ring_dir`. The error is a sentence
  // for the user after "collwatch run: ".
  static absl::StatusOr<std::unique_ptr<RunServices>> Start(const RunOptions& options, const std::string& job,
                                                            const std::string& ring_dir);
  ~RunServices();  // removes the token file; the agent and collector stop at once
  RunServices(const RunServices&) = delete;
  RunServices& operator=(const RunServices&) = delete;

  // The embedded collector; nullptr when the run streams to an external one.
  CollectorServer* embedded() { return server_.get(); }
  // The collector's address and secret, as the agent uses them.
  const std::string& address() const { return address_; }
  const std::string& token() const { return token_; }
  // Where the embedded collector's secret is ("" with an external collector).
  const std::string& token_file() const { return token_file_; }
  Agent& agent() { return *agent_; }

 private:
  RunServices() = default;
  // Declared first, so destroyed last.
  std::unique_ptr<CollectorServer> server_;
  std::unique_ptr<Agent> agent_;
  std::string address_;
  std::string token_;
  std::string token_file_;
};

}  // namespace collwatch

#endif  // COLLWATCH_CLI_RUN_SERVICES_H_
