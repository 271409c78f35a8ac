// What a report says of the job as a whole: its ranks, how each ended and where it last
// was in NCCL, the ranks that never reported, the gaps in the data (report.h).
#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analyzer/finding_words.h"
#include "analyzer/liveness.h"
#include "analyzer/process_ranks.h"
#include "analyzer/report.h"

namespace collwatch::analyzer {
namespace {

// "all-reduce 4 B (1 x float32) sum, seq 3 of comm 3f2a9c01"
std::string LastCallText(const JobModel& model, const Call& call) {
  std::string text;
  const Comm* comm = model.CommOf(call);
  if (ring::IsCollective(call.fn) || ring::IsP2p(call.fn)) {
    text = DescribeCall(model, call);
    if (comm != nullptr) absl::StrAppend(&text, ", seq ", call.seq, " of ", CommText(comm->id));
  } else {
    text = std::string(OpName(call.fn));
    if (comm != nullptr && comm->id != 0) absl::StrAppend(&text, " of ", CommText(comm->id));
  }
  if (!call.returned()) absl::StrAppend(&text, ", never returned");
  return text;
}

}  // namespace

ReportInfo DescribeJob(const JobModel& model) {
  ReportInfo info;
  info.processes = static_cast<int>(model.process_count());
  info.communicators = static_cast<int>(model.comms().size());
  for (const std::vector<int32_t>& ranks : RanksOfProcesses(model)) info.rank_count += HeldRankCount(ranks);
  for (size_t i = 0; i < model.process_count(); ++i) {
    const auto id = static_cast<ProcessId>(i);
    const Process& process = model.process(id);
    info.calls += process.calls.size();
    info.lost_records += process.lost_records;
    if (!IsRankProcess(model, id)) continue;
    RankEnding rank;
    rank.global_rank = process.info.global_rank;
    rank.pid = process.info.pid;
    rank.host = process.info.host;
    rank.end = EndOf(process);
    rank.ended_text = EndedText(process);
    rank.failed = EndedBadly(model, id);
    if (process.observed_only) rank.not_recorded = process.no_ring_why;
    if (rank.end == ProcessEnd::kExited && process.exit_recorded) rank.exit_code = process.exit_code;
    if (const uint32_t last_index = JobModel::LastTellingCall(process); last_index != kNoCall) {
      const Call* last = &process.calls[last_index];
      rank.last_call = LastCallText(model, *last);
      if (const Comm* comm = model.CommOf(*last); comm != nullptr && ring::IsCollective(last->fn)) {
        rank.last_collective_comm = comm->id;
        rank.last_collective_seq = last->seq;
      }
    }
    if (rank.end == ProcessEnd::kExited || rank.end == ProcessEnd::kKilledOrCrashed) {
      rank.ended_ns = std::max(process.heartbeat_ns, process.last_record_ns);
    }
    info.ranks.push_back(std::move(rank));
  }
  info.missing_ranks = MissingJobRanks(model);
  if (!info.missing_ranks.empty()) info.world_size = JobWorldSize(model);
  // Region names and call paths that could not be read: a gap in what was compared.
  for (size_t i = 0; i < model.process_count(); ++i) {
    if (std::string gap = DamagedLabelsText(model.process(static_cast<ProcessId>(i))); !gap.empty()) {
      info.data_gaps.push_back(std::move(gap));
    }
  }
  // By RANK, those without one last.
  std::sort(info.ranks.begin(), info.ranks.end(), [](const RankEnding& a, const RankEnding& b) {
    return std::make_tuple(a.global_rank < 0, a.global_rank, a.host, a.pid) <
           std::make_tuple(b.global_rank < 0, b.global_rank, b.host, b.pid);
  });
  return info;
}

void NoteStoppedByCollwatch(ReportInfo* info) {
  info->stopped_by_collwatch = true;
  for (RankEnding& rank : info->ranks) {
    if (rank.end != ProcessEnd::kRunning) continue;
    rank.end = ProcessEnd::kStoppedByCollwatch;
    if (rank.not_recorded.empty()) rank.ended_text = std::string(ProcessEndName(rank.end));
  }
}

std::string WhoEndedFirstText(const ReportInfo& info, const std::vector<Finding>& findings) {
  // Two ends closer than this are one moment to the rings: a heartbeat every 100 ms, and
  // the nodes' clocks apart by as much again.
  constexpr int64_t kIndistinctNs = 250'000'000;
  if (info.ranks.size() < 2) return "";
  std::vector<const RankEnding*> ended;
  for (const RankEnding& rank : info.ranks) {
    if (!rank.failed || rank.ended_ns == 0) return "";
    ended.push_back(&rank);
  }
  std::stable_sort(ended.begin(), ended.end(),
                   [](const RankEnding* a, const RankEnding* b) { return a->ended_ns < b->ended_ns; });
  auto name = [](const RankEnding& rank) {
    return rank.global_rank >= 0 ? absl::StrCat("rank ", rank.global_rank)
                                 : absl::StrFormat("pid %d on %s", rank.pid, rank.host);
  };
  const RankEnding& first = *ended[0];
  const double spread_s = static_cast<double>(ended.back()->ended_ns - first.ended_ns) / 1e9;
  if (ended[1]->ended_ns - first.ended_ns < kIndistinctNs) {
    size_t together = 1;
    while (together < ended.size() && ended[together]->ended_ns - first.ended_ns < kIndistinctNs) ++together;
    if (together == ended.size()) {
      // Too close in time; NCCL's progress may still tell: ranks that never entered the
      // collective the others were in had stopped first.
      const bool schedules_agree = std::all_of(findings.begin(), findings.end(), [](const Finding& finding) {
        return finding.kind == FindingKind::kRankLost || finding.kind == FindingKind::kNotJoined;
      });
      uint64_t lowest = UINT64_MAX, highest = 0;
      for (const RankEnding* rank : ended) {
        if (!schedules_agree) break;
        if (rank->last_collective_comm == 0 || rank->last_collective_comm != first.last_collective_comm) {
          lowest = highest = 0;
          break;
        }
        lowest = std::min(lowest, rank->last_collective_seq);
        highest = std::max(highest, rank->last_collective_seq);
      }
      if (schedules_agree && lowest < highest) {
        std::vector<std::string> behind;
        for (const RankEnding* rank : ended) {
          if (rank->last_collective_seq == lowest) behind.push_back(name(*rank));
        }
        const std::string who = absl::StrJoin(behind, ", ");
        return absl::StrFormat("every rank ended within %.2f s, too close for the records to order, but %s stopped "
                               "first in NCCL: the others were in seq %d of %s, which %s never entered (last "
                               "collective: seq %d); the rest followed, as a launcher (torchrun) stops the rest when "
                               "one fails: look at %s",
                               spread_s, who, highest, CommText(first.last_collective_comm), who, lowest, who);
      }
      return absl::StrFormat("every rank ended within %.2f s: the records cannot tell which was first", spread_s);
    }
    std::vector<std::string> names;
    for (size_t i = 0; i < together; ++i) names.push_back(name(*ended[i]));
    return absl::StrFormat("every rank ended: %s first, within %.2f s (the records cannot tell which of them was "
                           "first), the other %d up to %.2f s later, as a launcher (torchrun) stops the rest when "
                           "one fails",
                           absl::StrJoin(names, ", "),
                           static_cast<double>(ended[together - 1]->ended_ns - first.ended_ns) / 1e9,
                           ended.size() - together, spread_s);
  }
  const std::string after_first = absl::StrFormat("%.2f", static_cast<double>(ended[1]->ended_ns - first.ended_ns) / 1e9);
  const std::string after_last = absl::StrFormat("%.2f", spread_s);
  return absl::StrFormat("every rank ended: %s first (%s), the other %d followed %s s later, as a launcher (torchrun) "
                         "stops the rest when one fails: look at %s",
                         name(first), first.ended_text, ended.size() - 1,
                         after_first == after_last ? after_first : absl::StrCat(after_first, " to ", after_last),
                         name(first));
}

}  // namespace collwatch::analyzer
