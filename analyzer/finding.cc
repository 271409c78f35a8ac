// Finding kind names, and what a finding's calls add up to. Threading: see finding.h.
#include "analyzer/finding.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analyzer/job_model.h"

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
    {FindingKind::kRankNotRunning, "RANK_NOT_RUNNING"},
    {FindingKind::kWaitCycle, "WAIT_CYCLE"},
    {FindingKind::kOrderInversion, "ORDER_INVERSION"},
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

double CallBytes(const CallFacts& call) { return static_cast<double>(call.count) * DtypeBytes(call.dtype); }

std::vector<std::string> RegionsOf(std::span<const CallFacts> calls) {
  std::vector<std::string> regions;
  for (const CallFacts& call : calls) {
    if (call.region.empty()) continue;
    if (std::find(regions.begin(), regions.end(), call.region) == regions.end()) regions.push_back(call.region);
  }
  return regions;
}

namespace {
// The low half of a replay lane's id (a communicator's own id has these bits by chance
// once in 2^32, as two communicators share their first eight hex digits).
constexpr uint64_t kReplayLaneMark = 0x5e91a7e5;
}  // namespace

uint64_t ReplayLaneOf(uint64_t comm_id) { return (comm_id & ~0xffffffffull) | kReplayLaneMark; }
bool IsReplayLane(uint64_t comm_id) { return (comm_id & 0xffffffffull) == kReplayLaneMark; }

std::string CommText(uint64_t comm_id) {
  if (IsReplayLane(comm_id)) return absl::StrFormat("comm %08x (CUDA graph replays)", comm_id >> 32);
  return absl::StrFormat("comm %08x", comm_id >> 32);
}

}  // namespace collwatch::analyzer
