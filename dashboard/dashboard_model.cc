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
#include "process/rank_membership.h"
#include "dashboard/screen_text.h"
#include "ring/settings.h"
#include "store/event_codec.h"

namespace collwatch::dashboard {

using internal::FindingHealth;

namespace {

// A line of report.txt's text about the class `ranks`: "  ranks 0,2   issued it ...", its
// call path, its context block, a process of it.
bool AboutRanks(const std::string& line, const std::string& ranks) {
  const std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
  return words.size() >= 2 && (words[0] == "rank" || words[0] == "ranks") &&
         (words[1] == ranks || words[1] == absl::StrCat(ranks, ":"));
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

bool ColourWanted(bool plain) { return !plain && SettingIfSet(Setting::kNoColor) == nullptr; }

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

// The finding in report.txt's words (analyzer::FindingText), so every screen says the same.
std::vector<Line> DashboardModel::RenderFinding(int width, int height) const {
  const std::string dash = options_.ascii ? "-" : "─";
  std::vector<Line> body;
  const int index = FindingIndex(selected_finding_);
  if (index < 0 || index >= state_.findings_size()) return {{{"no finding", Style::kDim}}};
  const v1::Finding& finding = state_.findings(index);
  // The prose comes unfolded, so that it is wrapped once, here, at the screen's width.
  const std::string text = analyzer::FindingText(FindingFromProto(finding), /*prose_width=*/0);
  std::vector<std::string> text_lines = absl::StrSplit(text, '\n');
  while (!text_lines.empty() && text_lines.back().empty()) text_lines.pop_back();
  const int minority = MinorityClass(finding);
  const std::string minority_ranks =
      minority < 0 ? "" : RankListText({finding.rank_classes(minority).ranks().begin(),
                                        finding.rank_classes(minority).ranks().end()});
  for (size_t i = 0; i < text_lines.size(); ++i) {
    Style style = i == 0 ? HealthStyle(FindingHealth(finding.kind())) : Style::kNormal;
    if (i > 0 && minority >= 0 && AboutRanks(text_lines[i], minority_ranks)) style = Style::kMinority;
    for (Line& piece : WrapIndented(text_lines[i], style, width)) body.push_back(std::move(piece));
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
  for (Line& piece : WrapIndented(stacks_status_, Style::kDim, width)) {
    if (!stacks_status_.empty()) body.push_back(std::move(piece));
  }
  if (!state_.has_stacks()) {
    body.push_back({{"no stacks taken yet", Style::kDim}});
  } else {
    const analyzer::FindingStacks stacks = FindingStacksFromProto(state_.stacks());
    body.push_back({{"taken " + analyzer::WallClock(stacks.taken_ns), Style::kNormal}});
    std::vector<std::string> text_lines = absl::StrSplit(analyzer::StackClassesText(stacks.classes), '\n');
    for (const std::string& text : text_lines) {
      if (text.empty()) continue;
      for (Line& piece : WrapIndented(text, Style::kNormal, width)) body.push_back(std::move(piece));
    }
  }
  return WithScrolledBody(Rule("stacks of every process (s take again, Esc back, up/down scroll, q quit)", width, dash),
                          body, height);
}

}  // namespace collwatch::dashboard
