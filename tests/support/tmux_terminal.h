// A real terminal for the dashboard's end-to-end tests: a tmux server of the test's own
// (its own socket), one window of a given size running a shell command; its screen read
// back as text, or with its colours and attributes as escape sequences. Header-only.
// Threading: single-threaded test code.
#ifndef COLLWATCH_TESTS_SUPPORT_TMUX_TERMINAL_H_
#define COLLWATCH_TESTS_SUPPORT_TMUX_TERMINAL_H_

#include <stdio.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include "tests/support/test_time.h"

namespace collwatch::testing {

// A shell command's standard output.
inline std::string CommandOutput(const std::string& command) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return output;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
  pclose(pipe);
  return output;
}

inline bool TmuxInstalled() { return std::system("command -v tmux >/dev/null 2>&1") == 0; }

class TmuxTerminal {
 public:
  // `name` tells apart two terminals of one test process.
  TmuxTerminal(const std::string& command, int columns, int rows, const std::string& name = "top")
      : socket_("collwatch-" + name + "-test-" + std::to_string(getpid())) {
    std::system((Tmux() + " new-session -d -s top -x " + std::to_string(columns) + " -y " + std::to_string(rows) +
                 " '" + command + "'")
                    .c_str());
  }
  ~TmuxTerminal() { std::system((Tmux() + " kill-server 2>/dev/null").c_str()); }
  TmuxTerminal(const TmuxTerminal&) = delete;
  TmuxTerminal& operator=(const TmuxTerminal&) = delete;

  std::string Screen() const { return CommandOutput(Tmux() + " capture-pane -p -t top 2>/dev/null"); }
  // The screen with its colours and attributes as SGR escape sequences.
  std::string ScreenWithAttributes() const { return CommandOutput(Tmux() + " capture-pane -e -p -t top 2>/dev/null"); }
  void Keys(const std::string& keys) const { std::system((Tmux() + " send-keys -t top " + keys).c_str()); }
  bool Alive() const { return std::system((Tmux() + " has-session -t top 2>/dev/null").c_str()) == 0; }

  // Polls the screen until `done` holds or `seconds` pass; returns the last screen.
  // `seconds`: the limit in the default build, scaled for this one (a safety net).
  std::string WaitFor(const std::function<bool(const std::string&)>& done, double seconds) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(Scaled(seconds));
    std::string screen = Screen();
    while (!done(screen) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      screen = Screen();
    }
    return screen;
  }

 private:
  std::string Tmux() const { return "tmux -L " + socket_ + " -f /dev/null"; }
  std::string socket_;
};

}  // namespace collwatch::testing

#endif  // COLLWATCH_TESTS_SUPPORT_TMUX_TERMINAL_H_
