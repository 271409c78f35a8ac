// Stall detection: a collective some ranks have not joined (NOT_JOINED), one every rank
// entered that does not complete (TRANSPORT_STALL), communicator creation waiting for
// ranks (COMM_INIT_STALL), and ranks whose process ended (RANK_LOST).
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analyzer/analyzer.h"
#include "analyzer/finding_words.h"

namespace collwatch::analyzer {
namespace {

bool IsLost(ProcessStatus status) {
  return status == ProcessStatus::kDead || status == ProcessStatus::kSilent || status == ProcessStatus::kExited;
}

}  // namespace

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
  finding.regions = RegionsOf(model_, std::vector<const Call*>{sample});
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

}  // namespace collwatch::analyzer
