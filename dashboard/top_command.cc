// The stop signals are blocked and taken with sigtimedwait, so the loop ends and the
// terminal is restored on Ctrl-C. Threading: see top_command.h.
#include "dashboard/top_command.h"

#include <signal.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dashboard/dashboard_model.h"
#include "dashboard/terminal_ui.h"
#include "dashboard/top_snapshot.h"
#include "files/safe_text.h"
#include "ring/clocks.h"

namespace collwatch::dashboard {
namespace {

using Clock = std::chrono::steady_clock;

bool StopRequested() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  timespec none{0, 0};
  return sigtimedwait(&set, nullptr, &none) > 0;
}

// Words for a stream the collector ended in a way no retry changes; nullopt otherwise.
std::optional<std::string> Refusal(const ClusterView& view, const TopOptions& options) {
  const std::string& address = options.watch.address;
  switch (view.last_code) {
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      // The collector's own words name the agent's flag: top says its own.
      return absl::StrCat("the collector at ", address, " refused this dashboard: ",
                          options.token_source.empty() ? "no token was given"
                                                       : absl::StrCat("the token of ", options.token_source,
                                                                      " is not the collector's"),
                          ". Give top the collector's token: `collwatch top DIR` reads it from the folder of a "
                          "running `collwatch run --out DIR`, or `--token-file FILE` names the file the collector "
                          "was started with");
    case grpc::StatusCode::NOT_FOUND:
      return absl::StrCat("the collector at ", address, ": ", view.last_error, " (--job names the job to watch)");
    default:
      return std::nullopt;
  }
}

std::string Unreachable(const ClusterView& view, const TopOptions& options) {
  return absl::StrFormat(
      "no state from the collector at %s within %.0f s (%d attempt%s%s): is it running, and is this its address? "
      "`collwatch run` prints its collector's address, and `collwatch top DIR` finds it in the run's folder",
      options.watch.address, options.connect_timeout_s, view.failed_attempts, view.failed_attempts == 1 ? "" : "s",
      view.last_error.empty() ? "" : absl::StrCat("; the last: ", view.last_error));
}

Clock::time_point Deadline(const TopOptions& options) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.connect_timeout_s));
}

// --once: the size asked for, else the terminal's, else 80x24.
std::pair<int, int> FrameSize(const TopOptions& options) {
  if (options.columns > 0 && options.rows > 0) return {options.columns, options.rows};
  winsize size{};
  if (isatty(STDOUT_FILENO) != 0 && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0 && size.ws_row > 0) {
    return {size.ws_col, size.ws_row};
  }
  return {80, 24};
}

TopResult RunOnce(const TopOptions& options, std::ostream& out) {
  ClusterWatcher watcher(options.watch);
  const Clock::time_point deadline = Deadline(options);
  ClusterView view = watcher.View();
  while (view.connections == 0) {
    if (std::optional<std::string> refused = Refusal(view, options)) return {TopEnd::kRefused, *refused};
    if (Clock::now() >= deadline) return {TopEnd::kUnreachable, Unreachable(view, options)};
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    view = watcher.View();
  }
  const ConnectionState connection = ConnectionOf(view, options.watch.address);
  const auto now_ns = static_cast<int64_t>(RealtimeNs());
  if (options.json) {
    out << SafeJsonText(TopSnapshotJson(view.state, connection, now_ns), 2) << "\n";
    return {};
  }
  DashboardModel model(DashboardModel::Options{.ascii = options.plain, .keys = false});
  model.Update(view.state, connection, now_ns);
  const auto [columns, rows] = FrameSize(options);
  for (const Line& line : model.Render(columns, rows)) {
    std::string text = TerminalText(LineText(line));
    text.erase(text.find_last_not_of(' ') + 1);
    out << text << "\n";
  }
  return {};
}

TopResult RunOnScreen(const TopOptions& options) {
  std::string error;
  std::unique_ptr<TerminalScreen> screen = TerminalScreen::Open(options.plain, &error);
  if (screen == nullptr) {
    return {TopEnd::kNoTerminal, absl::StrCat(error, " (`collwatch top --once` prints one frame without one, "
                                                     "`--once --json` one JSON snapshot)")};
  }
  ClusterWatcher watcher(options.watch);
  DashboardModel model(DashboardModel::Options{.ascii = options.plain});
  const Clock::time_point deadline = Deadline(options);
  while (!StopRequested()) {
    const ClusterView view = watcher.View();
    if (std::optional<std::string> refused = Refusal(view, options)) return {TopEnd::kRefused, *refused};
    if (!view.ever_connected && Clock::now() >= deadline) return {TopEnd::kUnreachable, Unreachable(view, options)};
    model.Update(view.state, ConnectionOf(view, options.watch.address), static_cast<int64_t>(RealtimeNs()));
    screen->Draw(model.Render(screen->width(), screen->height()));
    const int key = screen->ReadKey(options.refresh_s);
    if (key >= 0 && !model.HandleKey(key)) break;
    if (model.TakeStacksRequest()) model.SetStacksStatus(watcher.RequestStacks());
  }
  return {};
}

}  // namespace

TopResult RunTop(const TopOptions& options, std::ostream& out) {
  if (options.once) return RunOnce(options, out);
  // Ctrl-C and SIGTERM end the loop (read with sigtimedwait), so the terminal is restored.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  return RunOnScreen(options);
}

}  // namespace collwatch::dashboard
