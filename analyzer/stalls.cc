// Stall detection: a collective some ranks have not joined (NOT_JOINED), one every rank
// entered that does not complete (TRANSPORT_STALL, or RANK_NOT_RUNNING when a rank's process
// cannot run), communicator creation waiting for
// ranks (COMM_INIT_STALL), and ranks whose process ended (RANK_LOST); with how each rank
// named is doing, for finding_text.cc to word.
#include <algorithm>

#include "analyzer/analyzer.h"
#include "analyzer/finding_evidence.h"
#include "analyzer/liveness.h"
#include "analyzer/process_ranks.h"

namespace collwatch::analyzer {
namespace {

// The process ended, or stopped reporting with nothing to say it is still there
// (process/process_info.h has the one rule).
bool IsLost(const Process& process) { return collwatch::IsLost(LivenessOf(process.status, process.sample)); }

// Whether a rank that entered collective `seq` saw it complete, successfully and within the
// stall threshold, where completing needs every rank's data (all-reduce, all-gather,
// reduce-scatter, all-to-all; a broadcast's root or a reduce's senders can finish alone):
// then the ranks that seem not to have joined did, in time, and only their records are
// missing here (a collector restarted mid-job gets the resends of some ranks only). A
// completion after the threshold is no such proof: an abort ends a waiting call too.
bool JoinedInTime(const JobModel& model, const Comm& comm, uint64_t seq, const std::vector<int32_t>& entered,
                  int64_t first_enter_ns, double threshold_s) {
  for (int32_t rank : entered) {
    const Call* call = model.Collective(comm, rank, seq);
    if (call == nullptr || !call->completed() || call->result != 0) continue;
    const bool needs_every_rank = call->fn == ring::ApiFn::kAllReduce || call->fn == ring::ApiFn::kAllGather ||
                                  call->fn == ring::ApiFn::kReduceScatter || call->fn == ring::ApiFn::kAlltoAll;
    if (needs_every_rank && Seconds(call->complete_ns - first_enter_ns) < threshold_s) return true;
  }
  return false;
}

// The latest earlier collectives of `comm` (ascending, at most 3) with the signature of
// `waited` (the call at `seq`) that `lost` issued too, each rank the same call. None where
// a lost rank has not completed every collective before `seq`: it then stopped inside one.
std::vector<uint64_t> SameCallBefore(const JobModel& model, const Comm& comm, uint64_t seq, const Call& waited,
                                     int32_t waiting_rank, const std::vector<int32_t>& lost) {
  constexpr size_t kWanted = 3;
  constexpr uint64_t kLookBack = 4096;  // collectives; a step of a large model has hundreds
  for (int32_t rank : lost) {
    const ProgressFrontier& progress = comm.ranks[static_cast<size_t>(rank)].progress;
    if (progress.entered() + 1 != seq || progress.completed() + 1 != seq) return {};
  }
  const Fingerprint signature = FingerprintOf(waited);
  std::vector<uint64_t> found;
  for (uint64_t earlier = seq - 1; earlier >= 1 && seq - earlier <= kLookBack && found.size() < kWanted; --earlier) {
    const Call* call = model.Collective(comm, waiting_rank, earlier);
    if (call == nullptr) break;  // forgotten (bounded history) or a gap
    if (!FingerprintOf(*call).SameSignature(signature)) continue;
    bool everyone = true;
    for (int32_t rank : lost) {
      const Call* theirs = model.Collective(comm, rank, earlier);
      everyone = everyone && theirs != nullptr && FingerprintOf(*theirs).SameSignature(signature);
    }
    if (everyone) found.push_back(earlier);
  }
  std::reverse(found.begin(), found.end());
  return found;
}

}  // namespace

std::optional<ProcessId> Analyzer::ProcessOfRank(const Comm& comm, int32_t rank) const {
  const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
  if (entry.present) return entry.process;
  // Not reported on this communicator: for one that spans the job, the process whose RANK
  // is this rank (seen from outside before its first NCCL call, or busy elsewhere).
  for (ProcessId p = 0; p < model_.process_count(); ++p) {
    const ProcessInfo& info = model_.process(p).info;
    if (info.global_rank == rank && info.world_size == comm.nranks && IsRankProcess(model_, p)) return p;
  }
  return std::nullopt;
}

void Analyzer::DescribeRanks(const Comm& comm, const std::vector<int32_t>& ranks, int64_t now_ns,
                             Finding* finding) const {
  constexpr size_t kMaxReports = 16;
  for (int32_t rank : ranks) {
    if (finding->processes.size() == kMaxReports) break;
    if (const std::optional<ProcessId> process = ProcessOfRank(comm, rank)) {
      finding->processes.push_back(DescribeProcess(model_, *process, rank, now_ns));
    }
  }
}

void Analyzer::CheckStall(const Comm& comm, CommProgress& progress, const std::optional<Frontier>& frontier,
                          int64_t now_ns, bool final_pass, std::vector<Finding>* out) {
  if (progress.diverged) return;
  if (!frontier || frontier->seq <= progress.stall_reported_seq) return;
  const uint64_t seq = frontier->seq;
  const std::vector<int32_t>& entered = frontier->entered;
  const std::vector<int32_t>& lagging = frontier->lagging;
  const int64_t first_enter = frontier->first_enter_ns;
  const int64_t last_enter = frontier->last_enter_ns;
  const Call* sample = frontier->sample;

  Finding finding;
  finding.comm_id = comm.id;
  finding.comm_size = comm.nranks;
  finding.seq = seq;
  finding.regions = RegionsOf(model_, std::vector<const Call*>{sample});
  StallFacts facts;
  facts.call = FactsOf(model_, *sample);
  facts.entered = entered;
  facts.threshold_s = frontier->threshold_s;
  facts.expected_s = frontier->expected_s;

  const double threshold = frontier->threshold_s;
  if (!lagging.empty()) {
    if (JoinedInTime(model_, comm, seq, entered, first_enter, threshold)) return;
    // Ranks whose process ended before the others had waited a threshold: lost, not late.
    std::vector<int32_t> lost;
    int64_t lost_at = 0;
    for (int32_t rank : lagging) {
      const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
      if (!entry.present) continue;
      const Process& process = model_.process(entry.process);
      if (!IsLost(process)) continue;
      const int64_t ended = std::max(process.heartbeat_ns, process.last_record_ns);
      if (Seconds(ended - first_enter) < threshold) {
        lost.push_back(rank);
        lost_at = std::max(lost_at, ended);
      }
    }
    if (!lost.empty()) {
      finding.kind = FindingKind::kRankLost;
      finding.lagging_ranks = lost;
      finding.first_bad_ns = std::max(first_enter, lost_at);
      finding.found_ns = final_pass ? finding.first_bad_ns : now_ns;
      for (int32_t rank : lost) {
        facts.ranks.push_back(StalledRankOf(model_, comm, rank, comm.ranks[static_cast<size_t>(rank)].process, now_ns));
      }
      facts.lost_place = JobPlaceOf(model_, comm, lost);
      facts.same_call_before = SameCallBefore(model_, comm, seq, *sample, entered.front(), lost);
      for (int32_t rank : lagging) {
        if (std::find(lost.begin(), lost.end(), rank) == lost.end()) facts.also_missing.push_back(rank);
      }
      // Where the waiting ranks wait: the code of a call the lost ranks may have left out.
      AddCallPath(entered, facts.call, &finding);
      DescribeRanks(comm, lost, now_ns, &finding);
      finding.evidence = std::move(facts);
      progress.stall_reported_seq = seq;
      Emit(std::move(finding), out);
      return;
    }
    const double age = Seconds(now_ns - first_enter);
    if (age < threshold) return;
    bool echo = true;
    for (int32_t rank : lagging) {
      const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
      echo = echo && entry.present && BlockedInDivergedComm(entry.process);
    }
    if (echo) return;
    finding.kind = FindingKind::kNotJoined;
    finding.lagging_ranks = lagging;
    finding.rank_classes = {RankClass{entered, ""}, RankClass{lagging, ""}};
    // Where the waiting ranks wait; the late ones have no call here to name.
    AddCallPath(entered, facts.call, &finding);
    finding.first_bad_ns = first_enter;
    finding.found_ns = final_pass ? first_enter + static_cast<int64_t>(threshold * kNsPerS) : now_ns;
    facts.waited_s = age;
    for (int32_t rank : lagging) facts.ranks.push_back(StalledRankOf(model_, comm, rank, ProcessOfRank(comm, rank), now_ns));
    DescribeRanks(comm, lagging, now_ns, &finding);
    finding.evidence = std::move(facts);
    progress.stall_reported_seq = seq;
    progress.late_reported_seq = seq;
    Emit(std::move(finding), out);
    progress.open_stall = findings_.size() - 1;
    return;
  }

  // Everyone entered: the collective is running, or the transport is stuck.
  if (sample->completed()) return;
  const double age = Seconds(now_ns - last_enter);
  if (age < threshold) return;
  for (int32_t rank : entered) {
    if (BlockedInDivergedComm(comm.ranks[static_cast<size_t>(rank)].process) &&
        model_.Collective(comm, rank, seq) != nullptr && model_.Collective(comm, rank, seq)->completed()) {
      return;  // an echo of a divergence elsewhere
    }
  }
  finding.rank_classes = {RankClass{entered, ""}};
  AddCallPath(entered, facts.call, &finding);
  finding.first_bad_ns = last_enter;
  finding.found_ns = final_pass ? last_enter + static_cast<int64_t>(threshold * kNsPerS) : now_ns;
  facts.waited_s = age;
  // A rank whose process cannot run (stopped, stuck in I/O, ended) holds the collective
  // up: that is the cause, whatever the network does.
  std::vector<int32_t> troubled;
  for (int32_t rank : entered) {
    StalledRank stalled = StalledRankOf(model_, comm, rank, comm.ranks[static_cast<size_t>(rank)].process, now_ns);
    if (stalled.trouble == ProcessTrouble::kNone) continue;
    troubled.push_back(rank);
    facts.ranks.push_back(std::move(stalled));
  }
  // The kind says what the words say: a process that cannot run, or below the ranks.
  finding.kind = troubled.empty() ? FindingKind::kTransportStall : FindingKind::kRankNotRunning;
  finding.lagging_ranks = troubled;
  DescribeRanks(comm, troubled.empty() ? entered : troubled, now_ns, &finding);
  finding.evidence = std::move(facts);
  progress.stall_reported_seq = seq;
  Emit(std::move(finding), out);
  progress.open_stall = findings_.size() - 1;
}

void Analyzer::CheckInit(const Comm& comm, CommProgress& progress, int64_t now_ns, std::vector<Finding>* out) {
  if (progress.init_stall_reported) return;
  std::vector<int32_t> waiting, missing;
  int64_t first_enter = INT64_MAX;
  for (int32_t rank = 0; rank < static_cast<int32_t>(comm.ranks.size()); ++rank) {
    const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
    if (!entry.present || entry.init_call == kNoCall) {
      missing.push_back(rank);
      continue;
    }
    const Call& init = model_.call(entry.process, entry.init_call);
    if (!init.returned()) {
      waiting.push_back(rank);
      first_enter = std::min(first_enter, init.enter_ns);
    }
  }
  if (waiting.empty()) return;
  const double age = Seconds(now_ns - first_enter);
  if (age < options_.stall_after_s) return;
  progress.init_stall_reported = true;
  Finding finding;
  finding.kind = FindingKind::kCommInitStall;
  finding.comm_id = comm.id;
  finding.comm_size = comm.nranks;
  finding.lagging_ranks = missing;
  finding.rank_classes = {RankClass{waiting, ""}};
  finding.first_bad_ns = first_enter;
  finding.found_ns = now_ns;
  StallFacts facts;
  facts.entered = waiting;
  facts.waited_s = age;
  facts.ranks_present = comm.ranks_present;
  // Missing ranks whose process is there: alive (and maybe stopped) before their call.
  for (int32_t rank : missing) {
    const std::optional<ProcessId> process = ProcessOfRank(comm, rank);
    if (!process || IsLost(model_.process(*process))) continue;
    facts.ranks.push_back(StalledRankOf(model_, comm, rank, process, now_ns));
  }
  DescribeRanks(comm, missing.empty() ? waiting : missing, now_ns, &finding);
  finding.evidence = std::move(facts);
  Emit(std::move(finding), out);
  progress.open_init_stall = findings_.size() - 1;
}

}  // namespace collwatch::analyzer
