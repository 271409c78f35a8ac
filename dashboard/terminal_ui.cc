// ncurses drawing and keys. Threading: see terminal_ui.h.
#include "dashboard/terminal_ui.h"

#include <curses.h>
#include <unistd.h>

#include <clocale>

#include "files/safe_text.h"

namespace collwatch::dashboard {
namespace {

// Colour pair numbers, one per coloured style.
enum Pair : short { kPairHealthy = 1, kPairSlow, kPairStuck, kPairDiverged, kPairTitle, kPairWarning };

attr_t Attributes(Style style, bool colour) {
  if (!colour) {
    switch (style) {
      case Style::kTitle: return A_BOLD;
      case Style::kDim: case Style::kIdle: return A_DIM;
      case Style::kStuck: case Style::kDiverged: case Style::kWarning: return A_BOLD;
      case Style::kSelected: return A_REVERSE;
      case Style::kMinority: return A_BOLD | A_REVERSE;
      default: return A_NORMAL;
    }
  }
  switch (style) {
    case Style::kTitle: return COLOR_PAIR(kPairTitle) | A_BOLD;
    case Style::kDim: case Style::kIdle: return A_DIM;
    case Style::kHealthy: return COLOR_PAIR(kPairHealthy);
    case Style::kSlow: return COLOR_PAIR(kPairSlow);
    case Style::kStuck: return COLOR_PAIR(kPairStuck) | A_BOLD;
    case Style::kDiverged: return COLOR_PAIR(kPairDiverged) | A_BOLD;
    case Style::kSelected: return A_REVERSE;
    case Style::kWarning: return COLOR_PAIR(kPairWarning) | A_BOLD;
    case Style::kMinority: return COLOR_PAIR(kPairDiverged) | A_BOLD | A_REVERSE;
    default: return A_NORMAL;
  }
}

}  // namespace

std::unique_ptr<TerminalScreen> TerminalScreen::Open(bool plain, std::string* error) {
  if (isatty(STDOUT_FILENO) == 0 || isatty(STDIN_FILENO) == 0) {
    *error = "standard input and output must be a terminal";
    return nullptr;
  }
  // From the background the terminal would stop us at the first mode change (SIGTTOU).
  if (tcgetpgrp(STDIN_FILENO) != getpgrp()) {
    *error = "not in the terminal's foreground (started with &, or under timeout without --foreground?): "
             "the dashboard needs the terminal; run it in the foreground";
    return nullptr;
  }
  std::setlocale(LC_ALL, "");
  if (newterm(nullptr, stdout, stdin) == nullptr) {
    *error = "cannot drive this terminal (is TERM set?)";
    return nullptr;
  }
  std::unique_ptr<TerminalScreen> screen(new TerminalScreen());
  cbreak();
  noecho();
  keypad(stdscr, TRUE);
  curs_set(0);
  set_escdelay(25);
  if (ColourWanted(plain) && has_colors()) {
    start_color();
    use_default_colors();
    init_pair(kPairHealthy, COLOR_GREEN, -1);
    init_pair(kPairSlow, COLOR_YELLOW, -1);
    init_pair(kPairStuck, COLOR_RED, -1);
    init_pair(kPairDiverged, COLOR_MAGENTA, -1);
    init_pair(kPairTitle, COLOR_CYAN, -1);
    init_pair(kPairWarning, COLOR_YELLOW, -1);
    screen->colour_ = true;
  }
  return screen;
}

TerminalScreen::~TerminalScreen() { endwin(); }

int TerminalScreen::width() const { return COLS; }
int TerminalScreen::height() const { return LINES; }

void TerminalScreen::Draw(const std::vector<Line>& lines) {
  erase();
  for (size_t row = 0; row < lines.size() && static_cast<int>(row) < LINES; ++row) {
    move(static_cast<int>(row), 0);
    for (const Span& span : lines[row]) {
      attrset(Attributes(span.style, colour_));
      // Names from rings (regions, hosts, jobs) may hold control bytes: a span is drawn escaped.
      addstr(TerminalText(span.text).c_str());  // past the right edge ncurses stops; the model clips anyway
    }
  }
  attrset(A_NORMAL);
  refresh();
}

int TerminalScreen::ReadKey(double wait_s) {
  timeout(static_cast<int>(wait_s * 1000));
  const int key = getch();
  switch (key) {
    case ERR: return -1;
    case KEY_UP: return kKeyUp;
    case KEY_DOWN: return kKeyDown;
    case KEY_LEFT: return kKeyLeft;
    case KEY_RIGHT: return kKeyRight;
    case KEY_ENTER: case '\n': case '\r': return kKeyEnter;
    case 27: return kKeyEscape;
    case KEY_BACKSPACE: case 127: case 8: return kKeyBackspace;
    case '\t': return kKeyTab;
    case KEY_PPAGE: return kKeyPageUp;
    case KEY_NPAGE: return kKeyPageDown;
    case KEY_RESIZE: return -1;  // the next Draw uses the new size
    default: return key;
  }
}

ConnectionState ConnectionOf(const ClusterView& view, const std::string& address) {
  ConnectionState connection;
  connection.address = address;
  connection.connected = view.connected;
  connection.ever_connected = view.ever_connected;
  connection.connections = view.connections;
  connection.failed_attempts = view.failed_attempts;
  connection.last_error = view.last_error;
  return connection;
}

}  // namespace collwatch::dashboard
