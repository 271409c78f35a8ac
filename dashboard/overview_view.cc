// The overview screen: the job, the selected communicator with its ranks, the findings
// and the keys. Every line is wrapped to the screen's width first (screen_text.h), then
// the sections share its height: the findings up to a third, the ranks the rest.
// Threading: see dashboard_model.h.
#include <algorithm>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analyzer/finding.h"
#include "analyzer/process_ranks.h"
#include "dashboard/dashboard_model.h"
#include "dashboard/dashboard_model_internal.h"
#include "dashboard/screen_text.h"
#include "store/event_codec.h"

namespace collwatch::dashboard {

using internal::FindingHealth;
using internal::kNsPerS;
using internal::kSlowAfterS;
using internal::Seconds;

namespace {

// Narrower than this, the strip of last collectives gives its room to the state's words.
constexpr int kStripMinWidth = 100;
constexpr char kStripTitle[] = "last collectives";
// Where the continuation of a header line or a finding starts.
constexpr int kHang = 3;
// A rank's state continues under its column while that leaves it this many columns, else
// further left (a narrow screen).
constexpr int kStateWords = 56;

// The finding in one line without its kind (the kind has its own column): its brief, or
// the whole headline from a collector that sends no brief.
const std::string& Brief(const v1::Finding& finding) {
  return finding.brief().empty() ? finding.headline() : finding.brief();
}

void AppendLines(std::vector<Line> more, std::vector<Line>* lines) {
  for (Line& line : more) lines->push_back(std::move(line));
}

// Plain pieces (WrapUnits's), each its own line in `style`.
void AppendPieces(const std::vector<std::string>& pieces, Style style, std::vector<Line>* lines) {
  for (const std::string& piece : pieces) lines->push_back({{piece, style}});
}

}  // namespace

JobTotals TotalsOf(const v1::ClusterState& state) {
  JobTotals totals;
  std::set<std::string> hosts;
  for (const v1::RankIdentity& rank : state.ranks()) hosts.insert(rank.host());
  totals.nodes = static_cast<int>(hosts.size());
  totals.processes = state.rank_status_size();
  for (const v1::RankStatus& status : state.rank_status()) {
    const int held = HeldRankCount({status.ranks().begin(), status.ranks().end()});
    totals.ranks += held;
    totals.reporting += status.connected() ? held : 0;
    totals.lost += WireStatusLostWithoutExit(status.writer_status()) ? held : 0;
    totals.events += status.events();
  }
  for (const v1::CommState& comm : state.comms()) totals.collectives_per_second += comm.collectives_per_second();
  return totals;
}

std::string DashboardModel::Strip(const RankRow& row, uint64_t max_entered, int cells) const {
  // The last `cells` collectives up to the newest any rank entered: done, entered, not yet.
  const std::string done = options_.ascii ? "#" : "█";
  const std::string entered = options_.ascii ? "+" : "▒";
  const std::string ahead = options_.ascii ? "." : "·";
  std::string strip;
  const uint64_t first = max_entered >= static_cast<uint64_t>(cells) ? max_entered - static_cast<uint64_t>(cells) + 1 : 1;
  for (uint64_t seq = first; seq < first + static_cast<uint64_t>(cells); ++seq) {
    if (seq > max_entered) {
      strip += ' ';
    } else if (seq <= row.completed_seq) {
      strip += done;
    } else if (seq <= row.entered_seq) {
      strip += entered;
    } else {
      strip += ahead;
    }
  }
  return strip;
}

void DashboardModel::AppendRankView(const CommView& view, int width, int budget, std::vector<Line>* lines) const {
  const int strip_cells = width >= kStripMinWidth ? std::clamp((width - 44) / 3, 8, 40) : 0;
  const size_t strip_column = std::max<size_t>(static_cast<size_t>(strip_cells), Columns(kStripTitle));
  const int32_t nranks = std::max(view.nranks, static_cast<int32_t>(view.rows.size()));
  struct Layout {
    std::vector<Line> head;               // the column titles, and the map of grouped ranks
    std::vector<std::vector<Line>> rows;  // each row's lines, its state's words wrapped
    size_t size() const {
      size_t total = head.size();
      for (const std::vector<Line>& row : rows) total += row.size();
      return total;
    }
  };
  const auto lay_out = [&](const std::vector<RankRow>& shown, bool one_per_rank) {
    const auto label_of = [&](const RankRow& row) {
      return one_per_rank ? absl::StrCat(row.ranks.front())
                          : absl::StrFormat("%s (%d)", RankListText(row.ranks, 4, nranks), row.ranks.size());
    };
    size_t label_width = one_per_rank ? 4 : 13;
    for (const RankRow& row : shown) label_width = std::max(label_width, Columns(label_of(row)));
    Layout layout;
    std::string titles = absl::StrFormat(" %s %9s %9s  ", Pad(one_per_rank ? "rank" : "ranks (alike)", label_width),
                                         "entered", "completed");
    if (strip_cells > 0) absl::StrAppend(&titles, Pad(kStripTitle, strip_column), "  ");
    layout.head.push_back({{titles + "state", Style::kDim}});
    if (!one_per_rank) {
      // A heat strip over all ranks, each cell the worst of the ranks it covers.
      const int cells = std::max(8, width - 8);
      const size_t per_cell = std::max<size_t>(1, (view.rows.size() + static_cast<size_t>(cells) - 1) / static_cast<size_t>(cells));
      Line heat{{" map  ", Style::kDim}};
      for (size_t first = 0; first < view.rows.size(); first += per_cell) {
        Health worst = Health::kIdle;
        for (size_t i = first; i < std::min(view.rows.size(), first + per_cell); ++i) worst = std::max(worst, view.rows[i].health);
        static constexpr const char* kAscii[] = {".", "#", "~", "!", "x"};
        static constexpr const char* kBlocks[] = {"·", "█", "▒", "░", "╳"};
        heat.push_back({(options_.ascii ? kAscii : kBlocks)[static_cast<int>(worst)], HealthStyle(worst)});
      }
      layout.head.push_back(std::move(heat));
    }
    // The state's words continue under their own column, or where they keep room enough.
    const int state_column = std::min(static_cast<int>(Columns(titles)), std::max(4, width - kStateWords));
    for (const RankRow& row : shown) {
      const Style style = HealthStyle(row.health);
      const std::string label = label_of(row);
      Line line{{" ", Style::kNormal},
                {label, row.minority ? Style::kMinority : Style::kNormal},
                {absl::StrFormat("%s %9d %9d  ", std::string(label_width - Columns(label), ' '), row.entered_seq,
                                 row.completed_seq),
                 Style::kNormal}};
      if (strip_cells > 0) {
        line.push_back({Strip(row, view.max_entered, strip_cells), style});
        line.push_back({std::string(strip_column - static_cast<size_t>(strip_cells) + 2, ' '), Style::kNormal});
      }
      line.push_back({absl::StrCat(std::string(HealthName(row.health)), ": ", row.note), row.minority ? Style::kMinority : style});
      layout.rows.push_back(WrapLine(std::move(line), width, state_column));
    }
    return layout;
  };
  Layout layout = lay_out(view.rows, /*one_per_rank=*/true);
  if (layout.size() > static_cast<size_t>(budget)) {
    layout = lay_out(GroupRows(view.rows), /*one_per_rank=*/false);
    // Short of room, the map gives its line to the rows.
    if (layout.size() > static_cast<size_t>(budget)) layout.head.pop_back();
  }
  // The rows that fit, worst first (the first whatever its size); the titles say how many
  // did not (the rank filter shows them).
  size_t shown = 0;
  for (size_t used = layout.head.size(); shown < layout.rows.size(); ++shown) {
    used += layout.rows[shown].size();
    if (shown > 0 && used > static_cast<size_t>(std::max(budget, 0))) break;
  }
  if (shown < layout.rows.size()) {
    const size_t more = layout.rows.size() - shown;
    layout.head.front().push_back({absl::StrFormat("  (%d more group%s)", more, more == 1 ? "" : "s"), Style::kDim});
  }
  AppendLines(std::move(layout.head), lines);
  for (size_t i = 0; i < shown; ++i) AppendLines(std::move(layout.rows[i]), lines);
}

std::vector<Line> DashboardModel::HeaderLines(int width) const {
  std::vector<Line> lines;
  Line title{{absl::StrCat("collwatch top  job ", state_.job().empty() ? "(none yet)" : state_.job()), Style::kTitle}};
  if (paused_) title.push_back({"  PAUSED (p resumes)", Style::kWarning});
  AppendLines(WrapLine(std::move(title), width, kHang), &lines);

  Line connection;
  if (connection_.connected) {
    connection.push_back({absl::StrCat("collector ", connection_.address, " connected"), Style::kDim});
    if (connection_.connections > 1) {
      connection.push_back({absl::StrFormat(" (reconnected %d time%s)", connection_.connections - 1,
                                            connection_.connections == 2 ? "" : "s"),
                            Style::kWarning});
    }
  } else {
    std::string text = connection_.ever_connected
                           ? absl::StrFormat("collector %s lost: reconnecting (attempt %d); showing the last state",
                                             connection_.address, std::max(1, connection_.failed_attempts))
                           : absl::StrFormat("collector %s: connecting (attempt %d)", connection_.address,
                                             std::max(1, connection_.failed_attempts));
    if (!connection_.last_error.empty()) absl::StrAppend(&text, " - ", connection_.last_error);
    connection.push_back({text, Style::kWarning});
  }
  AppendLines(WrapLine(std::move(connection), width, kHang), &lines);

  const JobTotals totals = TotalsOf(state_);
  const std::string processes =
      totals.ranks == totals.processes ? "" : absl::StrFormat(" in %d processes", totals.processes);
  AppendPieces(WrapUnits({absl::StrFormat("%d ranks%s on %d node%s (%d reporting, %d lost)", totals.ranks, processes,
                                          totals.nodes, totals.nodes == 1 ? "" : "s", totals.reporting, totals.lost),
                          absl::StrFormat("%d communicator%s", state_.comms_size(), state_.comms_size() == 1 ? "" : "s"),
                          absl::StrFormat("%.1f coll/s", totals.collectives_per_second),
                          absl::StrFormat("%d events", totals.events)},
                         "  ", width, width),
               Style::kNormal, &lines);
  return lines;
}

std::vector<Line> DashboardModel::FindingLines(size_t position, int width) const {
  const v1::Finding& finding = state_.findings(FindingIndex(position));
  const double ago = std::max(0.0, static_cast<double>(now_ns_ - static_cast<int64_t>(finding.first_bad_t_ns())) / kNsPerS);
  const bool selected = position == selected_finding_;
  return WrapLine({{selected ? ">" : " ", Style::kNormal},
                   {absl::StrFormat("%-22s", v1::FindingKind_Name(finding.kind())),
                    selected ? Style::kSelected : HealthStyle(FindingHealth(finding.kind()))},
                   {absl::StrFormat(" %s ago, found in %s: ", Seconds(ago), Seconds(finding.detect_latency_s())),
                    Style::kDim},
                   {Brief(finding), Style::kNormal}},
                  width, kHang);
}

std::vector<Line> DashboardModel::KeyLines(int width) const {
  std::vector<Line> lines;
  if (editing_filter_) {
    return WrapLine({{absl::StrCat("filter ranks (e.g. 0-3,8; empty: all; Enter applies, Esc cancels): ", filter_text_, "_"),
                      Style::kWarning}},
                    width, kHang);
  }
  if (!filter_error_.empty()) return WrapLine({{filter_error_, Style::kWarning}}, width, kHang);
  AppendPieces(WrapUnits({"<- -> communicator", "up/down finding", "Enter open", "s stacks", "/ filter ranks",
                          "Esc clear filter", "p pause", "q quit"},
                         "  ", width, width),
               Style::kDim, &lines);
  return lines;
}

std::vector<Line> DashboardModel::RenderOverview(int width, int height) const {
  const std::string dash = options_.ascii ? "-" : "─";
  std::vector<Line> lines = HeaderLines(width);

  // The communicators: a tab line, then the selected one.
  std::vector<Line> comm_lines;
  std::optional<CommView> view;
  if (state_.comms_size() == 0) {
    comm_lines.push_back(Rule("communicators", width, dash));
    AppendLines(WrapLine({{" none yet: no collective has been reported", Style::kDim}}, width, kHang), &comm_lines);
  } else {
    const size_t selected = std::min(selected_comm_, static_cast<size_t>(state_.comms_size() - 1));
    Line tabs{{absl::StrCat(dash, dash, " communicator ", selected + 1, "/", state_.comms_size(), " (<- ->) "),
               Style::kTitle}};
    for (int i = 0; i < state_.comms_size(); ++i) {
      const CommView tab = BuildCommView(state_, state_.comms(i), std::nullopt);
      const std::string name = analyzer::CommText(tab.comm_id).substr(5);
      tabs.push_back({static_cast<size_t>(i) == selected ? absl::StrCat("[", name, "]") : absl::StrCat(" ", name, " "),
                      static_cast<size_t>(i) == selected ? Style::kSelected : HealthStyle(tab.health)});
      tabs.push_back({" ", Style::kNormal});
    }
    comm_lines.push_back(std::move(tabs));
    view = BuildCommView(state_, state_.comms(static_cast<int>(selected)), rank_filter_);
    const v1::CommState& comm = state_.comms(static_cast<int>(selected));
    const std::string parent =
        comm.parent_id() != 0 ? absl::StrCat(", split from ", analyzer::CommText(comm.parent_id())) : "";
    AppendLines(WrapLine({{absl::StrFormat(" %s: %d ranks (%d heard from)%s, %.1f coll/s, newest seq %d",
                                           analyzer::CommText(view->comm_id), view->nranks, view->reporting, parent,
                                           view->collectives_per_second, view->max_entered),
                           Style::kNormal}},
                         width, kHang),
                &comm_lines);
    if (rank_filter_) {
      AppendLines(WrapLine({{absl::StrCat(" filter: ranks ", RankListText(*rank_filter_, 6)), Style::kWarning}}, width,
                           kHang),
                  &comm_lines);
    }
    if (view->inflight_seq == 0) {
      comm_lines.push_back({{" nothing in flight", Style::kDim}});
    } else {
      const Health health = view->stall_threshold_s > 0 && view->inflight_age_s >= view->stall_threshold_s
                                ? Health::kStuck
                                : (view->inflight_age_s >= std::max(kSlowAfterS, view->inflight_expected_s)
                                       ? Health::kSlow
                                       : Health::kHealthy);
      std::string text = absl::StrFormat(" oldest in flight: seq %d%s, %s", view->inflight_seq,
                                         view->inflight_op.empty() ? "" : absl::StrCat(" ", view->inflight_op),
                                         Seconds(view->inflight_age_s));
      if (view->inflight_expected_s > 0) absl::StrAppend(&text, " (expected ", Seconds(view->inflight_expected_s), ")");
      if (view->stall_threshold_s > 0) absl::StrAppend(&text, ", stall at ", Seconds(view->stall_threshold_s));
      if (view->waiting_for_ranks) absl::StrAppend(&text, "; waiting for ranks");
      AppendLines(WrapLine({{text, HealthStyle(health)}}, width, kHang), &comm_lines);
    }
  }

  // The findings, newest first, each wrapped whole.
  std::vector<std::vector<Line>> findings;
  size_t finding_lines = 0;
  for (size_t position = 0; position < static_cast<size_t>(state_.findings_size()); ++position) {
    findings.push_back(FindingLines(position, width));
    finding_lines += findings.back().size();
  }
  const std::vector<Line> keys = options_.keys ? KeyLines(width) : std::vector<Line>();
  const int fixed = static_cast<int>(lines.size() + comm_lines.size() + 1 + keys.size());
  // The findings take up to a third of the screen (at least 3 lines), and the selected one
  // is shown whole where the screen allows; the ranks take the rest.
  const size_t selected = std::min(selected_finding_, findings.empty() ? 0 : findings.size() - 1);
  int finding_budget = std::min(static_cast<int>(std::max<size_t>(finding_lines, 1)), std::max(3, height / 3));
  if (!findings.empty()) {
    finding_budget = std::max(finding_budget, std::min(static_cast<int>(findings[selected].size()), height - fixed - 2));
  }
  AppendLines(std::move(comm_lines), &lines);
  if (view) AppendRankView(*view, width, std::max(2, height - fixed - finding_budget), &lines);

  lines.push_back(Rule(absl::StrFormat("findings: %d, newest first (up/down, Enter opens)", state_.findings_size()),
                       width, dash));
  if (findings.empty()) {
    // "Agrees" only of what was seen: before a state, or a collective, there is nothing to agree.
    const Line none = !connection_.ever_connected ? Line{{" none yet: no state from the collector", Style::kDim}}
                      : state_.comms_size() == 0  ? Line{{" none yet: no collective reported", Style::kDim}}
                                                  : Line{{" none: every communicator agrees so far", Style::kHealthy}};
    AppendLines(WrapLine(none, width, kHang), &lines);
  }
  // From the newest, unless the selected one would not fit then.
  size_t first = 0;
  const auto lines_from = [&](size_t from) {
    size_t total = 0;
    for (size_t position = from; position <= selected && position < findings.size(); ++position) {
      total += findings[position].size();
    }
    return total;
  };
  while (first < selected && lines_from(first) > static_cast<size_t>(finding_budget)) ++first;
  size_t used = 0;
  for (size_t position = first; position < findings.size(); ++position) {
    if (position != first && used + findings[position].size() > static_cast<size_t>(finding_budget)) break;
    used += findings[position].size();
    AppendLines(std::move(findings[position]), &lines);
  }

  // The keys at the bottom, or the filter being typed.
  while (options_.keys && lines.size() + keys.size() < static_cast<size_t>(std::max(height, 0))) lines.push_back({});
  AppendLines(keys, &lines);
  return lines;
}

}  // namespace collwatch::dashboard
