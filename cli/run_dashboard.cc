// Redirection is done on file descriptors (dup/dup2), not on std::cerr's buffer, so that
// messages written by any library through fd 2 are set aside too. Threading: see
// run_dashboard.h.
#include "cli/run_dashboard.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <vector>

#include "ring/clocks.h"

namespace collwatch {

int OpenJobLog(const std::string& path) { return open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644); }

void PrintJobLogTail(const std::string& path, size_t lines, std::ostream& err) {
  std::ifstream file(path);
  std::vector<std::string> tail;
  for (std::string line; std::getline(file, line);) {
    tail.push_back(line);
    if (tail.size() > lines) tail.erase(tail.begin());
  }
  err << "collwatch run: the job's output is in " << path << (tail.empty() ? " (empty)" : "; its end:") << "\n";
  for (const std::string& line : tail) err << "  " << line << "\n";
}

StderrAside::StderrAside(std::string path) : path_(std::move(path)) {
  const int file = open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (file < 0) return;
  std::cerr.flush();
  saved_ = dup(STDERR_FILENO);
  dup2(file, STDERR_FILENO);
  close(file);
}

StderrAside::~StderrAside() {
  if (saved_ < 0) return;
  std::cerr.flush();
  dup2(saved_, STDERR_FILENO);
  close(saved_);
  std::ifstream file(path_);
  std::cerr << file.rdbuf();
  std::cerr.clear();  // an empty file sets failbit
  unlink(path_.c_str());
}

std::unique_ptr<RunDashboard> RunDashboard::Open(const std::string& messages_path, std::string* error) {
  std::unique_ptr<dashboard::TerminalScreen> screen = dashboard::TerminalScreen::Open(/*plain=*/false, error);
  if (screen == nullptr) return nullptr;
  std::unique_ptr<RunDashboard> opened(new RunDashboard());
  opened->screen_ = std::move(screen);
  opened->stderr_aside_ = std::make_unique<StderrAside>(messages_path);
  return opened;
}

bool RunDashboard::Refresh(ClusterWatcher& watcher, const std::string& address, double wait_s) {
  const ClusterView view = watcher.View();
  model_.Update(view.state, dashboard::ConnectionOf(view, address), static_cast<int64_t>(RealtimeNs()));
  screen_->Draw(model_.Render(screen_->width(), screen_->height()));
  const int key = screen_->ReadKey(wait_s);
  return key < 0 || model_.HandleKey(key);
}

}  // namespace collwatch
