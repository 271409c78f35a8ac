// `collwatch run` on a terminal: the full-screen dashboard (the one `collwatch top` shows)
// while the job runs. The job's output then goes to a log file, collwatch's own messages
// (the agent's, say) to a file aside, replayed on stderr when the screen closes; after the
// run, the end of the job's log is printed. Threading: the supervising thread only (it
// owns the terminal).
#ifndef COLLWATCH_CLI_RUN_DASHBOARD_H_
#define COLLWATCH_CLI_RUN_DASHBOARD_H_

#include <cstddef>
#include <memory>
#include <ostream>
#include <string>

#include "collector/cluster_watcher.h"
#include "dashboard/dashboard_model.h"
#include "dashboard/terminal_ui.h"

namespace collwatch {

// Opens (truncates) `path` for the command's stdout and stderr; -1 with errno on failure.
// Close-on-exec: only the command's dup2'd copies reach its exec.
int OpenJobLog(const std::string& path);

// Writes to `err` where the job's output is, then its last `lines` lines, indented.
void PrintJobLogTail(const std::string& path, size_t lines, std::ostream& err);

// While it lives, this process's stderr (file descriptor 2) goes to `path`; when it ends,
// stderr is restored and the file's contents are written to it, then the file removed.
// Nothing happens when `path` cannot be created.
class StderrAside {
 public:
  explicit StderrAside(std::string path);
  ~StderrAside();
  StderrAside(const StderrAside&) = delete;
  StderrAside& operator=(const StderrAside&) = delete;

 private:
  std::string path_;
  int saved_ = -1;  // the real stderr while it is aside
};

class RunDashboard {
 public:
  // Takes over the terminal and sets stderr aside in `messages_path`; nullptr (and
  // *error) when standard output is not a terminal the screen can use.
  static std::unique_ptr<RunDashboard> Open(const std::string& messages_path, std::string* error);

  // Draws the collector's view of the job, then waits up to `wait_s` for a key. Returns
  // false when the key closed the dashboard (the caller then drops it).
  bool Refresh(ClusterWatcher& watcher, const std::string& address, double wait_s);

 private:
  RunDashboard() = default;
  // Declared first, so destroyed last: messages come back once the screen is gone.
  std::unique_ptr<StderrAside> stderr_aside_;
  std::unique_ptr<dashboard::TerminalScreen> screen_;
  dashboard::DashboardModel model_;
};

}  // namespace collwatch

#endif  // COLLWATCH_CLI_RUN_DASHBOARD_H_
