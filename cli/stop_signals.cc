// Blocks SIGINT/SIGTERM and waits for them synchronously: no signal handler runs, so the
// commands react to a stop in their main loop, where it is safe to shut threads down.
// The terminal's stops are ignored outright. Threading: see stop_signals.h.
#include "cli/stop_signals.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

namespace collwatch {

sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

void BlockStopSignals() {
  const sigset_t set = StopSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int WaitForStopSignal(double seconds) {
  const sigset_t set = StopSignals();
  const auto whole_seconds = static_cast<time_t>(seconds);
  const timespec timeout{whole_seconds, static_cast<long>((seconds - static_cast<double>(whole_seconds)) * 1e9)};
  const int signal = sigtimedwait(&set, nullptr, &timeout);
  return signal > 0 ? signal : 0;
}

int ForwardStopSignal(pid_t process_group, double seconds) {
  const int signal = WaitForStopSignal(seconds);
  if (signal != 0) kill(-process_group, signal);
  return signal;
}

void IgnoreTerminalStops() {
  signal(SIGTTOU, SIG_IGN);
  signal(SIGTTIN, SIG_IGN);
}

bool InTerminalForeground(int fd) { return isatty(fd) != 0 && tcgetpgrp(fd) == getpgrp(); }

}  // namespace collwatch
