// Starts the node agent from inside a training process when COLLWATCH_COLLECTOR is set:
// once per node and job (a lock file in the ring folder decides), detached (double fork,
// own session), so it never blocks or harms the job and outlives none of its checks.
// Threading: called once, from the first communicator init; all signals blocked around
// the fork, nothing but async-signal-safe calls between fork and exec.
#ifndef COLLWATCH_INTERPOSER_AGENT_SPAWN_H_
#define COLLWATCH_INTERPOSER_AGENT_SPAWN_H_

#include <cstdint>

#include "interposer/config.h"

namespace collwatch {

// Does nothing unless config.collector is set and no agent of this node and job holds
// the lock `<ring_dir>/agent.<job>.lock`. The agent inherits the locked descriptor as
// descriptor 3 (the lock lives as long as it does) and no other descriptor of the job;
// its pid is written into the file; its output goes to `<ring_dir>/agent.<job>.log`.
// config.token_file and config.tls_ca become its --token-file and --tls-ca.
// Never fails the caller.
void MaybeSpawnAgent(const Config& config) noexcept;

// Lets the node agent spawned for config.collector (its pid in the lock file) trace this
// process, so that it can take its stacks at a stall (stacks/) where Yama's ptrace_scope
// is 1, which lets only ancestors trace otherwise (the agent is nobody's descendant: it is
// double-forked). True once done, or when there is nothing to do (no spawned agent: under
// `collwatch run` the agent is the ranks' ancestor; no Yama, or a scope no process can
// open); false while the agent's pid is not written yet (try again later).
bool AllowAgentToTrace(const Config& config) noexcept;

// The pid the spawned agent's lock file holds (`<ring_dir>/agent.<job>.lock`, never
// through a link); 0 when there is none yet or it is not a pid above 1.
int32_t SpawnedAgentPid(const Config& config) noexcept;

}  // namespace collwatch

#endif  // COLLWATCH_INTERPOSER_AGENT_SPAWN_H_
