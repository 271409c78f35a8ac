// Finding kind names and the compact rank lists reports use.
#include "analyzer/finding.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace collwatch::analyzer {
namespace {

struct KindName {
  FindingKind kind;
  std::string_view name;
};
constexpr KindName kKindNames[] = {
    {FindingKind::kPathDivergence, "PATH_DIVERGENCE"},
    {FindingKind::kSkippedReduceScatter, "SKIPPED_REDUCE_SCATTER"},
    {FindingKind::kSignatureMismatch, "SIGNATURE_MISMATCH"},
    {FindingKind::kOpMismatch, "OP_MISMATCH"},
    {FindingKind::kNotJoined, "NOT_JOINED"},
    {FindingKind::kTransportStall, "TRANSPORT_STALL"},
    {FindingKind::kCommInitStall, "COMM_INIT_STALL"},
    {FindingKind::kRankLost, "RANK_LOST"},
};

}  // namespace

std::string_view FindingKindName(FindingKind kind) {
  for (const KindName& entry : kKindNames) {
    if (entry.kind == kind) return entry.name;
  }
  return "UNKNOWN";
}

std::optional<FindingKind> ParseFindingKind(std::string_view name) {
  for (const KindName& entry : kKindNames) {
    if (entry.name == name) return entry.kind;
  }
  return std::nullopt;
}

std::string RankListText(const std::vector<int32_t>& unsorted, size_t max_parts, int32_t nranks) {
  std::vector<int32_t> ranks = unsorted;
  std::sort(ranks.begin(), ranks.end());
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

std::string CommText(uint64_t comm_id) { return absl::StrFormat("comm %08x", comm_id >> 32); }

}  // namespace collwatch::analyzer
