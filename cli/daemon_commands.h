// `collwatch collector` and `collwatch agent`: the long-running services as commands,
// functions main.cc calls after parsing flags; each runs until SIGINT or SIGTERM and
// returns the process exit code. (`collwatch run` is run_command.h.) Threading: called
// from main before any other thread starts; the services start their own threads.
#ifndef COLLWATCH_CLI_DAEMON_COMMANDS_H_
#define COLLWATCH_CLI_DAEMON_COMMANDS_H_

#include "agent/agent.h"
#include "collector/collector_service.h"

namespace collwatch {

// Runs the collector until SIGINT or SIGTERM.
int RunCollectorCommand(const CollectorOptions& options);

// Runs the agent until SIGINT or SIGTERM (or its idle timeout).
int RunAgentCommand(const AgentOptions& options);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_DAEMON_COMMANDS_H_
