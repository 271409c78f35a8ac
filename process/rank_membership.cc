// The rank-membership rule and the words for ranks. Threading: pure functions.
#include "process/rank_membership.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "process/process_info.h"

namespace collwatch {

std::optional<CommMembership> MembershipOf(const ring::Record& record) {
  if (record.comm_id == 0 || record.rank < 0 || record.nranks <= 0 || record.rank >= record.nranks ||
      record.nranks > kMaxRanks) {
    return std::nullopt;
  }
  return CommMembership{record.comm_id, record.nranks, record.rank};
}

uint64_t WorldCommId(const std::vector<CommMembership>& memberships) {
  const CommMembership* world = nullptr;
  for (const CommMembership& membership : memberships) {
    if (membership.comm_id == 0) continue;
    if (world == nullptr || membership.comm_size > world->comm_size ||
        (membership.comm_size == world->comm_size && membership.comm_id < world->comm_id)) {
      world = &membership;
    }
  }
  return world == nullptr ? 0 : world->comm_id;
}

std::vector<int32_t> JobRanksOf(int32_t identity_rank, const std::vector<CommMembership>& memberships,
                                uint64_t world_comm_id) {
  std::vector<int32_t> world_ranks;
  for (const CommMembership& membership : memberships) {
    if (world_comm_id != 0 && membership.comm_id == world_comm_id && membership.rank >= 0) {
      world_ranks.push_back(membership.rank);
    }
  }
  std::sort(world_ranks.begin(), world_ranks.end());
  world_ranks.erase(std::unique(world_ranks.begin(), world_ranks.end()), world_ranks.end());
  if (world_ranks.size() >= 2 || identity_rank < 0) return world_ranks;
  return {identity_rank};
}

int HeldRankCount(const std::vector<int32_t>& ranks) { return std::max<int>(1, static_cast<int>(ranks.size())); }

std::string ProcessRanksText(const std::vector<int32_t>& ranks) {
  if (ranks.empty()) return "rank unknown";
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", RankListText(ranks));
}

std::string ProcessLabel(const std::vector<int32_t>& ranks, std::string_view host, int32_t pid) {
  const std::string where = absl::StrCat(host.empty() ? std::string("unknown host") : std::string(host), ", pid ", pid);
  return absl::StrCat(ranks.empty() ? std::string("process") : ProcessRanksText(ranks), " (", where, ")");
}

std::string RankListText(const std::vector<int32_t>& unsorted, size_t max_parts, int32_t nranks) {
  std::vector<int32_t> ranks = unsorted;
  // Most lists come sorted (a report's missing ranks can number millions).
  if (!std::is_sorted(ranks.begin(), ranks.end())) std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  if (ranks.empty()) return "none";
  if (nranks > 0 && ranks.size() > max_parts && ranks.size() < static_cast<size_t>(nranks)) {
    std::vector<int32_t> others;
    size_t next = 0;
    for (int32_t rank = 0; rank < nranks; ++rank) {
      if (next < ranks.size() && ranks[next] == rank) {
        ++next;
      } else {
        others.push_back(rank);
      }
    }
    const std::string plain = RankListText(ranks, max_parts);
    const std::string complement = RankListText(others, max_parts);
    if (plain.find("...") != std::string::npos && complement.find("...") == std::string::npos) {
      return "all but " + complement;
    }
    return plain;
  }
  // One arithmetic progression (every second rank, ...) reads best as such.
  if (ranks.size() >= 4) {
    const int32_t step = ranks[1] - ranks[0];
    bool progression = step > 1;
    for (size_t i = 2; i < ranks.size() && progression; ++i) progression = ranks[i] - ranks[i - 1] == step;
    if (progression) return absl::StrFormat("%d-%d/%d", ranks.front(), ranks.back(), step);
  }
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < ranks.size()) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    parts.push_back(j == i ? absl::StrCat(ranks[i]) : absl::StrCat(ranks[i], "-", ranks[j]));
    i = j + 1;
  }
  std::string text;
  for (size_t p = 0; p < parts.size() && p < max_parts; ++p) absl::StrAppend(&text, p == 0 ? "" : ",", parts[p]);
  if (parts.size() > max_parts) absl::StrAppend(&text, ",... (", ranks.size(), " ranks)");
  return text;
}

namespace {

// `text` without spaces at either end.
std::string_view Trimmed(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

// A rank number and nothing else.
bool RankNumber(std::string_view text, int32_t* rank) {
  text = Trimmed(text);
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *rank);
  return !text.empty() && error == std::errc() && end == text.data() + text.size() && *rank >= 0;
}

}  // namespace

std::optional<std::vector<int32_t>> ParseRankList(std::string_view text) {
  constexpr int32_t kMaxRange = 1 << 20;
  std::vector<int32_t> ranks;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view part = Trimmed(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (part.empty()) continue;
    const size_t dash = part.find('-');
    int32_t first = 0, last = 0;
    if (!RankNumber(part.substr(0, dash), &first)) return std::nullopt;
    last = first;
    if (dash != std::string_view::npos && !RankNumber(part.substr(dash + 1), &last)) return std::nullopt;
    if (last < first || last - first > kMaxRange) return std::nullopt;
    for (int32_t rank = first; rank <= last; ++rank) ranks.push_back(rank);
    if (ranks.size() > static_cast<size_t>(16 * kMaxRange)) return std::nullopt;
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  if (ranks.empty()) return std::nullopt;
  return ranks;
}

}  // namespace collwatch
