// The dashboard's model. Threading: see dashboard_model.h.
#include "dashboard/dashboard_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "analyzer/finding.h"
#include "analyzer/process_ranks.h"
#include "analyzer/report.h"
#include "analyzer/stack_classes.h"
#include "collector/finding_codec.h"
#include "dashboard/dashboard_model_internal.h"
#include "store/event_codec.h"

namespace collwatch::dashboard {
namespace {

using internal::Contains;
using internal::FindingHealth;
using internal::IsDivergence;
using internal::kNsPerS;
using internal::kSlowAfterS;
using internal::Seconds;

// Counts UTF-8 code points: every glyph we draw is one column wide.
size_t Columns(std::string_view text) {
  size_t columns = 0;
  for (char c : text) columns += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  return columns;
}

// Cuts `line` to `width` columns (whole code points).
void Clip(Line* line, size_t width) {
  size_t used = 0;
  for (size_t i = 0; i < line->size(); ++i) {
    std::string& text = (*line)[i].text;
    const size_t columns = Columns(text);
    if (used + columns <= width) {
      used += columns;
      continue;
    }
    size_t keep = 0, bytes = 0;
    while (bytes < text.size() && keep < width - used) {
      ++bytes;
      while (bytes < text.size() && (static_cast<unsigned char>(text[bytes]) & 0xC0) == 0x80) ++bytes;
      ++keep;
    }
    text.resize(bytes);
    line->resize(i + 1);
    return;
  }
}

std::string Pad(std::string text, size_t width) {
  const size_t columns = Columns(text);
  if (columns < width) text.append(width - columns, ' ');
  return text;
}

// A title bar: "── text ──────" to the full width.
Line Rule(const std::string& text, int width, const std::string& dash) {
  std::string bar = absl::StrCat(dash, dash, " ", text, " ");
  while (Columns(bar) < static_cast<size_t>(width)) bar += dash;
  return {{bar, Style::kTitle}};
}

// Word-wraps `text` into lines of at most `width` columns.
std::vector<std::string> Wrap(const std::string& text, int width) {
  std::vector<std::string> lines;
  std::string current;
  for (const std::string& word : std::vector<std::string>(absl::StrSplit(text, ' ', absl::SkipEmpty()))) {
    if (!current.empty() && Columns(current) + 1 + Columns(word) > static_cast<size_t>(width)) {
      lines.push_back(current);
      current.clear();
    }
    if (!current.empty()) current += ' ';
    current.append(word);
  }
  if (!current.empty()) lines.push_back(current);
  return lines;
}

// `line` as it is when it fits; else word-wrapped, each piece indented as the line began.
std::vector<std::string> WrapIndented(const std::string& line, int width) {
  if (Columns(line) <= static_cast<size_t>(std::max(width, 0))) return {line};
  const size_t indent = std::min(line.find_first_not_of(' '), line.size());
  std::vector<std::string> pieces = Wrap(line.substr(indent), std::max(width - static_cast<int>(indent), 8));
  for (std::string& piece : pieces) piece.insert(0, indent, ' ');
  return pieces;
}

std::string KindName(v1::FindingKind kind) { return v1::FindingKind_Name(kind); }

// The finding in one line without its kind (the kind has its own column): its brief, or
// the whole headline from a collector that sends no brief.
const std::string& Brief(const v1::Finding& finding) {
  return finding.brief().empty() ? finding.headline() : finding.brief();
}

}  // namespace

std::string_view HealthName(Health health) {
  switch (health) {
    case Health::kIdle: return "idle";
    case Health::kHealthy: return "healthy";
    case Health::kSlow: return "slow";
    case Health::kStuck: return "stuck";
    case Health::kDiverged: return "diverged";
  }
  return "?";
}

Style HealthStyle(Health health) {
  switch (health) {
    case Health::kIdle: return Style::kIdle;
    case Health::kHealthy: return Style::kHealthy;
    case Health::kSlow: return Style::kSlow;
    case Health::kStuck: return Style::kStuck;
    case Health::kDiverged: return Style::kDiverged;
  }
  return Style::kNormal;
}

std::string LineText(const Line& line) {
  std::string text;
  for (const Span& span : line) text += span.text;
  return text;
}

void DashboardModel::Update(const v1::ClusterState& state, const ConnectionState& connection, int64_t now_ns) {
  connection_ = connection;
  if (paused_) {
    pending_ = state;
    has_pending_ = true;
    return;
  }
  state_ = state;
  now_ns_ = now_ns;
  if (selected_comm_ >= static_cast<size_t>(state_.comms_size())) selected_comm_ = 0;
}

int DashboardModel::FindingIndex(size_t position) const {
  return state_.findings_size() - 1 - static_cast<int>(position);
}

bool DashboardModel::HandleKey(int key) {
  if (editing_filter_) {
    if (key == kKeyEnter) {
      editing_filter_ = false;
      filter_error_.clear();
      if (absl::StripAsciiWhitespace(filter_text_).empty()) {
        rank_filter_.reset();
      } else if (auto ranks = ParseRankList(filter_text_)) {
        rank_filter_ = std::move(ranks);
      } else {
        filter_error_ = absl::StrCat("not a rank list: '", filter_text_, "' (e.g. 0-3,8)");
      }
    } else if (key == kKeyEscape) {
      editing_filter_ = false;
    } else if (key == kKeyBackspace) {
      if (!filter_text_.empty()) filter_text_.pop_back();
    } else if (key >= 0x20 && key < 0x7f) {
      filter_text_ += static_cast<char>(key);
    }
    return true;
  }
  if (finding_open_ || stacks_open_) {
    switch (key) {
      case kKeyEscape: case kKeyBackspace: case kKeyEnter: case 'b': finding_open_ = stacks_open_ = false; break;
      case 's': stacks_requested_ = stacks_open_; break;
      case kKeyUp: case 'k': detail_scroll_ = std::max(0, detail_scroll_ - 1); break;
      case kKeyDown: case 'j': ++detail_scroll_; break;
      case kKeyPageUp: detail_scroll_ = std::max(0, detail_scroll_ - 10); break;
      case kKeyPageDown: detail_scroll_ += 10; break;
      case 'q': case 'Q': return false;
      default: break;
    }
    return true;
  }
  const size_t comms = static_cast<size_t>(state_.comms_size());
  const size_t findings = static_cast<size_t>(state_.findings_size());
  switch (key) {
    case 'q': case 'Q': return false;
    case kKeyRight: case kKeyTab: case 'l': case 'n':
      if (comms > 0) selected_comm_ = (selected_comm_ + 1) % comms;
      break;
    case kKeyLeft: case 'h': case 'N':
      if (comms > 0) selected_comm_ = (selected_comm_ + comms - 1) % comms;
      break;
    case kKeyUp: case 'k':
      if (selected_finding_ > 0) --selected_finding_;
      break;
    case kKeyDown: case 'j':
      if (selected_finding_ + 1 < findings) ++selected_finding_;
      break;
    case kKeyEnter: case 'o':
      if (selected_finding_ < findings) {
        finding_open_ = true;
        detail_scroll_ = 0;
      }
      break;
    case 'p': case ' ':
      paused_ = !paused_;
      if (!paused_ && has_pending_) {
        state_ = pending_;
        has_pending_ = false;
        if (selected_comm_ >= static_cast<size_t>(state_.comms_size())) selected_comm_ = 0;
      }
      break;
    case '/': case 'f':
      editing_filter_ = true;
      filter_text_.clear();
      break;
    case 's':
      stacks_open_ = true;
      stacks_requested_ = true;
      detail_scroll_ = 0;
      break;
    case kKeyEscape:
      rank_filter_.reset();
      filter_error_.clear();
      break;
    default: break;
  }
  return true;
}

std::vector<Line> DashboardModel::Render(int width, int height) const {
  std::vector<Line> lines = stacks_open_    ? RenderStacks(width, height)
                           : finding_open_ ? RenderFinding(width, height)
                                           : RenderOverview(width, height);
  if (lines.size() > static_cast<size_t>(height)) lines.resize(static_cast<size_t>(height));
  for (Line& line : lines) Clip(&line, static_cast<size_t>(std::max(width, 0)));
  return lines;
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

void DashboardModel::AppendRankView(const CommView& view, int width, int rows, std::vector<Line>* lines) const {
  const int strip_cells = std::clamp((width - 44) / 3, 8, 40);
  const bool one_per_rank = static_cast<int>(view.rows.size()) <= rows - 1;
  std::vector<RankRow> shown = one_per_rank ? view.rows : GroupRows(view.rows);
  const int32_t nranks = std::max(view.nranks, static_cast<int32_t>(view.rows.size()));
  auto label_of = [&](const RankRow& row) {
    return one_per_rank ? absl::StrCat(row.ranks.front())
                        : absl::StrFormat("%s (%d)", RankListText(row.ranks, 4, nranks), row.ranks.size());
  };
  size_t label_width = one_per_rank ? 4 : 13;
  for (const RankRow& row : shown) label_width = std::max(label_width, Columns(label_of(row)));
  lines->push_back({{absl::StrFormat(" %s %9s %9s  %s  %s", Pad(one_per_rank ? "rank" : "ranks (alike)", label_width),
                                     "entered", "completed", Pad("last collectives", static_cast<size_t>(strip_cells)),
                                     "state"),
                     Style::kDim}});
  if (!one_per_rank) {
    // A heat strip over all shown ranks, each cell the worst of the ranks it covers.
    const int cells = std::max(8, width - 8);
    const size_t per_cell = (view.rows.size() + static_cast<size_t>(cells) - 1) / static_cast<size_t>(cells);
    Line heat{{" map  ", Style::kDim}};
    for (size_t first = 0; first < view.rows.size(); first += std::max<size_t>(per_cell, 1)) {
      Health worst = Health::kIdle;
      for (size_t i = first; i < std::min(view.rows.size(), first + per_cell); ++i) worst = std::max(worst, view.rows[i].health);
      static constexpr const char* kAscii[] = {".", "#", "~", "!", "x"};
      static constexpr const char* kBlocks[] = {"·", "█", "▒", "░", "╳"};
      heat.push_back({(options_.ascii ? kAscii : kBlocks)[static_cast<int>(worst)], HealthStyle(worst)});
    }
    lines->push_back(heat);
    --rows;
  }
  int shown_rows = 0;
  for (const RankRow& row : shown) {
    if (shown_rows == rows - 1 && static_cast<int>(shown.size()) > rows) {
      lines->push_back({{absl::StrFormat(" ... %d more lines", static_cast<int>(shown.size()) - shown_rows), Style::kDim}});
      break;
    }
    const Style style = HealthStyle(row.health);
    lines->push_back({{absl::StrFormat(" %s %9d %9d  ", Pad(label_of(row), label_width), row.entered_seq,
                                       row.completed_seq),
                       Style::kNormal},
                      {Strip(row, view.max_entered, strip_cells), style},
                      {absl::StrCat("  ", std::string(HealthName(row.health)), ": ", row.note), style}});
    ++shown_rows;
  }
}

std::vector<Line> DashboardModel::RenderOverview(int width, int height) const {
  std::vector<Line> lines;
  const std::string dash = options_.ascii ? "-" : "─";
  // The job.
  std::set<std::string> hosts;
  int ranks = 0, reporting = 0, lost = 0;  // a process may hold several ranks
  uint64_t events = 0;
  for (int i = 0; i < state_.ranks_size(); ++i) hosts.insert(state_.ranks(i).host());
  for (const v1::RankStatus& status : state_.rank_status()) {
    const int held = HeldRankCount({status.ranks().begin(), status.ranks().end()});
    ranks += held;
    reporting += status.connected() ? held : 0;
    lost += WireStatusLostWithoutExit(status.writer_status()) ? held : 0;
    events += status.events();
  }
  const std::string processes =
      ranks == state_.rank_status_size() ? "" : absl::StrFormat(" in %d processes", state_.rank_status_size());
  double rate = 0;
  for (const v1::CommState& comm : state_.comms()) rate += comm.collectives_per_second();
  Line title{{absl::StrCat("collwatch top  job ", state_.job().empty() ? "(none yet)" : state_.job()), Style::kTitle}};
  if (paused_) title.push_back({"  PAUSED (p resumes)", Style::kWarning});
  lines.push_back(title);

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
  lines.push_back(connection);
  lines.push_back({{absl::StrFormat("%d ranks%s on %d node%s (%d reporting, %d lost)  %d communicator%s  %.1f coll/s  %d events",
                                    ranks, processes, hosts.size(), hosts.size() == 1 ? "" : "s", reporting, lost,
                                    state_.comms_size(), state_.comms_size() == 1 ? "" : "s", rate, events),
                    Style::kNormal}});

  // Findings take up to a third of the screen, at least 3 lines.
  const int finding_lines = std::max(1, std::min(state_.findings_size(), std::max(3, height / 3)));
  const int comm_budget = height - static_cast<int>(lines.size()) - finding_lines - 2;

  // Communicators: a tab line, then the selected one.
  if (state_.comms_size() == 0) {
    lines.push_back(Rule("communicators", width, dash));
    lines.push_back({{" none yet: no collective has been reported", Style::kDim}});
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
    lines.push_back(tabs);
    const CommView view = BuildCommView(state_, state_.comms(static_cast<int>(selected)), rank_filter_);
    const v1::CommState& comm = state_.comms(static_cast<int>(selected));
    Line about{{absl::StrFormat(" %s: %d ranks (%d heard from)%s, %.1f coll/s, newest seq %d",
                                analyzer::CommText(view.comm_id), view.nranks, view.reporting,
                                comm.parent_id() != 0 ? absl::StrCat(", split from ", analyzer::CommText(comm.parent_id()))
                                                      : "",
                                view.collectives_per_second, view.max_entered),
                Style::kNormal}};
    if (rank_filter_) {
      about.push_back({absl::StrCat("  filter: ranks ", RankListText(*rank_filter_, 6)), Style::kWarning});
    }
    lines.push_back(about);
    Line inflight;
    if (view.inflight_seq == 0) {
      inflight.push_back({" nothing in flight", Style::kDim});
    } else {
      const Health health = view.stall_threshold_s > 0 && view.inflight_age_s >= view.stall_threshold_s
                                ? Health::kStuck
                                : (view.inflight_age_s >= std::max(kSlowAfterS, view.inflight_expected_s)
                                       ? Health::kSlow
                                       : Health::kHealthy);
      std::string text = absl::StrFormat(" oldest in flight: seq %d%s, %s", view.inflight_seq,
                                         view.inflight_op.empty() ? "" : absl::StrCat(" ", view.inflight_op),
                                         Seconds(view.inflight_age_s));
      if (view.inflight_expected_s > 0) absl::StrAppend(&text, " (expected ", Seconds(view.inflight_expected_s), ")");
      if (view.stall_threshold_s > 0) absl::StrAppend(&text, ", stall at ", Seconds(view.stall_threshold_s));
      if (view.waiting_for_ranks) absl::StrAppend(&text, "; waiting for ranks");
      inflight.push_back({text, HealthStyle(health)});
    }
    lines.push_back(inflight);
    AppendRankView(view, width, std::max(2, comm_budget - 3), &lines);
  }

  // Findings, newest first.
  lines.push_back(Rule(absl::StrFormat("findings: %d, newest first (up/down, Enter opens)", state_.findings_size()),
                       width, dash));
  if (state_.findings_size() == 0) {
    lines.push_back({{" none: every communicator agrees so far", Style::kHealthy}});
  }
  const int first = std::max(0, static_cast<int>(selected_finding_) - finding_lines + 1);
  for (int position = first; position < state_.findings_size() && position < first + finding_lines; ++position) {
    const v1::Finding& finding = state_.findings(FindingIndex(static_cast<size_t>(position)));
    const double ago = std::max(0.0, static_cast<double>(now_ns_ - static_cast<int64_t>(finding.first_bad_t_ns())) / kNsPerS);
    const bool selected = static_cast<size_t>(position) == selected_finding_;
    Line line{{selected ? ">" : " ", Style::kNormal},
              {absl::StrFormat("%-22s", KindName(finding.kind())),
               selected ? Style::kSelected : HealthStyle(FindingHealth(finding.kind()))},
              {absl::StrFormat(" %s ago, found in %s: ", Seconds(ago), Seconds(finding.detect_latency_s())), Style::kDim},
              {Brief(finding), Style::kNormal}};
    lines.push_back(line);
  }

  // Keys, or the filter being typed.
  while (static_cast<int>(lines.size()) < height - 1) lines.push_back({});
  if (editing_filter_) {
    lines.push_back({{absl::StrCat("filter ranks (e.g. 0-3,8; empty: all; Enter applies, Esc cancels): ", filter_text_, "_"),
                      Style::kWarning}});
  } else if (!filter_error_.empty()) {
    lines.push_back({{filter_error_, Style::kWarning}});
  } else {
    lines.push_back({{"<- -> communicator  up/down finding  Enter open  s stacks  / filter ranks  Esc clear filter  p pause  q quit",
                      Style::kDim}});
  }
  return lines;
}

// The finding in report.txt's words (analyzer::FindingText), so every screen says the same.
std::vector<Line> DashboardModel::RenderFinding(int width, int height) const {
  const std::string dash = options_.ascii ? "-" : "─";
  std::vector<Line> body;
  const int index = FindingIndex(selected_finding_);
  if (index < 0 || index >= state_.findings_size()) return {{{"no finding", Style::kDim}}};
  const v1::Finding& finding = state_.findings(index);
  const std::string text = analyzer::FindingText(FindingFromProto(finding));
  std::vector<std::string> text_lines = absl::StrSplit(text, '\n');
  while (!text_lines.empty() && text_lines.back().empty()) text_lines.pop_back();
  for (size_t i = 0; i < text_lines.size(); ++i) {
    const Style style = i == 0 ? HealthStyle(FindingHealth(finding.kind())) : Style::kNormal;
    for (std::string& piece : WrapIndented(text_lines[i], width)) body.push_back({{std::move(piece), style}});
  }

  return WithScrolledBody(Rule(absl::StrFormat("finding %d of %d (Esc back, up/down scroll, q quit)",
                                               selected_finding_ + 1, state_.findings_size()),
                               width, dash),
                          body, height);
}

std::vector<Line> DashboardModel::WithScrolledBody(Line title, const std::vector<Line>& body, int height) const {
  std::vector<Line> lines;
  lines.push_back(std::move(title));
  const int room = std::max(1, height - 1);
  const int scroll = std::clamp(detail_scroll_, 0, std::max(0, static_cast<int>(body.size()) - room));
  for (int i = scroll; i < static_cast<int>(body.size()) && static_cast<int>(lines.size()) < height; ++i) {
    lines.push_back(body[static_cast<size_t>(i)]);
  }
  return lines;
}

bool DashboardModel::TakeStacksRequest() {
  const bool requested = stacks_requested_;
  stacks_requested_ = false;
  return requested;
}

std::vector<Line> DashboardModel::RenderStacks(int width, int height) const {
  const std::string dash = options_.ascii ? "-" : "─";
  std::vector<Line> body;
  if (!stacks_status_.empty()) body.push_back({{stacks_status_, Style::kDim}});
  if (!state_.has_stacks()) {
    body.push_back({{"no stacks taken yet", Style::kDim}});
  } else {
    const analyzer::FindingStacks stacks = FindingStacksFromProto(state_.stacks());
    body.push_back({{"taken " + analyzer::WallClock(stacks.taken_ns), Style::kNormal}});
    std::vector<std::string> text_lines = absl::StrSplit(analyzer::StackClassesText(stacks.classes), '\n');
    for (const std::string& text : text_lines) {
      if (text.empty()) continue;
      for (std::string& piece : WrapIndented(text, width)) body.push_back({{std::move(piece), Style::kNormal}});
    }
  }
  return WithScrolledBody(Rule("stacks of every process (s take again, Esc back, up/down scroll, q quit)", width, dash),
                          body, height);
}

}  // namespace collwatch::dashboard
