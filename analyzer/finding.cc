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

std::string CommText(uint64_t comm_id) { return absl::StrFormat("comm %08x", comm_id >> 32); }

}  // namespace collwatch::analyzer
