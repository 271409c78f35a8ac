// The terminal side of the dashboard: ncurses draws the model's lines (styles become
// colours, or bold/reverse/dim in plain mode) and turns keys into dashboard::Key.
// ncurses repaints only what changed, so a refresh does not flicker.
// Threading: one thread (the terminal's).
#ifndef COLLWATCH_DASHBOARD_TERMINAL_UI_H_
#define COLLWATCH_DASHBOARD_TERMINAL_UI_H_

#include <memory>
#include <string>
#include <vector>

#include "collector/cluster_watcher.h"
#include "dashboard/dashboard_model.h"

namespace collwatch::dashboard {

class TerminalScreen {
 public:
  // Takes over the terminal; nullptr (and *error) when standard input or output is not
  // one, or this process is not in its foreground group.
  // `plain`: no colours even where the terminal has them (nor with NO_COLOR set).
  static std::unique_ptr<TerminalScreen> Open(bool plain, std::string* error);
  ~TerminalScreen();  // gives the terminal back as it was
  TerminalScreen(const TerminalScreen&) = delete;
  TerminalScreen& operator=(const TerminalScreen&) = delete;

  void Draw(const std::vector<Line>& lines);
  // The next key within `wait_s` seconds, as a dashboard::Key or character; -1: none.
  int ReadKey(double wait_s);
  int width() const;
  int height() const;
  bool colour() const { return colour_; }

 private:
  TerminalScreen() = default;
  bool colour_ = false;
};

// What a dashboard shows: the watcher's view, in the model's terms.
ConnectionState ConnectionOf(const ClusterView& view, const std::string& address);

}  // namespace collwatch::dashboard

#endif  // COLLWATCH_DASHBOARD_TERMINAL_UI_H_
