// SIGINT and SIGTERM for the long-running commands: blocked in the main thread before any
// other thread starts, so every thread inherits the block and gRPC's never take them; the
// main thread then takes them with sigtimedwait. And the terminal's job-control stops,
// which `collwatch run` ignores. Threading: call from the main thread.
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

// Ignores SIGTTOU (writing to the terminal from the background under `stty tostop`, or
// changing its modes from the background) and SIGTTIN (reading it from the background)
// in the whole process: the write or mode change then goes through and a read fails
// (EIO). A supervisor stopped by its terminal leaves its job unwatched, and no shell
// knows the job's own process group to resume it.
void IgnoreTerminalStops();

// Whether `fd` is a terminal whose foreground process group is this process's.
bool InTerminalForeground(int fd);

}  // namespace collwatch

#endif  // COLLWATCH_CLI_STOP_SIGNALS_H_
