// `collwatch top` apart from its flags: the full-screen loop, or one frame printed (text,
// or JSON for scripts) without a terminal. Both end at once when the collector refuses
// them (no token, a wrong one, another job), and when no state came within a bounded
// wait; a collector lost after a first state is waited for again, as it restarts.
// Threading: the calling thread draws; the watcher reads the stream on a thread of its own.
#ifndef COLLWATCH_DASHBOARD_TOP_COMMAND_H_
#define COLLWATCH_DASHBOARD_TOP_COMMAND_H_

#include <ostream>
#include <string>

#include "collector/cluster_watcher.h"

namespace collwatch::dashboard {

struct TopOptions {
  ClusterWatcherOptions watch;
  // Where the token came from, for the words when the collector refuses it ("--token-file
  // F", "the run folder D"); empty: no token was given.
  std::string token_source;
  bool plain = false;              // no colours, ASCII glyphs
  double refresh_s = 0.25;         // redraw period
  double connect_timeout_s = 10;   // the wait for a first state before giving up
  bool once = false;               // print one frame to `out` and end; no terminal needed
  bool json = false;               // with once: the frame as JSON (top_snapshot.h)
  int columns = 0;                 // with once: the frame's size; 0: the terminal's, else 80x24
  int rows = 0;
};

enum class TopEnd {
  kDone,         // quit (q, SIGINT, SIGTERM), or the frame printed
  kNoTerminal,   // the screen could not be opened
  kRefused,      // the collector refused the token or the job: retrying would not help
  kUnreachable,  // no state within connect_timeout_s
};

struct TopResult {
  TopEnd end = TopEnd::kDone;
  std::string message;  // why it ended early: a sentence after "collwatch top: "
};

// Runs until q, SIGINT or SIGTERM (or prints one frame with `once`). The terminal is given
// back before it returns, so the caller can print the message.
TopResult RunTop(const TopOptions& options, std::ostream& out);

}  // namespace collwatch::dashboard

#endif  // COLLWATCH_DASHBOARD_TOP_COMMAND_H_
