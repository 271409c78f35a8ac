// Stalls that end: a stall finding whose late ranks arrive later (or whose collective
// completes, or whose creation returns) is a straggler, reworded in place and left out of
// the verdict; a wait as long that no pass saw open is reported the same way afterwards
// (post-mortem). And whether the ranks a stall waits for are at work, for --kill-on-hang.
// Threading: see analyzer.h (single-threaded).
#include <algorithm>

#include "analyzer/analyzer.h"
#include "analyzer/finding_evidence.h"
#include "analyzer/finding_text.h"
#include "analyzer/liveness.h"

namespace collwatch::analyzer {

std::vector<size_t> Analyzer::TakeResolved() {
  std::vector<size_t> taken;
  taken.swap(resolved_);
  return taken;
}

void Analyzer::Resolve(size_t index, int64_t resolved_ns) {
  Finding& finding = findings_[index];
  StallResolution resolution;
  resolution.resolved_ns = resolved_ns;
  resolution.resolved_after_s = std::max(0.0, Seconds(resolved_ns - finding.found_ns));
  resolution.lag_s = std::max(0.0, Seconds(resolved_ns - finding.first_bad_ns));
  finding.resolution = resolution;
  WriteWords(&finding);
  resolved_.push_back(index);
}

void Analyzer::CheckResolved(const Comm& comm, CommProgress& progress) {
  if (progress.open_stall) {
    const size_t index = *progress.open_stall;
    const Finding& finding = findings_[index];
    const uint64_t seq = finding.seq;
    int64_t resolved_ns = 0;
    bool resolved = true;
    if (finding.kind == FindingKind::kNotJoined) {
      // Every late rank entered the collective: when the last of them did.
      for (int32_t rank : finding.lagging_ranks) {
        const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
        resolved = resolved && entry.present && entry.progress.entered() >= seq;
        if (!resolved) break;
        if (const Call* call = model_.Collective(comm, rank, seq)) resolved_ns = std::max(resolved_ns, call->enter_ns);
      }
    } else {
      // Every rank completed it: when the last did.
      for (int32_t rank = 0; rank < static_cast<int32_t>(comm.ranks.size()) && resolved; ++rank) {
        const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
        resolved = entry.present && entry.progress.completed() >= seq;
        if (!resolved) break;
        if (const Call* call = model_.Collective(comm, rank, seq)) resolved_ns = std::max(resolved_ns, call->complete_ns);
      }
    }
    if (resolved && !progress.diverged) {
      progress.open_stall.reset();
      // The records that tell when are kept until every rank completed the collective;
      // without them, the finding's own time is the honest floor.
      Resolve(index, std::max(resolved_ns, finding.found_ns));
      // The collective the late ranks joined may still stall in transport: that is a new
      // finding at the same seq.
      if (finding.kind == FindingKind::kNotJoined) progress.stall_reported_seq = seq - 1;
    }
  }
  if (progress.open_init_stall) {
    int64_t returned_ns = 0;
    for (const CommRank& entry : comm.ranks) {
      if (!entry.present || entry.init_call == kNoCall) return;
      const Call& init = model_.call(entry.process, entry.init_call);
      if (!init.returned()) return;
      returned_ns = std::max(returned_ns, init.return_ns);
    }
    const size_t index = *progress.open_init_stall;
    progress.open_init_stall.reset();
    Resolve(index, std::max(returned_ns, findings_[index].found_ns));
  }
}

void Analyzer::ReportPastStraggler(const Comm& comm, CommProgress& progress, uint64_t seq, double threshold_s,
                                   std::vector<Finding>* out) {
  int64_t first_enter = INT64_MAX;
  const Call* sample = nullptr;
  for (int32_t rank = 0; rank < static_cast<int32_t>(comm.ranks.size()); ++rank) {
    const Call* call = model_.Collective(comm, rank, seq);
    if (call == nullptr || call->enter_ns >= first_enter) continue;
    first_enter = call->enter_ns;
    sample = call;
  }
  if (sample == nullptr) return;
  // The ranks that were not there once the others had waited a threshold: the late ones.
  const int64_t found_ns = first_enter + static_cast<int64_t>(threshold_s * kNsPerS);
  std::vector<int32_t> entered, lagging;
  int64_t last_arrival = found_ns;
  for (int32_t rank = 0; rank < static_cast<int32_t>(comm.ranks.size()); ++rank) {
    const Call* call = model_.Collective(comm, rank, seq);
    if (call == nullptr) continue;
    if (call->enter_ns < found_ns) {
      entered.push_back(rank);
    } else {
      lagging.push_back(rank);
      last_arrival = std::max(last_arrival, call->enter_ns);
    }
  }
  if (lagging.empty()) return;
  Finding finding;
  finding.kind = FindingKind::kNotJoined;
  finding.comm_id = comm.id;
  finding.comm_size = comm.nranks;
  finding.seq = seq;
  finding.regions = RegionsOf(model_, std::vector<const Call*>{sample});
  finding.lagging_ranks = lagging;
  finding.rank_classes = {RankClass{entered, ""}, RankClass{lagging, ""}};
  finding.first_bad_ns = first_enter;
  finding.found_ns = found_ns;
  StallFacts facts;
  facts.call = FactsOf(model_, *sample);
  facts.entered = entered;
  facts.threshold_s = threshold_s;
  facts.expected_s = expected_.JoinS();
  facts.waited_s = threshold_s;
  // How the late processes were doing then is not known afterwards: no `processes`.
  finding.evidence = std::move(facts);
  progress.late_reported_seq = seq;
  Emit(std::move(finding), out);
  Resolve(findings_.size() - 1, last_arrival);
  // Emit handed out the open form; the caller gets the resolved one (TakeResolved too).
  out->back() = findings_.back();
}

bool Analyzer::LateRanksAtWork(const Finding& finding, int64_t now_ns) const {
  // A look older than this says nothing about now (the agent looks every 250 ms).
  constexpr double kFreshLookS = 2;
  if (finding.resolution || finding.lagging_ranks.empty()) return false;
  if (finding.kind != FindingKind::kNotJoined && finding.kind != FindingKind::kCommInitStall) return false;
  const Comm* comm = model_.FindComm(finding.comm_id);
  if (comm == nullptr) return false;
  for (int32_t rank : finding.lagging_ranks) {
    if (rank < 0 || static_cast<size_t>(rank) >= comm->ranks.size()) return false;
    const std::optional<ProcessId> id = ProcessOfRank(*comm, rank);
    if (!id) return false;
    const Process& process = model_.process(*id);
    const ProcessSample& look = process.sample;
    const bool runs = look.state == ProcessState::kRunning || look.state == ProcessState::kSleeping;
    const bool fresh = look.sampled_ns != 0 && Seconds(now_ns - look.sampled_ns) < kFreshLookS;
    // A call waiting for its return or completion: inside NCCL (a GPU rank's host spins
    // in a synchronisation there, CPU advancing, and works on nothing).
    const bool in_nccl = !process.pending.empty();
    if (!runs || !fresh || !look.cpu_advancing || in_nccl || collwatch::IsLost(LivenessOf(process.status, look))) {
      return false;
    }
  }
  return true;
}

}  // namespace collwatch::analyzer
