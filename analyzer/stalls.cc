// Stall detection: a collective some ranks have not joined (NOT_JOINED), one every rank
// entered that does not complete (TRANSPORT_STALL), communicator creation waiting for
// ranks (COMM_INIT_STALL), and ranks whose process ended (RANK_LOST).
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analyzer/analyzer.h"
#include "analyzer/finding_words.h"
#include "analyzer/liveness.h"
#include "analyzer/process_ranks.h"

namespace collwatch::analyzer {
namespace {

bool SampledAs(const Process& process, ProcessState state) {
  return process.sample.sampled_ns != 0 && process.sample.state == state;
}

// The process ended, or stopped reporting with nothing to say it is still there
// (process/process_info.h has the one rule).
bool IsLost(const Process& process) { return collwatch::IsLost(LivenessOf(process.status, process.sample)); }

// Why a live process cannot take part, as its node sees it ("" when nothing is wrong with
// it as far as anything shows): stopped, or stuck in uninterruptible I/O.
std::string ProcessTrouble(const Process& process) {
  const ProcessInfo& info = process.info;
  if (SampledAs(process, ProcessState::kStopped)) {
    return absl::StrFormat(
        "its process (pid %d on %s) is stopped: a SIGSTOP, a debugger or job control holds it, and it runs no "
        "code at all (not even NCCL's proxy thread) until it is continued (kill -CONT %d)",
        info.pid, info.host, info.pid);
  }
  if (SampledAs(process, ProcessState::kDiskWait)) {
    const std::string& wait = process.sample.wait_channel;
    return absl::StrFormat(
        "its process (pid %d on %s) is in uninterruptible I/O%s: a filesystem, network mount or device on that "
        "node does not answer",
        info.pid, info.host, wait.empty() ? "" : absl::StrCat(" (in ", wait, ")"));
  }
  return "";
}

// "stopped" / "in I/O": the word for a troubled process in a headline.
std::string TroubleWord(const Process& process) {
  return SampledAs(process, ProcessState::kStopped) ? "stopped" : "in uninterruptible I/O";
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
      std::vector<std::string> states;
      for (int32_t rank : lost) {
        const Process& process = model_.process(comm.ranks[static_cast<size_t>(rank)].process);
        const std::string ended = EndedText(process);
        states.push_back(absl::StrFormat("rank %d (%s pid %d) %s", rank, process.info.host, process.info.pid,
                                         ended.empty() ? std::string(ProcessStatusName(process.status)) : ended));
      }
      DescribeRanks(comm, lost, now_ns, &finding);
      finding.headline = absl::StrFormat("RANK_LOST: %s%s gone; %s waiting at %s", RanksText(lost, comm.nranks),
                                         JobRanksNote(model_, comm, lost), RanksText(entered, comm.nranks), where);
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
    std::vector<std::string> troubles;  // late ranks whose process cannot run: the cause
    std::vector<int32_t> troubled;
    std::string trouble_word;
    for (int32_t rank : lagging) {
      const std::optional<ProcessId> process = ProcessOfRank(comm, rank);
      const std::string trouble = process ? ProcessTrouble(model_.process(*process)) : "";
      if (trouble.empty()) continue;
      troubled.push_back(rank);
      trouble_word = TroubleWord(model_.process(*process));
      if (troubles.size() < 4) troubles.push_back(absl::StrFormat("rank %d%s: %s", rank, JobRanksNote(model_, comm, {rank}), trouble));
    }
    DescribeRanks(comm, lagging, now_ns, &finding);
    bool none_started = true;
    for (int32_t rank : lagging) {
      if (doing.size() == 4) {
        doing.push_back(absl::StrCat("and ", lagging.size() - 4, " more"));
        break;
      }
      const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
      if (!entry.present) {
        const std::optional<ProcessId> process = ProcessOfRank(comm, rank);
        doing.push_back(process ? absl::StrFormat("Rank %d has not reported on this communicator at all (process "
                                                  "pid %d %s, no NCCL call on it yet)",
                                                  rank, model_.process(*process).info.pid,
                                                  DescribeProcess(model_, *process, rank, now_ns).state)
                                : absl::StrFormat("Rank %d has not reported on this communicator at all", rank));
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
        // A process of several ranks: its last call may be another rank's; say whose.
        const bool shared = RanksOfProcess(model_, entry.process).size() > 1;
        last = absl::StrFormat(
            "%s last NCCL call was %s%s %.1f s ago, %s", shared ? "its process's" : "its", OpName(call.fn),
            shared ? absl::StrFormat(" by rank %d of %s", call.rank, CommText(model_.comms()[call.comm].id)) : "",
            Seconds(now_ns - call.enter_ns),
            call.completed() ? "finished" : (call.returned() ? "returned" : "still inside NCCL"));
        if (call.region != 0) absl::StrAppend(&last, ", in ", std::string(model_.RegionName(call.region)));
      }
      const ProcessReport report = DescribeProcess(model_, entry.process, rank, now_ns);
      doing.push_back(absl::StrFormat("Rank %d%s %s; %s (process %s%s)", rank, JobRanksNote(model_, comm, {rank}),
                                      position, last, report.state, report.cpu_advancing ? ", CPU advancing" : ""));
    }
    std::string cause;
    if (!troubled.empty()) {
      cause = absl::StrFormat(
          "That is the cause: %s. The others cannot go on without it, and nothing is wrong with the "
          "network or the collective itself. Continue it, or find what stopped it (a debugger or "
          "py-spy attached, a job-control signal, a checkpoint or preemption tool, the node's storage).",
          absl::StrJoin(troubles, "; "));
    } else if (none_started) {
      cause = "The late ranks have not started this communicator's first collective: they are still before "
              "their first forward (data loading, a checkpoint load, compilation, or a filesystem stall on that "
              "node). Find what that rank does before its first forward (py-spy dump on its pid); warm up or "
              "pre-stage data on every rank, and start timing only after a barrier.";
    } else {
      cause = "The late ranks are doing something else between collectives: extra work on some ranks only "
              "(logging, evaluation or checkpointing on rank 0 without a barrier), a slow node, or a wait on "
              "another communicator. Look at where they are (py-spy dump on their pids) and make the work "
              "symmetric or move it after a collective everyone joins.";
    }
    finding.headline = absl::StrFormat(
        "NOT_JOINED: %s not at %s after %.1f s; %s waiting%s", RanksText(lagging, comm.nranks), where, age,
        RanksText(entered, comm.nranks),
        troubled.empty() ? "" : absl::StrFormat("; %s %s", RanksText(troubled, comm.nranks), trouble_word));
    finding.summary = absl::StrFormat("%s entered %s %.1f s ago and %s for %s (stall threshold %.1f s). %s. %s",
                                      RanksText(entered, comm.nranks), where, age, RanksVerb(entered, "wait"),
                                      RanksText(lagging, comm.nranks),
                                      threshold, absl::StrJoin(doing, "; "), cause);
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
  // A rank whose process cannot run (stopped, stuck in I/O, ended) holds the collective
  // up: that is the cause, whatever the network does.
  std::vector<int32_t> troubled;
  std::vector<std::string> troubles;
  std::string trouble_word;
  for (int32_t rank : entered) {
    const Process& process = model_.process(comm.ranks[static_cast<size_t>(rank)].process);
    std::string trouble = ProcessTrouble(process);
    if (trouble.empty() && IsLost(process)) {
      trouble = absl::StrFormat("its process (pid %d on %s) %s", process.info.pid, process.info.host,
                                EndedText(process).empty() ? "stopped reporting" : EndedText(process));
    }
    if (trouble.empty()) continue;
    if (troubled.empty()) trouble_word = IsLost(process) ? "gone" : TroubleWord(process);
    troubled.push_back(rank);
    if (troubles.size() < 4) troubles.push_back(absl::StrFormat("rank %d%s: %s", rank, JobRanksNote(model_, comm, {rank}), trouble));
  }
  DescribeRanks(comm, troubled.empty() ? entered : troubled, now_ns, &finding);
  const std::string what = absl::StrFormat(
      "Every rank of %s entered seq %d with the same signature %.1f s ago, and it has not completed (expected "
      "about %.2f s for %s per rank from this job's earlier collectives; threshold %.1f s).",
      CommText(comm.id), seq, age, frontier->expected_s, HumanBytes(bytes), threshold);
  if (!troubled.empty()) {
    finding.lagging_ranks = troubled;
    finding.headline = absl::StrFormat("TRANSPORT_STALL: all %d ranks entered %s %.1f s ago; %s %s", nranks, where,
                                       age, RanksText(troubled, comm.nranks), trouble_word);
    finding.summary = absl::StrFormat(
        "%s The cause is not the network: %s. A collective completes only while every rank's process runs (the "
        "host side of the transfer and NCCL's proxy thread live in it). Continue it, or find what stopped it (a "
        "debugger or py-spy attached, a job-control signal, a checkpoint or preemption tool, the node's storage).",
        what, absl::StrJoin(troubles, "; "));
  } else {
    finding.headline = absl::StrFormat("TRANSPORT_STALL: all %d ranks entered %s %.1f s ago; it has not completed",
                                       nranks, where, age);
    finding.summary = absl::StrFormat(
        "%s Every rank's process is alive and not stopped, and the ranks agree on what to do, so the problem is "
        "below them: the network or NVLink/PCIe path (a flapping link, an InfiniBand or RoCE error), a GPU that "
        "stopped making progress (Xid errors in dmesg), or an earlier kernel on that stream that never finished. "
        "Check NCCL_DEBUG=INFO output and dmesg on each node, and nvidia-smi for a GPU at 100%% with no progress.",
        what);
  }
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
  // Missing ranks whose process is there: alive (and maybe stopped) before their call.
  std::vector<std::string> alive;
  std::vector<int32_t> troubled;
  std::string trouble_word;
  for (int32_t rank : missing) {
    const std::optional<ProcessId> process = ProcessOfRank(comm, rank);
    if (!process || IsLost(model_.process(*process))) continue;
    const Process& found = model_.process(*process);
    const std::string trouble = ProcessTrouble(found);
    if (!trouble.empty()) {
      if (troubled.empty()) trouble_word = TroubleWord(found);
      troubled.push_back(rank);
    }
    if (alive.size() < 4) {
      const ProcessReport report = DescribeProcess(model_, *process, rank, now_ns);
      alive.push_back(trouble.empty()
                          ? absl::StrFormat("rank %d (pid %d on %s) is alive (%s%s) and has not called it yet",
                                            rank, report.pid, report.host, report.state,
                                            report.cpu_advancing ? ", CPU advancing" : ", CPU idle")
                          : absl::StrFormat("rank %d is alive but %s, before calling it", rank, trouble));
    }
  }
  DescribeRanks(comm, missing.empty() ? waiting : missing, now_ns, &finding);
  finding.headline = absl::StrFormat("COMM_INIT_STALL: %s of %d (size %d) waits %.1f s in creation%s%s",
                                     RanksText(waiting, comm.nranks), comm.ranks_present, comm.nranks, age,
                                     missing.empty() ? "" : absl::StrCat("; missing ", RanksText(missing, comm.nranks)),
                                     troubled.empty() ? "" : absl::StrCat(", ", trouble_word));
  finding.summary =
      missing.empty()
          ? absl::StrFormat("Every rank of %s (%d ranks) entered communicator creation, and %s have not "
                            "left it after %.1f s. The ranks found each other, so the bootstrap network "
                            "or the transport setup is stuck: check NCCL_SOCKET_IFNAME / NCCL_IB_HCA, "
                            "firewalls between nodes, and NCCL_DEBUG=INFO output of the waiting ranks.",
                            CommText(comm.id), comm.nranks, RanksText(waiting, comm.nranks), age)
          : !alive.empty()
                ? absl::StrFormat("%s entered creation of %s (size %d) %.1f s ago and %s for %s. %s. %s",
                                  RanksText(waiting, comm.nranks), CommText(comm.id), comm.nranks, age,
                                  RanksVerb(waiting, "wait"),
                                  RanksText(missing, comm.nranks), absl::StrJoin(alive, "; "),
                                  troubled.empty()
                                      ? "They are still busy before it (data loading, a checkpoint load, "
                                        "compilation) or took another path (a new_group or split called on some "
                                        "ranks only): find where they are (py-spy dump on their pids)."
                                      : "That is the cause: continue it, or find what stopped it (a debugger "
                                        "or py-spy attached, a job-control signal, the node's storage).")
                : absl::StrFormat("%s entered creation of %s (size %d) %.1f s ago and %s for %s, which never "
                                  "called it. Those ranks did not start, crashed before it, took another path "
                                  "(a new_group or split called on some ranks only), or were given another "
                                  "unique id or world size. Check their logs and that every rank calls the "
                                  "same communicator creations in the same order with the same MASTER_ADDR.",
                                  RanksText(waiting, comm.nranks), CommText(comm.id), comm.nranks, age,
                                  RanksVerb(waiting, "wait"), RanksText(missing, comm.nranks));
  Emit(std::move(finding), out);
}

}  // namespace collwatch::analyzer
