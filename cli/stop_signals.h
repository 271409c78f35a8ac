// SIGINT and SIGTERM for the long-running commands: blocked in the main thread before any
// other thread starts, so every thread inherits the block and gRPC's never take them; the
// main thread then takes them with sigtimedwait. Threading: call from the main thread.
#ifndef COLLWATCH_CLI_STOP_SIGNALS_H_
#define COLLWATCH_CLI_STOP_SIGNALS_H_

#include <signal.h>
#include <sys/types.h>

namespace collwatch {

// SIGINT and SIGTERM.
sigset_t StopSignals();

// Blocks them in this thread and in every thread it starts afterwards.
void BlockStopSignals();

// Waits up to `seconds` for one of them; returns it, or 0 when none came.
int WaitForStopSignal(double seconds);

// Waits up to `seconds` for one of them and sends it on to every process of
// `process_group` (Ctrl-C or a scheduler's SIGTERM is for the job, which collwatch then
// waits out). Returns the signal forwarded, or 0 when none came.
int ForwardStopSignal(pid_t process_group, double seconds);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_STOP_SIGNALS_H_
