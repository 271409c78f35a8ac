// The analyzer's core: the passes over every communicator, agreement on each collective,
// the expected-time model, the frontier of progress, and bounded history. Divergences are
// explained in divergence.cc (classified in classification.cc), stalls in stalls.cc,
// point-to-point pairs in p2p_matching.cc.
#include "analyzer/analyzer.h"

#include <algorithm>
#include <map>

#include "analyzer/finding_evidence.h"
#include "analyzer/finding_text.h"
#include "analyzer/finding_words.h"
#include "analyzer/rank_ranges.h"

namespace collwatch::analyzer {

double Analyzer::StallThresholdS(const Comm& /*comm*/, double bytes) const {
  return std::max(options_.stall_after_s, options_.stall_multiple * expected_.TransferS(bytes));
}

void Analyzer::Emit(Finding finding, std::vector<Finding>* out) {
  WriteWords(&finding);
  finding.detect_latency_s = std::max(0.0, Seconds(finding.found_ns - finding.first_bad_ns));
  findings_.push_back(finding);
  out->push_back(std::move(finding));
}

std::vector<Finding> Analyzer::Analyze(int64_t now_ns, bool final_pass) {
  std::vector<Finding> found;
  const std::vector<Comm>& comms = model_.comms();
  if (progress_.size() < comms.size()) progress_.resize(comms.size());
  for (size_t i = 0; i < comms.size(); ++i) {
    const Comm& comm = comms[i];
    CommProgress& progress = progress_[i];
    if (comm.nranks <= 0) continue;
    CheckAgreement(comm, progress, now_ns, final_pass, &found);
    CheckP2p(comm, progress, now_ns, final_pass, &found);
    CheckResolved(comm, progress);
    LearnTimes(comm, progress, &found);
  }
  // Stalls after every agreement check: a divergence anywhere explains stalls elsewhere.
  // The communicator whose stall began first goes first: a rank held there stops arriving
  // everywhere else (a CUDA graph's replay the others never run blocks its rank's host at
  // the next synchronisation, and the others then wait for that rank on the host calls).
  std::vector<std::optional<Frontier>>& frontiers = stall_frontiers_scratch_;
  frontiers.assign(comms.size(), std::nullopt);
  std::vector<std::pair<int64_t, size_t>>& order = stall_order_scratch_;
  order.clear();
  for (size_t i = 0; i < comms.size(); ++i) {
    if (comms[i].nranks <= 0) continue;
    frontiers[i] = FrontierOf(comms[i]);
    const std::optional<Frontier>& frontier = frontiers[i];
    const int64_t began = !frontier ? INT64_MAX
                          : frontier->lagging.empty() ? frontier->last_enter_ns
                                                      : frontier->first_enter_ns;
    order.emplace_back(began, i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  // Ranks waiting for each other across communicators are one finding, not a stall each.
  CheckWaitCycles(frontiers, now_ns, final_pass, &found);
  for (const auto& [began, i] : order) {
    CheckInit(comms[i], progress_[i], now_ns, &found);
    CheckStall(comms[i], progress_[i], frontiers[i], now_ns, final_pass, &found);
    CheckP2pStall(comms[i], progress_[i], now_ns, final_pass, &found);
  }
  CheckOrderInversions(now_ns, final_pass, &found);
  if (options_.bounded_history) ForgetSettledHistory();
  return found;
}

bool Analyzer::WantsStacks(const Finding& finding) {
  return finding.kind == FindingKind::kNotJoined || finding.kind == FindingKind::kTransportStall ||
         finding.kind == FindingKind::kRankNotRunning || finding.kind == FindingKind::kWaitCycle ||
         finding.kind == FindingKind::kCommInitStall;
}

std::vector<std::pair<ProcessId, std::vector<int32_t>>> Analyzer::ProcessesNamedBy(const Finding& finding) const {
  std::map<ProcessId, std::vector<int32_t>> named;
  if (const Comm* comm = model_.FindComm(finding.comm_id)) {
    for (size_t r = 0; r < comm->ranks.size(); ++r) {
      if (comm->ranks[r].present) named[comm->ranks[r].process].push_back(static_cast<int32_t>(r));
    }
  }
  for (const ProcessReport& report : finding.processes) {
    const std::optional<ProcessId> process = model_.FindProcess(report.host, report.pid);
    if (!process) continue;
    std::vector<int32_t>& ranks = named[*process];
    if (report.rank >= 0 && std::find(ranks.begin(), ranks.end(), report.rank) == ranks.end()) {
      ranks.push_back(report.rank);
    }
  }
  return {named.begin(), named.end()};
}

std::vector<size_t> Analyzer::AttachStacks() {
  // Clocks of the collector and of the agents that took the stacks may differ this much.
  constexpr int64_t kClockSlackNs = 2'000'000'000;
  std::vector<size_t> changed;
  for (size_t i = 0; i < findings_.size(); ++i) {
    Finding& finding = findings_[i];
    if (!WantsStacks(finding)) continue;
    FindingStacks stacks;
    stacks.complete = true;
    std::vector<RankStacks> taken;
    for (auto& [process, ranks] : ProcessesNamedBy(finding)) {
      const Process& of = model_.process(process);
      if (of.stacks_taken_ns == 0 || of.stacks_taken_ns + kClockSlackNs < finding.found_ns) {
        // (A process seen only from outside has no agent stream to answer.)
        if (!of.observed_only) stacks.complete = false;
        continue;
      }
      stacks.taken_ns = std::max(stacks.taken_ns, of.stacks_taken_ns);
      taken.push_back(RankStacks{ranks, of.stacks});
    }
    if (taken.empty()) continue;
    stacks.classes = MergeStacks(taken);
    if (finding.stacks == stacks) continue;
    finding.stacks = std::move(stacks);
    changed.push_back(i);
  }
  return changed;
}

int32_t Analyzer::HistoryKeeper(const Comm& comm) {
  for (size_t rank = 0; rank < comm.ranks.size(); ++rank) {
    if (comm.ranks[rank].present) return static_cast<int32_t>(rank);
  }
  return -1;
}

// What each check still reads, per communicator, from the lowest collective on:
// CheckAgreement from agreed_seq + 1; LearnTimes from timed_seq + 1; FrontierOf and stalls
// from the lowest completion frontier (ProgressFrontier) + 1; a divergence
// explanation from agreed_seq + 1, kContextCalls agreed collectives before it on each
// class's representative and, for the schedule template, history_window agreed
// collectives before it on the HistoryKeeper. Below all of these nothing is read again,
// so a rank other than the keeper holds about as many collectives as the ranks are
// apart, not history_window: what bounds memory by ranks x spread at scale (issue 39).
// A diverged communicator is left whole (its ranks are stuck; the finding is out).
// Sends and receives are read once, at the pairing cursor; one waiting for its peer is
// kept through unpaired_p2p_. A process keeps its last kRecentCallsKept calls and, each
// by itself, the older calls a kept entry names, its creation and its pending calls.
void Analyzer::ForgetSettledHistory() {
  const std::vector<Comm>& comms = model_.comms();
  for (CommIndex c = 0; c < comms.size() && c < progress_.size(); ++c) {
    const Comm& comm = comms[c];
    CommProgress& progress = progress_[c];
    if (comm.nranks <= 0 || progress.diverged) continue;
    uint64_t settled = std::min(progress.agreed_seq, progress.timed_seq);
    for (const CommRank& entry : comm.ranks) settled = std::min(settled, entry.present ? entry.progress.completed() : 0);
    auto keep_from = [&](uint64_t agreed_kept) {
      return progress.agreed_seq + 1 > agreed_kept ? std::min(settled + 1, progress.agreed_seq + 1 - agreed_kept) : 1;
    };
    const int32_t keeper = HistoryKeeper(comm);
    const uint64_t keeper_from = keep_from(std::max<uint64_t>(options_.history_window, kContextCalls));
    const uint64_t follower_from = keep_from(kContextCalls);
    for (int32_t rank = 0; rank < static_cast<int32_t>(comm.ranks.size()); ++rank) {
      const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
      if (!entry.present) continue;
      const bool keeps_history = rank == keeper;
      const uint64_t from = keeps_history ? keeper_from : follower_from;
      if (from >= entry.collectives.first() + 1 + (keeps_history ? kForgetChunk : kFollowerForgetChunk)) {
        model_.ForgetCollectivesBefore(c, rank, from);
      }
    }
    for (size_t rank = 0; rank < comm.ranks.size() && rank < progress.p2p_cursor.size(); ++rank) {
      if (progress.p2p_cursor[rank] >= comm.ranks[rank].p2p.first() + kForgetChunk) {
        model_.ForgetP2pBefore(c, static_cast<int32_t>(rank), progress.p2p_cursor[rank]);
      }
    }
  }
  if (next_forget_at_.size() < model_.process_count()) next_forget_at_.resize(model_.process_count(), 0);
  for (ProcessId p = 0; p < model_.process_count(); ++p) {
    const auto& calls = model_.process(p).calls;
    if (calls.stored() < std::max(next_forget_at_[p], 2 * kCallsForgetChunk)) continue;
    std::vector<size_t> waiting_for_peer;
    for (const auto& [key, side] : unpaired_p2p_) {
      if (side.process == p) waiting_for_peer.push_back(side.call);
    }
    model_.ForgetCallsBefore(p, static_cast<uint32_t>(calls.size() - kRecentCallsKept), waiting_for_peer);
    // When little could go (a communicator still held back), the next try waits longer:
    // each pass costs what is stored.
    next_forget_at_[p] = calls.stored() + std::max(kCallsForgetChunk, calls.stored() / 4);
  }
}

void Analyzer::FoldLoadedProcess(ProcessId process) {
  // Only this process has calls not read yet: the others were read once they were in. One
  // folded apart is read from the list its worker made before dropping calls.
  const std::optional<ListedOrder> listed = model_.TakeListedOrder(process);
  ObserveOrder(/*forget_behind=*/false, /*only=*/process, listed ? &*listed : nullptr);
  model_.FoldAgreeingWindows(process);
}

namespace {

// The lowest collective any reporting rank of `comm` still holds a slot for.
uint64_t FirstKeptSeq(const Comm& comm) {
  uint64_t first = UINT64_MAX;
  for (const CommRank& entry : comm.ranks) {
    if (entry.present) first = std::min<uint64_t>(first, entry.FirstHeldSeq());
  }
  return first == UINT64_MAX ? 1 : first;
}

}  // namespace

void Analyzer::CheckAgreement(const Comm& comm, CommProgress& progress, int64_t now_ns, bool final_pass,
                              std::vector<Finding>* out) {
  if (progress.diverged) return;
  // Below every rank's kept history nothing can disagree: not walked one by one (a
  // history that starts at collective 5,000,000, or a damaged sequence number).
  progress.agreed_seq = std::max(progress.agreed_seq, FirstKeptSeq(comm) - 1);
  // Only the ranks that reported are walked (a damaged size can claim 60,000 ranks). Post-
  // mortem, a rank that never reported will not: the others are compared without it.
  std::vector<int32_t>& reporting = reporting_scratch_;
  reporting.clear();
  for (int32_t rank = 0; rank < static_cast<int32_t>(comm.ranks.size()); ++rank) {
    if (comm.ranks[static_cast<size_t>(rank)].present) reporting.push_back(rank);
  }
  const bool absent_ranks_hold = !final_pass && reporting.size() < comm.ranks.size();
  while (true) {
    const uint64_t seq = progress.agreed_seq + 1;
    // Classes first: a whole window whose chains agree on every rank needs no call read.
    // Anything else (a window not yet full, a gap, a region not known, a difference) is
    // decided call by call below, exactly as before.
    if (!absent_ranks_hold && !reporting.empty() && (seq - 1) % kChainWindow == 0 &&
        WindowAgreed(comm, reporting, ChainWindowOf(seq))) {
      progress.agreed_seq = seq - 1 + kChainWindow;
      continue;
    }
    const Call* reference = nullptr;
    bool everyone = !absent_ranks_hold;
    bool mismatch = false;
    for (const int32_t rank : reporting) {
      const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
      if (entry.progress.entered() < seq) {
        everyone = false;
        continue;
      }
      // What the call is, not when: a folded one is read from its reference's.
      const Call* call = model_.CollectiveLike(comm, rank, seq);
      if (call == nullptr) continue;  // lost in the ring: no evidence either way
      if (reference == nullptr) {
        reference = call;
      } else if (const Fingerprint a = FingerprintOf(*call), b = FingerprintOf(*reference); !(a == b)) {
        // A region not known (history cut before its unit's forward call, or its name
        // damaged) is no evidence: it matches any region.
        const bool region_unknown = call->region_unknown || reference->region_unknown;
        if (!(region_unknown && a.SameSignature(b))) mismatch = true;
      }
      // The first known region is what the others' regions are compared with.
      if (reference->region_unknown && !call->region_unknown) reference = call;
    }
    if (mismatch) {
      if (progress.mismatch_seen_ns == 0) progress.mismatch_seen_ns = now_ns;
      const double waited = Seconds(now_ns - progress.mismatch_seen_ns);
      if (!everyone && !final_pass && waited < options_.class_grace_s) return;
      bool wants_more = false;
      Finding finding = ExplainDivergence(comm, seq, now_ns, final_pass, &wants_more);
      // GPU ranks keep enqueueing past the bad collective: a verdict that later calls could
      // still change waits for them, a bounded while, unless no rank can issue any.
      if (wants_more && !final_pass && waited < options_.settle_s && !EveryReportingRankBlocked(comm, seq)) return;
      progress.diverged = true;
      Emit(std::move(finding), out);
      return;
    }
    if (!everyone) return;
    progress.agreed_seq = seq;
  }
}

bool Analyzer::WindowAgreed(const Comm& comm, const std::vector<int32_t>& reporting, uint64_t window) const {
  const uint64_t last_seq = (window + 1) * kChainWindow;
  const WindowChain* reference = nullptr;
  for (const int32_t rank : reporting) {
    const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
    if (entry.progress.entered() < last_seq || !entry.chains.Holds(window)) return false;
    const WindowChain& chain = entry.chains[window];
    if (!chain.usable()) return false;
    if (reference == nullptr) reference = &chain;
    if (chain.chain != reference->chain) return false;
  }
  return true;
}

void Analyzer::ReadRankTimes(const Comm& comm, int32_t first_rank, int32_t end_rank, uint64_t from_seq,
                             uint64_t to_seq, std::vector<CollectiveTimes>* like,
                             std::vector<SeqTimes>* times) const {
  for (int32_t rank = first_rank; rank < end_rank; ++rank) {
    // Read without making folded calls again: every rank's, every collective.
    model_.CollectivesLike(comm, rank, from_seq, to_seq, like);
    for (uint64_t seq = from_seq; seq < to_seq; ++seq) {
      const auto& [call, call_times] = (*like)[seq - from_seq];
      if (call == nullptr) continue;
      // The sample is the highest rank's, as the ranks are read in order.
      (*times)[seq - from_seq].Join(SeqTimes{call_times.enter_ns, call_times.enter_ns, call_times.complete_ns, call});
    }
  }
}

void Analyzer::LearnTimes(const Comm& comm, CommProgress& progress, std::vector<Finding>* out) {
  const auto nranks = static_cast<int32_t>(comm.ranks.size());
  uint64_t completed = progress.agreed_seq;
  for (const CommRank& entry : comm.ranks) completed = std::min(completed, entry.present ? entry.progress.completed() : 0);
  // Read rank by rank over a block of collectives, then fed collective by collective: a
  // rank's calls lie together in memory, one collective's calls across ranks do not.
  constexpr uint64_t kBlock = 256;
  for (uint64_t block = std::max(progress.timed_seq + 1, FirstKeptSeq(comm)); block <= completed; block += kBlock) {
    const uint64_t block_end = std::min(completed + 1, block + kBlock);
    std::vector<SeqTimes>& times = times_scratch_;
    times.assign(block_end - block, SeqTimes{});
    const int32_t ranges = RankRangesFor(options_.read_threads, nranks, block_end - block);
    if (ranges <= 1) {
      ReadRankTimes(comm, 0, nranks, block, block_end, &like_scratch_, &times);
    } else {
      // Joined in rank order: the same minima and maxima, the highest rank's call the sample.
      std::vector<std::vector<SeqTimes>> range_times(static_cast<size_t>(ranges), times);
      ForRankRanges(nranks, ranges, [&](int32_t range, int32_t first_rank, int32_t end_rank) {
        std::vector<CollectiveTimes> like;
        ReadRankTimes(comm, first_rank, end_rank, block, block_end, &like, &range_times[static_cast<size_t>(range)]);
      });
      for (const std::vector<SeqTimes>& part : range_times) {
        for (size_t i = 0; i < times.size(); ++i) times[i].Join(part[i]);
      }
    }
    for (uint64_t seq = block; seq < block_end; ++seq) {
      const auto [first_enter, last_enter, last_complete, sample] = times[seq - block];
      if (last_enter == 0) continue;
      const double bytes = CallBytes(*sample);
      // The join threshold as it stood while this collective waited (FrontierOf's).
      const double join_threshold = std::max(options_.stall_after_s, options_.stall_multiple * expected_.JoinS());
      if (Seconds(last_enter - first_enter) >= join_threshold && seq > progress.late_reported_seq &&
          seq > progress.stall_reported_seq) {
        ReportPastStraggler(comm, progress, seq, join_threshold, out);
      }
      expected_.Observe(bytes, Seconds(last_complete - last_enter), Seconds(last_enter - first_enter));
    }
  }
  progress.timed_seq = std::max(progress.timed_seq, completed);
}

bool Analyzer::EveryReportingRankBlocked(const Comm& comm, uint64_t seq) const {
  for (int32_t rank = 0; rank < static_cast<int32_t>(comm.ranks.size()); ++rank) {
    const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
    if (!entry.present || entry.progress.entered() < seq) continue;
    const Call* latest = model_.Collective(comm, rank, entry.progress.entered());
    if (latest == nullptr || latest->returned()) return false;
  }
  return true;
}

bool Analyzer::BlockedInDivergedComm(ProcessId process_id) const {
  const Process& process = model_.process(process_id);
  const size_t look_back = std::min<size_t>(process.calls.size(), kRecentCallsKept);
  for (size_t i = process.calls.size(); i-- > process.calls.size() - look_back;) {
    if (!process.calls.Holds(i)) continue;  // folded post-mortem: completed
    const Call& call = process.calls[i];
    if (!ring::IsCollective(call.fn) || call.completed()) continue;
    if (call.comm < progress_.size() && progress_[call.comm].diverged) return true;
  }
  return false;
}

std::optional<Analyzer::Frontier> Analyzer::FrontierOf(const Comm& comm) const {
  const auto nranks = static_cast<int32_t>(comm.ranks.size());
  // A collective completed on one rank was joined by all: ranks that never reported (no
  // trace, no dump) are past whatever the reporting ranks completed.
  uint64_t completed = UINT64_MAX;
  for (const CommRank& entry : comm.ranks) {
    if (entry.present) completed = std::min(completed, entry.progress.completed());
  }
  if (completed == UINT64_MAX) completed = 0;
  Frontier frontier;
  frontier.seq = completed + 1;
  for (int32_t rank = 0; rank < nranks; ++rank) {
    const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
    if (entry.present && entry.progress.entered() >= frontier.seq) {
      frontier.entered.push_back(rank);
      if (const Call* call = model_.Collective(comm, rank, frontier.seq)) {
        frontier.first_enter_ns = std::min(frontier.first_enter_ns, call->enter_ns);
        frontier.last_enter_ns = std::max(frontier.last_enter_ns, call->enter_ns);
        frontier.sample = call;
      }
    } else {
      frontier.lagging.push_back(rank);
    }
  }
  if (frontier.entered.empty() || frontier.sample == nullptr) return std::nullopt;
  if (frontier.lagging.empty()) {
    const double bytes = CallBytes(*frontier.sample);
    frontier.expected_s = expected_.TransferS(bytes);
    frontier.threshold_s = StallThresholdS(comm, bytes);
  } else {
    frontier.expected_s = expected_.JoinS();
    frontier.threshold_s = std::max(options_.stall_after_s, options_.stall_multiple * expected_.JoinS());
  }
  return frontier;
}

std::vector<InflightCollective> Analyzer::Inflight() const {
  std::vector<InflightCollective> inflight;
  for (const Comm& comm : model_.comms()) {
    if (comm.nranks <= 0) continue;
    const std::optional<Frontier> frontier = FrontierOf(comm);
    if (!frontier || (frontier->lagging.empty() && frontier->sample->completed())) continue;
    InflightCollective item;
    item.comm_id = comm.id;
    item.seq = frontier->seq;
    item.description = DescribeCall(model_, *frontier->sample);
    item.waiting_for_ranks = !frontier->lagging.empty();
    item.since_ns = item.waiting_for_ranks ? frontier->first_enter_ns : frontier->last_enter_ns;
    item.expected_s = frontier->expected_s;
    item.threshold_s = frontier->threshold_s;
    inflight.push_back(std::move(item));
  }
  return inflight;
}

}  // namespace collwatch::analyzer
