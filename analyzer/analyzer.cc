// Divergence and stall detection over the job model, and the words of each finding.
#include "analyzer/analyzer.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analyzer/alignment.h"

namespace collwatch::analyzer {
namespace {

using ring::ApiFn;

constexpr double kNsPerS = 1e9;

double Seconds(int64_t ns) { return static_cast<double>(ns) / kNsPerS; }

// Bytes one rank contributes to a collective (count as NCCL defines it).
double CallBytes(const Call& call) { return static_cast<double>(call.count) * DtypeBytes(call.dtype); }

bool IsLost(ProcessStatus status) {
  return status == ProcessStatus::kDead || status == ProcessStatus::kSilent || status == ProcessStatus::kExited;
}

// A reported rank's calls from `seq` on (gaps from lost records skipped), at most `limit`.
std::vector<const Call*> CallsFrom(const JobModel& model, const Comm& comm, int32_t rank, uint64_t seq,
                                   size_t limit) {
  std::vector<const Call*> calls;
  const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
  for (uint64_t s = seq; s <= entry.entered_seq && calls.size() < limit; ++s) {
    if (const Call* call = model.Collective(comm, rank, s)) calls.push_back(call);
  }
  return calls;
}

std::vector<uint64_t> Hashes(const std::vector<const Call*>& calls) {
  std::vector<uint64_t> hashes;
  hashes.reserve(calls.size());
  for (const Call* call : calls) hashes.push_back(HashOf(FingerprintOf(*call)));
  return hashes;
}

std::string RegionOf(const JobModel& model, const Call& call) {
  return call.region == 0 ? "(no NVTX range)" : std::string(model.RegionName(call.region));
}

// Distinct regions of `calls`, in order of first appearance.
std::vector<std::string> RegionsOf(const JobModel& model, const std::vector<const Call*>& calls) {
  std::vector<std::string> regions;
  for (const Call* call : calls) {
    if (call->region == 0) continue;
    std::string name(model.RegionName(call->region));
    if (std::find(regions.begin(), regions.end(), name) == regions.end()) regions.push_back(std::move(name));
  }
  return regions;
}

std::string RegionListText(const std::vector<std::string>& regions, size_t max_names = 6) {
  if (regions.empty()) return "no NVTX range";
  std::vector<std::string> shown(regions.begin(), regions.begin() + static_cast<ptrdiff_t>(std::min(max_names, regions.size())));
  std::string text = absl::StrJoin(shown, ", ");
  if (regions.size() > max_names) absl::StrAppend(&text, " and ", regions.size() - max_names, " more");
  return text;
}

// "5 all-gathers" / "1 reduce-scatter, 2 all-gathers"
std::string OpsText(const std::vector<const Call*>& calls) {
  std::map<std::string, int> by_op;
  std::vector<std::string> order;
  for (const Call* call : calls) {
    std::string op(OpName(call->fn));
    if (by_op[op]++ == 0) order.push_back(op);
  }
  std::vector<std::string> parts;
  for (const std::string& op : order) parts.push_back(absl::StrCat(by_op[op], " ", op, by_op[op] == 1 ? "" : "s"));
  return absl::StrJoin(parts, ", ");
}

std::string RanksText(const std::vector<int32_t>& ranks, int32_t nranks) {
  const std::string list = RankListText(ranks, 8, nranks);
  if (list.rfind("all but ", 0) == 0) return absl::StrCat("all ranks but ", list.substr(8));
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", list);
}

std::string ContextLine(const JobModel& model, char mark, const Call& call) {
  return absl::StrFormat("%c seq %-6d %s", mark, call.seq, DescribeCall(model, call));
}

bool Contains(std::string_view text, std::string_view word) { return text.find(word) != std::string_view::npos; }

// How the two sides of a divergence relate.
struct Relation {
  enum Kind { kInsertedRun, kSubstitution } kind = kSubstitution;
  bool first_inserted = false;         // kInsertedRun: the run belongs to the first side
  std::vector<const Call*> run;        // kInsertedRun: what that side issued and the other did not
  bool from_template = false;          // the run was read off the agreed history
};

// A side's first call, found in the agreed history: the run the history shows between
// `from` and the next `to` is what one side ran and the other skipped.
std::optional<std::vector<const Call*>> TemplateRun(const std::vector<const Call*>& history, uint64_t from,
                                                    uint64_t to, size_t max_run) {
  for (size_t start = history.size(); start-- > 0;) {
    if (HashOf(FingerprintOf(*history[start])) != from) continue;
    for (size_t end = start + 1; end < history.size() && end - start <= max_run; ++end) {
      if (HashOf(FingerprintOf(*history[end])) == to) {
        return std::vector<const Call*>(history.begin() + static_cast<ptrdiff_t>(start),
                                        history.begin() + static_cast<ptrdiff_t>(end));
      }
    }
  }
  return std::nullopt;
}

// The fix for a path divergence, told in the regions' words where they name a vision tower.
std::string PathFix(const std::vector<std::string>& regions) {
  const bool vision = std::any_of(regions.begin(), regions.end(), [](const std::string& region) {
    return Contains(region, "vision") || Contains(region, "image") || Contains(region, "visual") ||
           Contains(region, "patch");
  });
  if (vision) {
    return "the ranks in the vision regions had image batches and the others text-only ones; with ZeRO-3 / "
           "FSDP every rank must gather every unit any rank runs. Give text-only batches a dummy image (zero "
           "pixels, masked out of the loss) so every rank runs the vision tower, or make all ranks agree on "
           "the batch type (rank 0 decides and broadcasts it).";
  }
  return "make the module run on every rank (a dummy input on the ranks that would skip it) or make the "
         "branch decision collectively (rank 0 decides and broadcasts it).";
}

}  // namespace

double Analyzer::StallThresholdS(const Comm& /*comm*/, double bytes) const {
  return std::max(options_.stall_after_s, options_.stall_multiple * expected_.TransferS(bytes));
}

void Analyzer::Emit(Finding finding, std::vector<Finding>* out) {
  // Summaries often open with "ranks ...": a sentence starts with a capital.
  if (!finding.summary.empty()) finding.summary[0] = static_cast<char>(std::toupper(finding.summary[0]));
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
    LearnTimes(comm, progress);
  }
  // Stalls after every agreement check: a divergence anywhere explains stalls elsewhere.
  for (size_t i = 0; i < comms.size(); ++i) {
    if (comms[i].nranks <= 0) continue;
    CheckInit(comms[i], progress_[i], now_ns, &found);
    CheckStall(comms[i], progress_[i], now_ns, final_pass, &found);
  }
  if (options_.bounded_history) ForgetSettledHistory();
  return found;
}

// What each check still reads, per communicator, from the lowest collective on:
// CheckAgreement from agreed_seq + 1; LearnTimes from timed_seq + 1; FrontierOf, stalls
// and the model's completion frontier from the lowest completed_seq + 1; a divergence
// explanation from agreed_seq + 1 and, for the schedule template and its context lines,
// history_window agreed collectives before it. Below all of these nothing is read again.
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
    for (const CommRank& entry : comm.ranks) settled = std::min(settled, entry.present ? entry.completed_seq : 0);
    const uint64_t history = std::max<uint64_t>(options_.history_window, 2);
    const uint64_t keep_from = progress.agreed_seq + 1 > history ? std::min(settled + 1, progress.agreed_seq + 1 - history) : 1;
    if (keep_from >= progress.forgotten_before_seq + kForgetChunk) {
      model_.ForgetCollectivesBefore(c, keep_from);
      progress.forgotten_before_seq = keep_from;
    }
    for (size_t rank = 0; rank < comm.ranks.size() && rank < progress.p2p_cursor.size(); ++rank) {
      if (progress.p2p_cursor[rank] >= comm.ranks[rank].p2p.first() + kForgetChunk) {
        model_.ForgetP2pBefore(c, static_cast<int32_t>(rank), progress.p2p_cursor[rank]);
      }
    }
  }
  if (next_forget_at_.size() < model_.process_count()) next_forget_at_.resize(model_.process_count(), 0);
  for (ProcessId p = 0; p < model_.process_count(); ++p) {
    const WindowedLog<Call>& calls = model_.process(p).calls;
    if (calls.stored() < std::max(next_forget_at_[p], 2 * kForgetChunk)) continue;
    std::vector<size_t> waiting_for_peer;
    for (const auto& [key, side] : unpaired_p2p_) {
      if (side.process == p) waiting_for_peer.push_back(side.call);
    }
    model_.ForgetCallsBefore(p, static_cast<uint32_t>(calls.size() - kRecentCallsKept), waiting_for_peer);
    // When little could go (a communicator still held back), the next try waits longer:
    // each pass costs what is stored.
    next_forget_at_[p] = calls.stored() + std::max(kForgetChunk, calls.stored() / 4);
  }
}

void Analyzer::CheckAgreement(const Comm& comm, CommProgress& progress, int64_t now_ns, bool final_pass,
                              std::vector<Finding>* out) {
  if (progress.diverged) return;
  const auto nranks = static_cast<int32_t>(comm.ranks.size());
  while (true) {
    const uint64_t seq = progress.agreed_seq + 1;
    const Call* reference = nullptr;
    bool everyone = true;
    bool mismatch = false;
    for (int32_t rank = 0; rank < nranks; ++rank) {
      const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
      if (!entry.present || entry.entered_seq < seq) {
        everyone = false;
        continue;
      }
      const Call* call = model_.Collective(comm, rank, seq);
      if (call == nullptr) continue;  // lost in the ring: no evidence either way
      if (reference == nullptr) {
        reference = call;
      } else if (!(FingerprintOf(*call) == FingerprintOf(*reference))) {
        mismatch = true;
      }
    }
    if (mismatch) {
      if (!everyone && !final_pass) {
        if (progress.mismatch_seen_ns == 0) progress.mismatch_seen_ns = now_ns;
        if (Seconds(now_ns - progress.mismatch_seen_ns) < options_.class_grace_s) return;
      }
      progress.diverged = true;
      Emit(ExplainDivergence(comm, seq, now_ns, final_pass), out);
      return;
    }
    if (!everyone) return;
    progress.agreed_seq = seq;
  }
}

void Analyzer::LearnTimes(const Comm& comm, CommProgress& progress) {
  const auto nranks = static_cast<int32_t>(comm.ranks.size());
  uint64_t completed = progress.agreed_seq;
  for (const CommRank& entry : comm.ranks) completed = std::min(completed, entry.present ? entry.completed_seq : 0);
  for (uint64_t seq = progress.timed_seq + 1; seq <= completed; ++seq) {
    int64_t first_enter = INT64_MAX, last_enter = 0, last_complete = 0;
    double bytes = 0;
    for (int32_t rank = 0; rank < nranks; ++rank) {
      const Call* call = model_.Collective(comm, rank, seq);
      if (call == nullptr) continue;
      first_enter = std::min(first_enter, call->enter_ns);
      last_enter = std::max(last_enter, call->enter_ns);
      last_complete = std::max(last_complete, call->complete_ns);
      bytes = CallBytes(*call);
    }
    if (last_enter > 0) expected_.Observe(bytes, Seconds(last_complete - last_enter), Seconds(last_enter - first_enter));
  }
  progress.timed_seq = std::max(progress.timed_seq, completed);
}

bool Analyzer::BlockedInDivergedComm(ProcessId process_id) const {
  const Process& process = model_.process(process_id);
  const size_t look_back = std::min<size_t>(process.calls.size(), kRecentCallsKept);
  for (size_t i = process.calls.size(); i-- > process.calls.size() - look_back;) {
    const Call& call = process.calls[i];
    if (!ring::IsCollective(call.fn) || call.completed()) continue;
    if (call.comm < progress_.size() && progress_[call.comm].diverged) return true;
  }
  return false;
}

std::string Analyzer::GlobalRanksNote(const Comm& comm, const std::vector<int32_t>& ranks) const {
  std::vector<int32_t> global;
  bool differs = false;
  for (int32_t rank : ranks) {
    const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
    if (!entry.present) continue;
    const int32_t g = model_.process(entry.process).info.global_rank;
    if (g < 0) return "";
    differs = differs || g != rank;
    global.push_back(g);
  }
  return differs ? absl::StrCat(" (global ", global.size() == 1 ? "rank " : "ranks ", RankListText(global), ")") : "";
}

std::optional<Analyzer::Frontier> Analyzer::FrontierOf(const Comm& comm) const {
  const auto nranks = static_cast<int32_t>(comm.ranks.size());
  uint64_t completed = UINT64_MAX;
  for (const CommRank& entry : comm.ranks) completed = std::min(completed, entry.present ? entry.completed_seq : 0);
  Frontier frontier;
  frontier.seq = completed + 1;
  for (int32_t rank = 0; rank < nranks; ++rank) {
    const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
    if (entry.present && entry.entered_seq >= frontier.seq) {
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

void Analyzer::CheckStall(const Comm& comm, CommProgress& progress, int64_t now_ns, bool final_pass,
                          std::vector<Finding>* out) {
  if (progress.diverged) return;
  const auto nranks = static_cast<int32_t>(comm.ranks.size());
  const std::optional<Frontier> frontier = FrontierOf(comm);
  if (!frontier || frontier->seq <= progress.stall_reported_seq) return;
  const uint64_t seq = frontier->seq;
  const std::vector<int32_t>& entered = frontier->entered;
  const std::vector<int32_t>& lagging = frontier->lagging;
  const int64_t first_enter = frontier->first_enter_ns;
  const int64_t last_enter = frontier->last_enter_ns;
  const Call* sample = frontier->sample;
  const double bytes = CallBytes(*sample);

  Finding finding;
  finding.comm_id = comm.id;
  finding.seq = seq;
  finding.regions = {RegionOf(model_, *sample)};
  const std::string where = absl::StrFormat("%s seq %d (%s)", CommText(comm.id), seq, DescribeCall(model_, *sample));

  const double threshold = frontier->threshold_s;
  if (!lagging.empty()) {
    // Ranks whose process ended before the others had waited a threshold: lost, not late.
    std::vector<int32_t> lost;
    int64_t lost_at = 0;
    for (int32_t rank : lagging) {
      const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
      if (!entry.present) continue;
      const Process& process = model_.process(entry.process);
      if (!IsLost(process.status)) continue;
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
      std::vector<std::string> states;
      for (int32_t rank : lost) {
        const Process& process = model_.process(comm.ranks[static_cast<size_t>(rank)].process);
        states.push_back(absl::StrFormat("rank %d (%s pid %d) %s", rank, process.info.host, process.info.pid,
                                         ProcessStatusName(process.status)));
      }
      finding.headline = absl::StrFormat("RANK_LOST: %s%s gone; %s waiting at %s", RanksText(lost, comm.nranks),
                                         GlobalRanksNote(comm, lost), RanksText(entered, comm.nranks), where);
      finding.summary = absl::StrFormat(
          "%s. The other ranks entered this collective and will wait for it until the NCCL or PyTorch "
          "timeout: nothing they do from here on can complete. Look at the lost process's own output for "
          "the cause (an exception, the OOM killer, a segfault, a node failure); collwatch has its records "
          "up to its last call. Fix that rank's failure, and use an elastic launcher (torchrun "
          "--max-restarts) or a job-level abort so the survivors do not sit out the timeout.",
          absl::StrJoin(states, "; "));
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
    finding.rank_classes = {RankClass{entered, "entered the collective"},
                            RankClass{lagging, "not arrived"}};
    finding.first_bad_ns = first_enter;
    finding.found_ns = final_pass ? first_enter + static_cast<int64_t>(threshold * kNsPerS) : now_ns;
    std::vector<std::string> doing;
    bool none_started = true;
    for (int32_t rank : lagging) {
      if (doing.size() == 4) {
        doing.push_back(absl::StrCat("and ", lagging.size() - 4, " more"));
        break;
      }
      const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
      if (!entry.present) {
        doing.push_back(absl::StrFormat("Rank %d has not reported on this communicator at all", rank));
        continue;
      }
      const Process& process = model_.process(entry.process);
      none_started = none_started && entry.entered_seq == 0;
      const std::string position =
          entry.entered_seq == 0 ? "has issued no collective on this communicator yet"
                                 : absl::StrFormat("is at seq %d", entry.entered_seq);
      std::string last = "no NCCL call";
      if (!process.calls.empty()) {
        const Call& call = process.calls.back();
        last = absl::StrFormat("its last NCCL call was %s %.1f s ago, %s", OpName(call.fn),
                               Seconds(now_ns - call.enter_ns),
                               call.completed() ? "finished" : (call.returned() ? "returned" : "still inside NCCL"));
        if (call.region != 0) absl::StrAppend(&last, ", in ", std::string(model_.RegionName(call.region)));
      }
      doing.push_back(absl::StrFormat("Rank %d%s %s; %s (process %s)", rank, GlobalRanksNote(comm, {rank}),
                                      position, last, ProcessStatusName(process.status)));
    }
    finding.headline = absl::StrFormat("NOT_JOINED: %s not at %s after %.1f s; %s waiting", RanksText(lagging, comm.nranks),
                                       where, age, RanksText(entered, comm.nranks));
    finding.summary = absl::StrFormat(
        "%s entered %s %.1f s ago and wait for %s (stall threshold %.1f s). %s. %s",
        RanksText(entered, comm.nranks), where, age, RanksText(lagging, comm.nranks), threshold, absl::StrJoin(doing, "; "),
        none_started
            ? "The late ranks have not started this communicator's first collective: they are still "
              "before their first forward (data loading, a checkpoint load, compilation, or a filesystem "
              "stall on that node). Find what that rank does before its first forward (py-spy dump on "
              "its pid); warm up or pre-stage data on every rank, and start timing only after a barrier."
            : "The late ranks are doing something else between collectives: extra work on some ranks "
              "only (logging, evaluation or checkpointing on rank 0 without a barrier), a slow node, "
              "or a wait on another communicator. Look at where they are (py-spy dump on their pids) and "
              "make the work symmetric or move it after a collective everyone joins.");
    progress.stall_reported_seq = seq;
    Emit(std::move(finding), out);
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
  finding.kind = FindingKind::kTransportStall;
  finding.rank_classes = {RankClass{entered, "entered, not completed"}};
  finding.first_bad_ns = last_enter;
  finding.found_ns = final_pass ? last_enter + static_cast<int64_t>(threshold * kNsPerS) : now_ns;
  finding.headline = absl::StrFormat("TRANSPORT_STALL: all %d ranks entered %s %.1f s ago; it has not completed",
                                     nranks, where, age);
  finding.summary = absl::StrFormat(
      "Every rank of %s entered seq %d with the same signature %.1f s ago, and it has not completed "
      "(expected about %.2f s for %s per rank from this job's earlier collectives; threshold %.1f s). "
      "The ranks agree on what to do, so the problem is below them: the network or NVLink/PCIe path "
      "(a flapping link, an InfiniBand or RoCE error), a GPU that stopped making progress (Xid errors in "
      "dmesg), or an earlier kernel on that stream that never finished. Check NCCL_DEBUG=INFO output and "
      "dmesg on each node, and nvidia-smi for a GPU at 100%% with no progress.",
      CommText(comm.id), seq, age, frontier->expected_s, HumanBytes(bytes), threshold);
  progress.stall_reported_seq = seq;
  Emit(std::move(finding), out);
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
  finding.lagging_ranks = missing;
  finding.rank_classes = {RankClass{waiting, "inside communicator creation"}};
  finding.first_bad_ns = first_enter;
  finding.found_ns = now_ns;
  finding.headline = absl::StrFormat("COMM_INIT_STALL: %s of %d (size %d) waits %.1f s in creation%s",
                                     RanksText(waiting, comm.nranks), comm.ranks_present, comm.nranks, age,
                                     missing.empty() ? "" : absl::StrCat("; missing ", RanksText(missing, comm.nranks)));
  finding.summary =
      missing.empty()
          ? absl::StrFormat("Every rank of %s (%d ranks) entered communicator creation, and %s have not "
                            "left it after %.1f s. The ranks found each other, so the bootstrap network "
                            "or the transport setup is stuck: check NCCL_SOCKET_IFNAME / NCCL_IB_HCA, "
                            "firewalls between nodes, and NCCL_DEBUG=INFO output of the waiting ranks.",
                            CommText(comm.id), comm.nranks, RanksText(waiting, comm.nranks), age)
          : absl::StrFormat("%s entered creation of %s (size %d) %.1f s ago and wait for %s, which never "
                            "called it. Those ranks did not start, crashed before it, took another path "
                            "(a new_group or split called on some ranks only), or were given another "
                            "unique id or world size. Check their logs and that every rank calls the "
                            "same communicator creations in the same order with the same MASTER_ADDR.",
                            RanksText(waiting, comm.nranks), CommText(comm.id), comm.nranks, age, RanksText(missing, comm.nranks));
  Emit(std::move(finding), out);
}

void Analyzer::CheckP2p(const Comm& comm, CommProgress& progress, int64_t now_ns, bool final_pass,
                        std::vector<Finding>* out) {
  if (progress.p2p_cursor.size() < comm.ranks.size()) progress.p2p_cursor.resize(comm.ranks.size(), 0);
  for (int32_t rank = 0; rank < static_cast<int32_t>(comm.ranks.size()); ++rank) {
    const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
    size_t& cursor = progress.p2p_cursor[static_cast<size_t>(rank)];
    for (; cursor < entry.p2p.size(); ++cursor) {
      const Call& call = model_.call(entry.process, entry.p2p[cursor]);
      const bool send = call.fn == ApiFn::kSend;
      const P2pKey key{comm.id, send ? rank : call.root_or_peer, send ? call.root_or_peer : rank, call.seq};
      auto other = unpaired_p2p_.find(key);
      if (other == unpaired_p2p_.end()) {
        unpaired_p2p_[key] = P2pSide{entry.process, entry.p2p[cursor]};
        continue;
      }
      const Call& peer_call = model_.call(other->second.process, other->second.call);
      unpaired_p2p_.erase(other);
      if (peer_call.fn == call.fn) continue;  // two sends claiming one slot: not ours to judge
      if (peer_call.count == call.count && peer_call.dtype == call.dtype) continue;
      if (progress.diverged) continue;
      progress.diverged = true;
      const Call& sender = send ? call : peer_call;
      const Call& receiver = send ? peer_call : call;
      Finding finding;
      finding.kind = FindingKind::kSignatureMismatch;
      finding.comm_id = comm.id;
      finding.seq = call.seq;
      finding.rank_classes = {RankClass{{key.sender}, "send"}, RankClass{{key.receiver}, "recv"}};
      finding.regions = RegionsOf(model_, {&sender, &receiver});
      finding.first_bad_ns = std::min(sender.enter_ns, receiver.enter_ns);
      finding.found_ns = final_pass ? std::max(sender.enter_ns, receiver.enter_ns) : now_ns;
      const double ratio = CallBytes(receiver) > 0 ? CallBytes(sender) / CallBytes(receiver) : 0;
      finding.headline = absl::StrFormat("SIGNATURE_MISMATCH: send %d->%d #%d carries %s, the matching recv expects %s",
                                         key.sender, key.receiver, call.seq, DescribeCall(model_, sender),
                                         DescribeCall(model_, receiver));
      finding.summary = absl::StrFormat(
          "Rank %d's send #%d to rank %d on %s is %s, but rank %d's receive #%d from rank %d is %s (byte "
          "ratio %.2f). NCCL matches point-to-point operations by order only: a size or type mismatch "
          "corrupts the receive buffer or hangs. Both sides must post sends and receives of the same "
          "shape in the same order (pipeline stages: the same micro-batch shapes and dtypes on both "
          "stages).",
          key.sender, call.seq, key.receiver, CommText(comm.id), DescribeCall(model_, sender), key.receiver,
          call.seq, key.sender, DescribeCall(model_, receiver), ratio);
      finding.context = {ClassContext{{key.sender}, {ContextLine(model_, '>', sender)}},
                         ClassContext{{key.receiver}, {ContextLine(model_, '>', receiver)}}};
      Emit(std::move(finding), out);
    }
  }
  // A send or receive waiting far past the threshold whose peer never posted its side.
  if (progress.diverged) return;
  for (auto& [key, side] : unpaired_p2p_) {
    if (key.comm_id != comm.id) continue;
    const Call& call = model_.call(side.process, side.call);
    if (call.completed() || key.seq <= progress.stall_reported_seq) continue;
    if (Seconds(now_ns - call.enter_ns) < StallThresholdS(comm, CallBytes(call))) continue;
    const int32_t waiting = call.fn == ApiFn::kSend ? key.sender : key.receiver;
    const int32_t peer = call.fn == ApiFn::kSend ? key.receiver : key.sender;
    if (peer >= 0 && static_cast<size_t>(peer) < comm.ranks.size() && comm.ranks[static_cast<size_t>(peer)].present &&
        BlockedInDivergedComm(comm.ranks[static_cast<size_t>(peer)].process)) {
      continue;
    }
    progress.stall_reported_seq = std::max(progress.stall_reported_seq, key.seq);
    Finding finding;
    finding.kind = FindingKind::kNotJoined;
    finding.comm_id = comm.id;
    finding.seq = key.seq;
    finding.lagging_ranks = {peer};
    finding.rank_classes = {RankClass{{waiting}, OpName(call.fn) == "send" ? "sending" : "receiving"}};
    finding.regions = RegionsOf(model_, {&call});
    finding.first_bad_ns = call.enter_ns;
    finding.found_ns = final_pass ? call.enter_ns + static_cast<int64_t>(options_.stall_after_s * kNsPerS) : now_ns;
    finding.headline = absl::StrFormat("NOT_JOINED: rank %d has not posted the %s matching rank %d's %s #%d on %s",
                                       peer, call.fn == ApiFn::kSend ? "recv" : "send", waiting, OpName(call.fn),
                                       key.seq, CommText(comm.id));
    finding.summary = absl::StrFormat(
        "Rank %d posted %s #%d (%s) %.1f s ago and rank %d has not posted its matching %s. Point-to-point "
        "operations pair by order per peer: rank %d is late, skipped this transfer, or posts it in a "
        "different order (a pipeline schedule that differs between stages). Compare the two ranks' p2p "
        "order with `collwatch diff` or `collwatch export --chrome`.",
        waiting, OpName(call.fn), key.seq, DescribeCall(model_, call), Seconds(now_ns - call.enter_ns), peer,
        call.fn == ApiFn::kSend ? "recv" : "send", peer);
    Emit(std::move(finding), out);
    return;
  }
}

Finding Analyzer::ExplainDivergence(const Comm& comm, uint64_t seq, int64_t now_ns, bool final_pass) const {
  const auto nranks = static_cast<int32_t>(comm.ranks.size());
  const size_t window = options_.alignment_window;
  // Each reporting rank's calls from the mismatch on.
  std::vector<std::vector<const Call*>> calls_by_rank(static_cast<size_t>(nranks));
  std::vector<int32_t> not_there;
  size_t common = window;
  int64_t first_bad = INT64_MAX, last_needed = 0;
  for (int32_t rank = 0; rank < nranks; ++rank) {
    const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
    if (!entry.present || entry.entered_seq < seq) {
      not_there.push_back(rank);
      continue;
    }
    std::vector<const Call*> calls = CallsFrom(model_, comm, rank, seq, window);
    if (calls.empty()) {
      not_there.push_back(rank);
      continue;
    }
    common = std::min(common, calls.size());
    first_bad = std::min(first_bad, calls.front()->enter_ns);
    last_needed = std::max(last_needed, calls.front()->enter_ns);
    calls_by_rank[static_cast<size_t>(rank)] = std::move(calls);
  }
  // Classes: identical sequences over the stretch every reporting rank has.
  std::map<std::vector<uint64_t>, std::vector<int32_t>> class_of;
  for (int32_t rank = 0; rank < nranks; ++rank) {
    const auto& calls = calls_by_rank[static_cast<size_t>(rank)];
    if (calls.empty()) continue;
    std::vector<const Call*> head(calls.begin(), calls.begin() + static_cast<ptrdiff_t>(common));
    class_of[Hashes(head)].push_back(rank);
  }
  std::vector<std::vector<int32_t>> classes;
  for (auto& [key, ranks] : class_of) classes.push_back(std::move(ranks));
  std::sort(classes.begin(), classes.end(), [](const auto& a, const auto& b) {
    return a.size() != b.size() ? a.size() > b.size() : a.front() < b.front();
  });
  if (classes.size() < 2) {
    // The disagreement rests on calls lost in the ring: say what is known.
    Finding finding;
    finding.kind = FindingKind::kOpMismatch;
    finding.comm_id = comm.id;
    finding.seq = seq;
    finding.lagging_ranks = not_there;
    finding.first_bad_ns = first_bad == INT64_MAX ? now_ns : first_bad;
    finding.found_ns = now_ns;
    finding.headline = absl::StrFormat("OP_MISMATCH at %s seq %d (records lost around it)", CommText(comm.id), seq);
    finding.summary = "The ranks disagree at this collective, but records around it were lost in the ring "
                      "before they were read, so the classes cannot be told apart. Rerun with a larger ring "
                      "(COLLWATCH_RING_RECORDS) and compare the ranks' schedules with collwatch diff.";
    return finding;
  }
  // Each class speaks through its member that reported the most.
  auto representative = [&](const std::vector<int32_t>& ranks) {
    int32_t best = ranks.front();
    for (int32_t rank : ranks) {
      if (calls_by_rank[static_cast<size_t>(rank)].size() > calls_by_rank[static_cast<size_t>(best)].size()) best = rank;
    }
    return best;
  };
  const std::vector<const Call*>& major = calls_by_rank[static_cast<size_t>(representative(classes[0]))];
  const std::vector<const Call*>& minor = calls_by_rank[static_cast<size_t>(representative(classes[1]))];

  // How the two largest classes relate: an inserted run, or a substitution.
  Relation relation;
  const FirstDifference first = AlignFirstDifference(Hashes(major), Hashes(minor));
  if (first.matched_after > 0 && (first.a_run == 0) != (first.b_run == 0)) {
    relation.kind = Relation::kInsertedRun;
    relation.first_inserted = first.a_run > 0;
    const auto& side = relation.first_inserted ? major : minor;
    const size_t run = relation.first_inserted ? first.a_run : first.b_run;
    relation.run.assign(side.begin(), side.begin() + static_cast<ptrdiff_t>(run));
  } else if (first.matched_after == 0) {
    // Too little reported after the mismatch (blocking collectives): read the run off the
    // schedule both sides agreed on before.
    const int32_t history_rank = representative(classes[0]);
    const uint64_t from = seq > options_.history_window ? seq - options_.history_window : 1;
    std::vector<const Call*> history;
    for (uint64_t s = from; s < seq; ++s) {
      if (const Call* call = model_.Collective(comm, history_rank, s)) history.push_back(call);
    }
    const uint64_t major_head = HashOf(FingerprintOf(*major.front()));
    const uint64_t minor_head = HashOf(FingerprintOf(*minor.front()));
    if (auto run = TemplateRun(history, major_head, minor_head, window)) {
      relation = Relation{Relation::kInsertedRun, true, *run, true};
    } else if (auto other = TemplateRun(history, minor_head, major_head, window)) {
      relation = Relation{Relation::kInsertedRun, false, *other, true};
    }
  }

  const Call& a = *major.front();
  const Call& b = *minor.front();
  Finding finding;
  finding.comm_id = comm.id;
  finding.seq = seq;
  finding.lagging_ranks = not_there;
  finding.first_bad_ns = first_bad;
  finding.found_ns = final_pass ? last_needed : now_ns;
  const std::vector<int32_t>& with_run = relation.first_inserted ? classes[0] : classes[1];
  const std::vector<int32_t>& without_run = relation.first_inserted ? classes[1] : classes[0];
  const std::string comm_text = CommText(comm.id);
  std::string others;  // more than two classes: say so
  if (classes.size() > 2) {
    std::vector<std::string> parts;
    for (size_t c = 2; c < classes.size(); ++c) {
      const Call& head = *calls_by_rank[static_cast<size_t>(representative(classes[c]))].front();
      parts.push_back(absl::StrFormat("%s issued %s", RanksText(classes[c], comm.nranks), DescribeCall(model_, head)));
    }
    others = absl::StrCat(" ", classes.size(), " classes in all; also ", absl::StrJoin(parts, "; "), ".");
  }
  if (!not_there.empty()) {
    absl::StrAppend(&others, " ", RanksText(not_there, comm.nranks), " had not reached seq ", seq, " yet.");
  }

  const bool all_reduce_scatters =
      !relation.run.empty() && std::all_of(relation.run.begin(), relation.run.end(),
                                           [](const Call* call) { return call->fn == ApiFn::kReduceScatter; });
  if (relation.kind == Relation::kInsertedRun && all_reduce_scatters) {
    finding.kind = FindingKind::kSkippedReduceScatter;
  } else if (relation.kind == Relation::kInsertedRun) {
    finding.kind = FindingKind::kPathDivergence;
  } else if (a.fn == b.fn && a.region != b.region) {
    finding.kind = FindingKind::kPathDivergence;
  } else if (a.fn == b.fn) {
    finding.kind = FindingKind::kSignatureMismatch;
  } else if ((a.fn == ApiFn::kReduceScatter) != (b.fn == ApiFn::kReduceScatter)) {
    finding.kind = FindingKind::kSkippedReduceScatter;
    relation.first_inserted = a.fn == ApiFn::kReduceScatter;
    relation.run = {relation.first_inserted ? &a : &b};
  } else {
    finding.kind = FindingKind::kOpMismatch;
  }
  const std::vector<int32_t>& issued_rs = relation.first_inserted ? classes[0] : classes[1];
  const std::vector<int32_t>& skipped_rs = relation.first_inserted ? classes[1] : classes[0];
  const Call& with_head = relation.first_inserted ? a : b;
  const Call& without_head = relation.first_inserted ? b : a;

  switch (finding.kind) {
    case FindingKind::kPathDivergence: {
      std::vector<std::string> run_regions =
          relation.run.empty() ? RegionsOf(model_, {&a, &b}) : RegionsOf(model_, relation.run);
      finding.regions = run_regions;
      if (relation.run.empty()) {
        // Same collective from different code: name both regions.
        finding.rank_classes = {RankClass{classes[0], absl::StrCat("issued it in ", RegionOf(model_, a))},
                                RankClass{classes[1], absl::StrCat("issued it in ", RegionOf(model_, b))}};
        finding.headline = absl::StrFormat("PATH_DIVERGENCE at %s seq %d: %s in %s, %s in %s", comm_text, seq,
                                           RanksText(classes[0], comm.nranks), RegionOf(model_, a), RanksText(classes[1], comm.nranks),
                                           RegionOf(model_, b));
        finding.summary = absl::StrFormat(
            "At seq %d of %s, %s%s issued %s while %s%s issued %s: the ranks are running different code. "
            "NCCL matches collectives by order only, so from here on the ranks exchange the wrong tensors "
            "(silently, while the sizes happen to agree) or hang.%s Likely cause: a data-dependent branch, "
            "e.g. a module that runs only for some batches (image vs text-only samples, an unused expert, "
            "a conditional head). Fix: %s",
            seq, comm_text, RanksText(classes[0], comm.nranks), GlobalRanksNote(comm, classes[0]), DescribeCall(model_, a),
            RanksText(classes[1], comm.nranks), GlobalRanksNote(comm, classes[1]), DescribeCall(model_, b), others,
            PathFix(run_regions));
        break;
      }
      const std::string run_text = absl::StrFormat("%s in %s", OpsText(relation.run), RegionListText(run_regions));
      finding.rank_classes = {
          RankClass{with_run, absl::StrCat("ran ", relation.run.size(), " extra collective",
                                           relation.run.size() == 1 ? "" : "s", " (", RegionListText(run_regions, 3), ")")},
          RankClass{without_run, absl::StrCat("skipped them; went on with ", RegionOf(model_, without_head))}};
      if (finding.rank_classes[0].ranks != classes[0]) std::swap(finding.rank_classes[0], finding.rank_classes[1]);
      finding.headline = absl::StrFormat("PATH_DIVERGENCE at %s seq %d: %s ran %s that %s skipped", comm_text, seq,
                                         RanksText(with_run, comm.nranks), run_text, RanksText(without_run, comm.nranks));
      finding.summary = absl::StrFormat(
          "From seq %d of %s, %s%s issued %s (first: %s) that %s%s did not issue; those went straight on "
          "with %s. The ranks took different code paths%s. NCCL matches collectives by order only, so the "
          "two classes now pair unrelated collectives: they corrupt each other's parameters while sizes "
          "agree, and hang when they do not.%s Fix: %s",
          seq, comm_text, RanksText(with_run, comm.nranks), GlobalRanksNote(comm, with_run), run_text,
          DescribeCall(model_, with_head), RanksText(without_run, comm.nranks), GlobalRanksNote(comm, without_run),
          DescribeCall(model_, without_head),
          relation.from_template ? " (the run is read off the schedule the ranks agreed on before)" : "", others,
          PathFix(run_regions));
      break;
    }
    case FindingKind::kSkippedReduceScatter: {
      const Call& rs = *relation.run.front();
      const double unit_bytes = CallBytes(rs) * comm.nranks;
      finding.regions = RegionsOf(model_, relation.run);
      finding.rank_classes = {
          RankClass{issued_rs, absl::StrCat("reduce-scattered ", RegionListText(finding.regions, 3))},
          RankClass{skipped_rs, absl::StrCat("skipped it; went on with ", RegionOf(model_, without_head))}};
      if (finding.rank_classes[0].ranks != classes[0]) std::swap(finding.rank_classes[0], finding.rank_classes[1]);
      finding.headline = absl::StrFormat("SKIPPED_REDUCE_SCATTER at %s seq %d: %s did not reduce-scatter %s",
                                         comm_text, seq, RanksText(skipped_rs, comm.nranks), RegionListText(finding.regions));
      finding.summary = absl::StrFormat(
          "At seq %d of %s, %s%s issued %s (%zu reduce-scatter%s: the gradient of a parameter unit of %s, "
          "%s per rank) and %s%s did not: they went on with %s. Their gradient hook for that unit never "
          "fired because its parameters took no part in their forward pass (an expert that received no "
          "tokens, a head or tower skipped for their batch). NCCL now pairs the reduce-scatter with an "
          "unrelated collective: gradients are corrupted while sizes agree, and the job hangs when they do "
          "not.%s Fix: make every parameter take part in every rank's forward (route a zero-weight token "
          "through each expert, or add 0 * sum(unit parameters) to the loss), or have the optimizer "
          "reduce-scatter a zero gradient for units a rank did not use (FSDP: use_orig_params with "
          "all units in every forward; DeepSpeed: keep experts in the graph).",
          seq, comm_text, RanksText(issued_rs, comm.nranks), GlobalRanksNote(comm, issued_rs), DescribeCall(model_, with_head),
          relation.run.size(), relation.run.size() == 1 ? "" : "s", HumanBytes(unit_bytes), HumanBytes(CallBytes(rs)),
          RanksText(skipped_rs, comm.nranks), GlobalRanksNote(comm, skipped_rs), DescribeCall(model_, without_head), others);
      break;
    }
    case FindingKind::kSignatureMismatch: {
      finding.regions = RegionsOf(model_, {&a, &b});
      std::vector<std::string> differences;
      if (a.count != b.count) differences.push_back(absl::StrFormat("count %d vs %d", a.count, b.count));
      if (a.dtype != b.dtype) differences.push_back(absl::StrFormat("dtype %s vs %s", DtypeName(a.dtype), DtypeName(b.dtype)));
      if (a.redop != b.redop) differences.push_back(absl::StrFormat("reduce op %s vs %s", RedOpName(a.redop), RedOpName(b.redop)));
      if (a.root_or_peer != b.root_or_peer) differences.push_back(absl::StrFormat("root %d vs %d", a.root_or_peer, b.root_or_peer));
      const double ratio = CallBytes(b) > 0 ? CallBytes(a) / CallBytes(b) : 0;
      finding.rank_classes = {RankClass{classes[0], DescribeCall(model_, a)},
                              RankClass{classes[1], DescribeCall(model_, b)}};
      finding.headline = absl::StrFormat("SIGNATURE_MISMATCH at %s seq %d: %s (%s)", comm_text, seq,
                                         OpName(a.fn), absl::StrJoin(differences, ", "));
      std::string cause;
      if (a.dtype != b.dtype) {
        cause = absl::StrFormat(
            "The ranks use different precisions (%s vs %s, byte ratio %.2f): one rank runs under another "
            "autocast / mixed-precision setting or casts the model differently. NCCL reads the buffers "
            "with each rank's own type, so the reduced values are garbage (NaN losses) or the job hangs "
            "on the size difference. Fix: give every rank the same dtype configuration (the same "
            "--bf16/--fp32 flag, torch.autocast region and model.to(dtype) on all ranks).",
            DtypeName(a.dtype), DtypeName(b.dtype), ratio);
      } else if (a.count != b.count) {
        cause = absl::StrFormat(
            "The ranks communicate tensors of different sizes (byte ratio %.2f): a different model "
            "configuration, padding or bucket layout on some ranks, or a tensor whose shape depends on "
            "the rank's data. Fix: make the communicated shapes identical on every rank (same config; "
            "pad variable-length data to a common size first).",
            ratio);
      } else {
        cause = "The ranks disagree on the reduction operator or the root: these come from code or "
                "configuration that differs between ranks. Fix: pass the same op and root on every rank.";
      }
      finding.summary = absl::StrFormat("At seq %d of %s, %s%s issued %s while %s%s issued %s. %s%s", seq,
                                        comm_text, RanksText(classes[0], comm.nranks), GlobalRanksNote(comm, classes[0]),
                                        DescribeCall(model_, a), RanksText(classes[1], comm.nranks),
                                        GlobalRanksNote(comm, classes[1]), DescribeCall(model_, b), cause, others);
      break;
    }
    default: {
      finding.kind = FindingKind::kOpMismatch;
      finding.regions = RegionsOf(model_, {&a, &b});
      finding.rank_classes = {RankClass{classes[0], DescribeCall(model_, a)},
                              RankClass{classes[1], DescribeCall(model_, b)}};
      finding.headline = absl::StrFormat("OP_MISMATCH at %s seq %d: %s vs %s", comm_text, seq, OpName(a.fn),
                                         OpName(b.fn));
      finding.summary = absl::StrFormat(
          "At seq %d of %s, %s%s issued %s while %s%s issued %s: different collectives at the same "
          "position. NCCL pairs them anyway: the job hangs or exchanges garbage.%s Likely cause: the "
          "ranks run different code or different configurations (a collective under a rank-dependent "
          "condition, a metric all-reduce on some ranks only). Fix: issue the same collectives in the "
          "same order on every rank; compare the two ranks' schedules with `collwatch diff`.",
          seq, comm_text, RanksText(classes[0], comm.nranks), GlobalRanksNote(comm, classes[0]), DescribeCall(model_, a),
          RanksText(classes[1], comm.nranks), GlobalRanksNote(comm, classes[1]), DescribeCall(model_, b), others);
      break;
    }
  }

  // The aligned sequences: two agreed calls, then what each class did.
  for (const std::vector<int32_t>& ranks : classes) {
    const int32_t rank = representative(ranks);
    ClassContext context;
    context.ranks = ranks;
    for (uint64_t s = seq > 2 ? seq - 2 : 1; s < seq; ++s) {
      if (const Call* call = model_.Collective(comm, rank, s)) context.lines.push_back(ContextLine(model_, '=', *call));
    }
    const auto& calls = calls_by_rank[static_cast<size_t>(rank)];
    for (size_t i = 0; i < calls.size() && i < 8; ++i) context.lines.push_back(ContextLine(model_, '>', *calls[i]));
    if (calls.size() > 8) context.lines.push_back(absl::StrFormat("  ... %d more reported", calls.size() - 8));
    finding.context.push_back(std::move(context));
  }
  return finding;
}

}  // namespace collwatch::analyzer
