// What `collwatch top` shows, apart from drawing it: the cluster state from the Watch
// stream and the connection's story in, lines of styled text out, plus the keys that
// move around (communicators, findings, a finding's detail, a rank filter, pause). The
// terminal layer (terminal_ui.h) only maps styles to colours and draws the lines, so
// everything shown here is unit-tested without a terminal.
// Threading: single-threaded.
#ifndef COLLWATCH_DASHBOARD_DASHBOARD_MODEL_H_
#define COLLWATCH_DASHBOARD_DASHBOARD_MODEL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "proto/collwatch.pb.h"

namespace collwatch::dashboard {

// How a rank (or communicator) is doing, in increasing severity.
enum class Health { kIdle, kHealthy, kSlow, kStuck, kDiverged };
std::string_view HealthName(Health health);

// kMinority: the rank class that stands alone in a divergence (the odd one out).
enum class Style { kNormal, kTitle, kDim, kIdle, kHealthy, kSlow, kStuck, kDiverged, kSelected, kWarning, kMinority };
Style HealthStyle(Health health);

struct Span {
  std::string text;
  Style style = Style::kNormal;
};
using Line = std::vector<Span>;
std::string LineText(const Line& line);

// Keys beyond plain characters (the terminal layer maps its own codes to these).
enum Key : int {
  kKeyUp = 0x1001,
  kKeyDown,
  kKeyLeft,
  kKeyRight,
  kKeyEnter,
  kKeyEscape,
  kKeyBackspace,
  kKeyTab,
  kKeyPageUp,
  kKeyPageDown,
};

// The Watch connection as the screen tells it.
struct ConnectionState {
  std::string address;
  bool connected = false;
  bool ever_connected = false;
  int connections = 0;      // streams that delivered a state (above 1: it reconnected)
  int failed_attempts = 0;  // attempts since the last good stream
  std::string last_error;
};

// One line of a communicator's rank view: one rank, or ranks that are alike.
struct RankRow {
  std::vector<int32_t> ranks;
  uint64_t entered_seq = 0;
  uint64_t completed_seq = 0;
  Health health = Health::kHealthy;
  std::string note;  // "waiting at seq 41", "not at seq 41 for 12.0 s", "class 2/2: ..."
  bool minority = false;  // in the divergence's minority class (MinorityClass)
};

// What the screen says about one communicator.
struct CommView {
  uint64_t comm_id = 0;
  int32_t nranks = 0;
  int32_t reporting = 0;
  Health health = Health::kHealthy;
  uint64_t max_entered = 0;
  double collectives_per_second = 0;
  uint64_t inflight_seq = 0;  // 0: nothing in flight
  std::string inflight_op;
  double inflight_age_s = 0;
  double inflight_expected_s = 0;
  double stall_threshold_s = 0;
  bool waiting_for_ranks = false;
  std::vector<RankRow> rows;  // one per rank that passes the filter, ascending
};

// The index of a divergence's minority class: the one class smaller than every other (one
// rank against seven); -1 when no class is (two against two), or not a divergence.
int MinorityClass(const v1::Finding& finding);

// The job as its header line tells it (a process may hold several ranks).
struct JobTotals {
  int ranks = 0;
  int processes = 0;
  int nodes = 0;
  int reporting = 0;
  int lost = 0;
  uint64_t events = 0;
  double collectives_per_second = 0;
};
JobTotals TotalsOf(const v1::ClusterState& state);

CommView BuildCommView(const v1::ClusterState& state, const v1::CommState& comm,
                       const std::optional<std::vector<int32_t>>& rank_filter);
// Ranks alike (same progress, health and note) merged into one row; worst first, a
// divergence's minority class first among the diverged.
std::vector<RankRow> GroupRows(const std::vector<RankRow>& rows);

// Whether the screen may draw in colour: not in plain mode, nor while NO_COLOR holds any
// value but empty (no-color.org); bold, dim and reverse stay either way.
bool ColourWanted(bool plain);

class DashboardModel {
 public:
  struct Options {
    bool ascii = false;  // ASCII glyphs only (plain terminals)
    // The key hints at the foot of the screen; without them (a frame printed once, `top
    // --once`) the overview ends with its last finding.
    bool keys = true;
  };
  explicit DashboardModel(Options options) : options_(options) {}
  DashboardModel() : DashboardModel(Options{}) {}

  // A new state; kept aside while paused. `now_ns`: CLOCK_REALTIME, for ages.
  void Update(const v1::ClusterState& state, const ConnectionState& connection, int64_t now_ns);
  // Handles one key; false when it asks to quit.
  bool HandleKey(int key);
  std::vector<Line> Render(int width, int height) const;

  bool paused() const { return paused_; }
  bool stacks_open() const { return stacks_open_; }
  // True once after 's' asked for every process's stacks: the caller asks the collector
  // (ClusterWatcher::RequestStacks) and gives back what it said (SetStacksStatus).
  bool TakeStacksRequest();
  void SetStacksStatus(std::string status) { stacks_status_ = std::move(status); }
  size_t selected_comm() const { return selected_comm_; }
  bool finding_open() const { return finding_open_; }
  const std::optional<std::vector<int32_t>>& rank_filter() const { return rank_filter_; }

 private:
  std::vector<Line> RenderOverview(int width, int height) const;
  std::vector<Line> RenderFinding(int width, int height) const;
  std::vector<Line> RenderStacks(int width, int height) const;
  // The lines of a detail view below its title rule, scrolled by detail_scroll_.
  std::vector<Line> WithScrolledBody(Line title, const std::vector<Line>& body, int height) const;
  // The rank view of `view` in `budget` lines at most: a line per rank when they fit,
  // else alike ranks grouped under a map line.
  void AppendRankView(const CommView& view, int width, int budget, std::vector<Line>* lines) const;
  std::vector<Line> HeaderLines(int width) const;
  std::vector<Line> FindingLines(size_t position, int width) const;
  std::vector<Line> KeyLines(int width) const;
  std::string Strip(const RankRow& row, uint64_t max_entered, int cells) const;
  // Findings newest first (index into state_.findings()).
  int FindingIndex(size_t position) const;

  Options options_;
  v1::ClusterState state_;
  v1::ClusterState pending_;  // arrived while paused
  bool has_pending_ = false;
  ConnectionState connection_;
  int64_t now_ns_ = 0;
  size_t selected_comm_ = 0;
  size_t selected_finding_ = 0;  // position in newest-first order
  bool finding_open_ = false;
  bool stacks_open_ = false;      // the stacks view ('s')
  bool stacks_requested_ = false; // 's' pressed, not taken by TakeStacksRequest yet
  std::string stacks_status_;     // what the collector said to the last request
  int detail_scroll_ = 0;
  bool paused_ = false;
  bool editing_filter_ = false;
  std::string filter_text_;
  std::string filter_error_;
  std::optional<std::vector<int32_t>> rank_filter_;
};

}  // namespace collwatch::dashboard

#endif  // COLLWATCH_DASHBOARD_DASHBOARD_MODEL_H_
