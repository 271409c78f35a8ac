// Each finding kind's words, from its evidence: no padding advice for an inserted run,
// both readings where the evidence cannot decide, the cause a stalled process shows.
// Threading: see finding_text.h.
#include "analyzer/finding_text.h"

#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analyzer/finding_words.h"

namespace collwatch::analyzer {
namespace {

using ring::ApiFn;

using Words = FindingWords;

// --- Collective divergences ----------------------------------------------------------------

// One-sided runs: the class that issued the run and the one that skipped it.
const DivergingClass& WithRun(const DivergenceFacts& d) { return d.major_inserted ? d.classes[0] : d.classes[1]; }
const DivergingClass& WithoutRun(const DivergenceFacts& d) { return d.major_inserted ? d.classes[1] : d.classes[0]; }
// Labels by rank class (the larger first) from the one-sided classes' labels.
std::vector<std::string> RunLabels(const DivergenceFacts& d, std::string with, std::string without) {
  return d.major_inserted ? std::vector<std::string>{with, without} : std::vector<std::string>{without, with};
}

Words TwoSidedPathDivergenceWords(const Finding& f, const DivergenceFacts& d) {
  const std::string comm_text = CommText(f.comm_id);
  const CallFacts& a = d.classes[0].head;
  const CallFacts& b = d.classes[1].head;
  const std::string major_text = RunWithRegions(d.major_run);
  const std::string minor_text = RunWithRegions(d.minor_run);
  Words w{" "};
  if (d.basis == DivergenceBasis::kRegions) {
    // One call each, told apart by where it was issued: the regions say it all.
    w.labels = {absl::StrCat("issued it", InRegionText(a)), absl::StrCat("issued it", InRegionText(b))};
    w.brief = absl::StrFormat("at %s seq %d: %s%s, %s%s", comm_text, f.seq, RanksText(d.classes[0].ranks, f.comm_size),
                              InRegionText(a), RanksText(d.classes[1].ranks, f.comm_size), InRegionText(b));
  } else {
    w.labels = {absl::StrCat("issued ", major_text), absl::StrCat("issued ", minor_text)};
    w.brief = absl::StrFormat("at %s seq %d: %s issued %s where %s issued %s", comm_text, f.seq,
                              RanksText(d.classes[0].ranks, f.comm_size), major_text,
                              RanksText(d.classes[1].ranks, f.comm_size), minor_text);
  }
  // A single call reads best as itself; a stretch by its ops and sizes, then its first call.
  auto stretch_text = [](const std::vector<CallFacts>& stretch, const std::string& text) {
    return stretch.size() == 1 ? DescribeCall(stretch.front())
                               : absl::StrCat(text, " (first: ", DescribeCall(stretch.front()), ")");
  };
  std::string evidence;
  if (d.basis == DivergenceBasis::kRegions) {
    evidence = "The calls come from different NVTX regions: the ranks are running different code.";
  } else if (d.basis == DivergenceBasis::kCallSites) {
    evidence = absl::StrCat("The calls come from different statements (",
                            f.branch_point ? BranchPointText(*f.branch_point) : "their call paths part",
                            "): the ranks are running different code, not the same call with other sizes.");
  } else if (d.open_ended) {
    evidence = absl::StrFormat(
        "The %d calls each class reported from here do not line up with the other class's in op or "
        "size pattern, as the same code with another configuration would: the ranks are running "
        "different code.",
        d.major_run.size());
  } else {
    evidence = "Then both went on with the same collectives: the ranks ran different code for that stretch.";
  }
  w.summary = absl::StrFormat(
      "From seq %d of %s, %s issued %s where %s issued %s. %s NCCL matches collectives by order only, "
      "so from here on the ranks exchange the wrong tensors (silently, while the sizes happen to agree) "
      "or hang.%s Likely cause: a data-dependent branch, e.g. a module that runs only for some batches "
      "(image vs text-only samples, an unused expert, a conditional head). Fix: %s",
      f.seq, comm_text, ClassRanksText(f.comm_size, d.classes[0]), stretch_text(d.major_run, major_text), ClassRanksText(f.comm_size, d.classes[1]),
      stretch_text(d.minor_run, minor_text), evidence, OthersText(f, d), PathFix(f.regions));
  return w;
}

Words PathDivergenceWords(const Finding& f, const DivergenceFacts& d) {
  if (d.two_sided) return TwoSidedPathDivergenceWords(f, d);
  const std::string comm_text = CommText(f.comm_id);
  const DivergingClass& with = WithRun(d);
  const DivergingClass& without = WithoutRun(d);
  const std::string run_text = RunWithRegions(d.run);
  const std::string region_list = RegionListText(f.regions, 3);
  Words w{" "};
  w.labels = RunLabels(
      d,
      absl::StrCat("ran ", d.run.size(), " extra collective", d.run.size() == 1 ? "" : "s",
                   region_list.empty() ? "" : absl::StrCat(" (", region_list, ")")),
      absl::StrCat("skipped them; went on with ", DescribeCall(without.head)));
  w.brief = absl::StrFormat("at %s seq %d: %s ran %s that %s skipped", comm_text, f.seq, RanksText(with.ranks, f.comm_size),
                            run_text, RanksText(without.ranks, f.comm_size));
  w.summary = absl::StrFormat(
      "From seq %d of %s, %s issued %s (first: %s) that %s did not issue; those went straight on with %s. "
      "The ranks took different code paths%s. NCCL matches collectives by order only, so the two classes "
      "now pair unrelated collectives: they corrupt each other's parameters while sizes agree, and hang "
      "when they do not.%s Fix: %s",
      f.seq, comm_text, ClassRanksText(f.comm_size, with), run_text, DescribeCall(with.head), ClassRanksText(f.comm_size, without),
      DescribeCall(without.head),
      d.basis == DivergenceBasis::kHistory ? " (the run is read off the schedule the ranks agreed on before)"
                                           : " (after the run both classes issue the same collectives again)",
      OthersText(f, d), PathFix(f.regions));
  return w;
}

Words SkippedReduceScatterWords(const Finding& f, const DivergenceFacts& d) {
  const std::string comm_text = CommText(f.comm_id);
  const DivergingClass& with = WithRun(d);
  const DivergingClass& without = WithoutRun(d);
  const CallFacts& rs = d.run.front();
  const double unit_bytes = CallBytes(rs) * f.comm_size;
  const std::string what = f.regions.empty()
                               ? absl::StrFormat("a %s gradient unit (%s)", HumanBytes(unit_bytes), RunText(d.run))
                               : RegionListText(f.regions);
  Words w{" "};
  w.labels = RunLabels(d, absl::StrCat("reduce-scattered ", what),
                       absl::StrCat("skipped it; went on with ", DescribeCall(without.head)));
  w.brief = absl::StrFormat("at %s seq %d: %s did not reduce-scatter %s", comm_text, f.seq,
                            RanksText(without.ranks, f.comm_size), what);
  w.summary = absl::StrFormat(
      "At seq %d of %s, %s issued %s (%zu reduce-scatter%s: the gradient of a parameter unit of %s, %s per "
      "rank) and %s did not: they went on with %s. Their gradient hook for that unit never fired because "
      "its parameters took no part in their forward pass (an expert that received no tokens, a head or "
      "tower skipped for their batch). NCCL now pairs the reduce-scatter with an unrelated collective: "
      "gradients are corrupted while sizes agree, and the job hangs when they do not.%s Fix: make every "
      "parameter take part in every rank's forward (route a zero-weight token through each expert, or add "
      "0 * sum(unit parameters) to the loss), or have the optimizer reduce-scatter a zero gradient for units "
      "a rank did not use (FSDP: use_orig_params with all units in every forward; DeepSpeed: keep experts "
      "in the graph).",
      f.seq, comm_text, ClassRanksText(f.comm_size, with), DescribeCall(with.head), d.run.size(), d.run.size() == 1 ? "" : "s",
      HumanBytes(unit_bytes), HumanBytes(CallBytes(rs)), ClassRanksText(f.comm_size, without), DescribeCall(without.head),
      OthersText(f, d));
  return w;
}

Words SignatureMismatchWords(const Finding& f, const DivergenceFacts& d) {
  const std::string comm_text = CommText(f.comm_id);
  const DivergingClass& major = d.classes[0];
  const DivergingClass& minor = d.classes[1];
  const CallFacts& a = major.head;
  const CallFacts& b = minor.head;
  const double ratio = CallBytes(b) > 0 ? CallBytes(a) / CallBytes(b) : 0;
  Words w{" "};
  w.labels = {DescribeCall(a), DescribeCall(b)};
  if (!f.decided) {
    w.brief = absl::StrFormat("at %s seq %d (undecided: or %s): %s %s on %s, %s on %s", comm_text, f.seq,
                              KindsText(f.other_readings), OpName(a.fn), HumanBytes(CallBytes(a)),
                              RanksText(major.ranks, f.comm_size), HumanBytes(CallBytes(b)),
                              RanksText(minor.ranks, f.comm_size));
    w.summary = absl::StrFormat(
        "At seq %d of %s, %s issued %s while %s issued %s. What was reported cannot tell two readings apart%s: "
        "(1) SIGNATURE_MISMATCH, the same collective with different sizes on the two classes: %s "
        "(2) PATH_DIVERGENCE, different code: %s %s in a module %s skipped or ran elsewhere (a vision tower "
        "for an image batch against text-only batches, an expert, a conditional head), and these are "
        "different collectives that NCCL pairs by order; fix: %s Both hang or corrupt data. To decide: "
        "compare with a clean run (`collwatch diff`), look at where each rank is (`collwatch stacks` on "
        "their pids), or run with NVTX ranges around the modules.%s",
        f.seq, comm_text, ClassRanksText(f.comm_size, major), DescribeCall(a), ClassRanksText(f.comm_size, minor), DescribeCall(b),
        d.major_run.size() <= 1
            ? " (no rank issued a call after it, no NVTX range names the code, and no earlier step "
              "showed these calls)"
            : " (the calls after it look alike on both classes, and no NVTX range names the code)",
        SizeMismatchFix(ratio), RanksText(major.ranks, f.comm_size), major.ranks.size() == 1 ? "is" : "are",
        RanksText(minor.ranks, f.comm_size), PathFix(f.regions), OthersText(f, d));
    return w;
  }
  std::vector<std::string> differences;
  if (a.count != b.count) differences.push_back(absl::StrFormat("count %d vs %d", a.count, b.count));
  if (a.dtype != b.dtype) differences.push_back(absl::StrFormat("dtype %s vs %s", DtypeName(a.dtype), DtypeName(b.dtype)));
  if (a.redop != b.redop) differences.push_back(absl::StrFormat("reduce op %s vs %s", RedOpName(a.redop), RedOpName(b.redop)));
  if (a.root_or_peer != b.root_or_peer) differences.push_back(absl::StrFormat("root %d vs %d", a.root_or_peer, b.root_or_peer));
  w.brief = absl::StrFormat("at %s seq %d: %s (%s)", comm_text, f.seq, OpName(a.fn), absl::StrJoin(differences, ", "));
  std::string cause;
  if (a.dtype != b.dtype) {
    cause = absl::StrFormat(
        "The ranks use different precisions (%s vs %s, byte ratio %.2f): one rank runs under another "
        "autocast / mixed-precision setting or casts the model differently. NCCL reads the buffers with each "
        "rank's own type, so the reduced values are garbage (NaN losses) or the job hangs on the size "
        "difference. Fix: give every rank the same dtype configuration (the same --bf16/--fp32 flag, "
        "torch.autocast region and model.to(dtype) on all ranks).",
        DtypeName(a.dtype), DtypeName(b.dtype), ratio);
  } else if (a.count != b.count) {
    cause = absl::StrCat(d.basis == DivergenceBasis::kStructure
                             ? "The calls after it have the same ops in the same size pattern on both classes: "
                               "the same code with other sizes. "
                             : "The ranks then issue the same collectives again: only this call's size differs. ",
                         "Likely cause: ", SizeMismatchFix(ratio));
  } else {
    cause = "The ranks disagree on the reduction operator or the root: these come from code or configuration "
            "that differs between ranks. Fix: pass the same op and root on every rank.";
  }
  w.summary = absl::StrFormat("At seq %d of %s, %s issued %s while %s issued %s. %s%s", f.seq, comm_text,
                              ClassRanksText(f.comm_size, major), DescribeCall(a), ClassRanksText(f.comm_size, minor), DescribeCall(b), cause,
                              OthersText(f, d));
  return w;
}

Words OpMismatchWords(const Finding& f, const DivergenceFacts& d) {
  const std::string comm_text = CommText(f.comm_id);
  Words w{" "};
  if (d.classes.size() < 2) {
    // The disagreement rests on calls lost in the ring: say what is known.
    w.brief = absl::StrFormat("at %s seq %d (records lost around it)", comm_text, f.seq);
    w.summary = "The ranks disagree at this collective, but records around it were lost in the ring "
                "before they were read, so the classes cannot be told apart. Rerun with a larger ring "
                "(COLLWATCH_RING_RECORDS) and compare the ranks' schedules with collwatch diff.";
    return w;
  }
  const CallFacts& a = d.classes[0].head;
  const CallFacts& b = d.classes[1].head;
  w.labels = {DescribeCall(a), DescribeCall(b)};
  w.brief = absl::StrFormat("at %s seq %d%s: %s vs %s", comm_text, f.seq,
                            f.decided ? "" : absl::StrCat(" (undecided: or ", KindsText(f.other_readings), ")"),
                            OpName(a.fn), OpName(b.fn));
  w.summary = absl::StrFormat(
      "At seq %d of %s, %s issued %s while %s issued %s: different collectives at the same position. NCCL "
      "pairs them anyway: the job hangs or exchanges garbage.%s%s Likely cause: the ranks run different code "
      "or different configurations (a collective under a rank-dependent condition, a metric all-reduce on "
      "some ranks only). Fix: issue the same collectives in the same order on every rank; compare the two "
      "ranks' schedules with `collwatch diff`.",
      f.seq, comm_text, ClassRanksText(f.comm_size, d.classes[0]), DescribeCall(a), ClassRanksText(f.comm_size, d.classes[1]), DescribeCall(b),
      OpMismatchUndecidedText(f, d),
      OthersText(f, d));
  return w;
}

// --- Point-to-point -------------------------------------------------------------------------

Words P2pSignatureMismatchWords(const Finding& f, const P2pFacts& p) {
  const CallFacts& send = *p.send;
  const CallFacts& recv = *p.recv;
  const double ratio = CallBytes(recv) > 0 ? CallBytes(send) / CallBytes(recv) : 0;
  Words w;
  w.labels = {"send", "recv"};
  w.brief = absl::StrFormat("send %d->%d #%d carries %s, the matching recv expects %s", p.sender, p.receiver, f.seq,
                            DescribeCall(send), DescribeCall(recv));
  w.summary = absl::StrFormat(
      "Rank %d's send #%d to rank %d on %s is %s, but rank %d's receive #%d from rank %d is %s (byte "
      "ratio %.2f). NCCL matches point-to-point operations by order only: a size or type mismatch "
      "corrupts the receive buffer or hangs. Both sides must post sends and receives of the same "
      "shape in the same order (pipeline stages: the same micro-batch shapes and dtypes on both "
      "stages).",
      p.sender, f.seq, p.receiver, CommText(f.comm_id), DescribeCall(send), p.receiver, f.seq, p.sender,
      DescribeCall(recv), ratio);
  absl::StrAppend(&w.summary, SendPlaceText(f, p), LibraryPartingText(f));
  return w;
}

Words P2pNotJoinedWords(const Finding& f, const P2pFacts& p) {
  const bool sending = p.send.has_value();
  const CallFacts& call = sending ? *p.send : *p.recv;
  const int32_t waiting = sending ? p.sender : p.receiver;
  const int32_t peer = sending ? p.receiver : p.sender;
  const char* missing = sending ? "recv" : "send";
  Words w;
  w.labels = {sending ? "sending" : "receiving"};
  w.brief = absl::StrFormat("rank %d has not posted the %s matching rank %d's %s #%d on %s", peer, missing, waiting,
                            OpName(call.fn), f.seq, CommText(f.comm_id));
  w.summary = absl::StrFormat(
      "Rank %d posted %s #%d (%s) %.1f s ago and rank %d has not posted its matching %s. Point-to-point "
      "operations pair by order per peer: rank %d is late, skipped this transfer, or posts it in a "
      "different order (a pipeline schedule that differs between stages). Compare the two ranks' p2p "
      "order with `collwatch diff` or `collwatch export --chrome`.",
      waiting, OpName(call.fn), f.seq, DescribeCall(call), p.waited_s, peer, missing, peer);
  return w;
}

// --- Stalls ---------------------------------------------------------------------------------

bool CannotRun(const StalledRank& rank) {
  return rank.trouble == ProcessTrouble::kStopped || rank.trouble == ProcessTrouble::kDiskWait;
}

Words NotJoinedWords(const Finding& f, const StallFacts& s) {
  const std::string where = CollectiveText(f.comm_id, f.seq, s.call);
  const std::vector<int32_t>& lagging = f.lagging_ranks;
  std::vector<int32_t> troubled;
  std::vector<std::string> troubles;  // late ranks whose process cannot run: the cause
  std::string trouble_word;
  for (const StalledRank& rank : s.ranks) {
    if (!CannotRun(rank)) continue;
    troubled.push_back(rank.rank);
    trouble_word = TroubleWord(rank);
    if (troubles.size() < 4) troubles.push_back(RankTroubleText(rank));
  }
  std::vector<std::string> doing;
  bool none_started = true;
  bool untraced = false;  // a late rank with no trace that took part before
  for (const StalledRank& rank : s.ranks) {
    if (doing.size() == 4) {
      doing.push_back(absl::StrCat("and ", lagging.size() - 4, " more"));
      break;
    }
    if (rank.reported) none_started = none_started && rank.entered_seq == 0;
    if (!rank.reported && f.seq > 1) untraced = true;
    doing.push_back(LateRankText(rank, f.seq));
  }
  std::string cause;
  if (!troubled.empty()) {
    cause = absl::StrFormat(
        "That is the cause: %s. The others cannot go on without it, and nothing is wrong with the "
        "network or the collective itself. Continue it, or find what stopped it (a debugger or "
        "py-spy attached, a job-control signal, a checkpoint or preemption tool, the node's storage).",
        absl::StrJoin(troubles, "; "));
  } else if (untraced) {
    cause = "Without its trace, what holds it is unknown: it was stopped (a debugger, a job-control signal), "
            "it ended, or it went on alone (a rank that ran past mismatched collectives, or finished the "
            "job, while its peers hang). Find its state: its exit status and log, or its stacks if it still "
            "runs (a rank that wrote no Flight Recorder dump was usually stopped or gone when the others timed "
            "out).";
  } else if (IsReplayLane(f.comm_id)) {
    cause = "These are replays of a collective captured into a CUDA graph: the late ranks have replayed it fewer "
            "times, or replay graphs without it. A graph replayed a different number of times on some ranks (a "
            "data-dependent early stop, an extra or a warm-up replay on one rank) leaves the others' replay "
            "waiting on the GPU, and their hosts at the next synchronisation. Replay the graphs the same number "
            "of times, in the same order, on every rank; the late ranks' stacks (below) show where their hosts "
            "went instead.";
  } else if (none_started) {
    cause = "The late ranks have not started this communicator's first collective: they are still before "
            "their first forward (data loading, a checkpoint load, compilation, or a filesystem stall on that "
            "node). Find what that rank does before its first forward (its stacks, below, or `collwatch "
            "stacks` on its pid); warm up or pre-stage data on every rank, and start timing only after a barrier.";
  } else {
    cause = "The late ranks are doing something else between collectives: extra work on some ranks only "
            "(logging, evaluation or checkpointing on rank 0 without a barrier), a slow node, or a wait on "
            "another communicator. Look at where they are (their stacks, below, or `collwatch stacks` on their "
            "pids) and make the work symmetric or move it after a collective everyone joins.";
  }
  Words w;
  w.labels = {"entered the collective", "not arrived"};
  w.brief = absl::StrFormat(
      "%s not at %s after %.1f s; %s waiting%s", RanksText(lagging, f.comm_size), where, s.waited_s,
      RanksText(s.entered, f.comm_size),
      troubled.empty() ? "" : absl::StrFormat("; %s %s", RanksText(troubled, f.comm_size), trouble_word));
  w.summary = absl::StrFormat("%s entered %s %.1f s ago and %s for %s (stall threshold %.1f s). %s. %s",
                              Capitalized(RanksText(s.entered, f.comm_size)), where, s.waited_s,
                              RanksVerb(s.entered, "wait"), RanksText(lagging, f.comm_size), s.threshold_s,
                              absl::StrJoin(doing, "; "), cause);
  return w;
}

Words TransportStallWords(const Finding& f, const StallFacts& s) {
  const std::string where = CollectiveText(f.comm_id, f.seq, s.call);
  // A rank whose process cannot run (stopped, stuck in I/O, ended) holds the collective
  // up: that is the cause, whatever the network does.
  std::vector<int32_t> troubled;
  std::vector<std::string> troubles;
  std::string trouble_word;
  for (const StalledRank& rank : s.ranks) {
    if (rank.trouble == ProcessTrouble::kNone) continue;
    if (troubled.empty()) trouble_word = rank.lost ? "gone" : TroubleWord(rank);
    troubled.push_back(rank.rank);
    if (troubles.size() < 4) troubles.push_back(RankTroubleText(rank));
  }
  const std::string what = absl::StrFormat(
      "Every rank of %s entered seq %d with the same signature %.1f s ago, and it has not completed (expected "
      "about %.2f s for %s per rank from this job's earlier collectives; threshold %.1f s).",
      CommText(f.comm_id), f.seq, s.waited_s, s.expected_s, HumanBytes(CallBytes(s.call)), s.threshold_s);
  Words w;
  w.labels = {"entered, not completed"};
  if (!troubled.empty()) {
    w.brief = absl::StrFormat("all %d ranks entered %s %.1f s ago; %s %s", f.comm_size, where, s.waited_s,
                              RanksText(troubled, f.comm_size), trouble_word);
    w.summary = absl::StrFormat(
        "%s The cause is not the network: %s. A collective completes only while every rank's process runs (the "
        "host side of the transfer and NCCL's proxy thread live in it). Continue it, or find what stopped it (a "
        "debugger or py-spy attached, a job-control signal, a checkpoint or preemption tool, the node's storage).",
        what, absl::StrJoin(troubles, "; "));
    return w;
  }
  w.brief = absl::StrFormat("all %d ranks entered %s %.1f s ago; it has not completed", f.comm_size, where, s.waited_s);
  w.summary = absl::StrFormat(
      "%s Every rank's process is alive and not stopped, and the ranks agree on what to do, so the problem is "
      "below them: the network or NVLink/PCIe path (a flapping link, an InfiniBand or RoCE error), a GPU that "
      "stopped making progress (Xid errors in dmesg), or an earlier kernel on that stream that never finished. "
      "Check NCCL_DEBUG=INFO output and dmesg on each node, and nvidia-smi for a GPU at 100%% with no progress.",
      what);
  return w;
}

Words CommInitStallWords(const Finding& f, const StallFacts& s) {
  const std::vector<int32_t>& waiting = s.entered;
  const std::vector<int32_t>& missing = f.lagging_ranks;
  const std::string comm_text = CommText(f.comm_id);
  // Missing ranks whose process is there: alive (and maybe stopped) before their call.
  std::vector<std::string> alive;
  std::vector<int32_t> troubled;
  std::string trouble_word;
  for (const StalledRank& rank : s.ranks) {
    if (CannotRun(rank)) {
      if (troubled.empty()) trouble_word = TroubleWord(rank);
      troubled.push_back(rank.rank);
    }
    if (alive.size() < 4) {
      const ProcessReport report = rank.process.value_or(ProcessReport{});
      alive.push_back(!CannotRun(rank)
                          ? absl::StrFormat("rank %d (pid %d on %s) is alive (%s%s) and has not called it yet",
                                            rank.rank, report.pid, report.host, report.state,
                                            report.cpu_advancing ? ", CPU advancing" : ", CPU idle")
                          : absl::StrFormat("rank %d is alive but %s, before calling it", rank.rank, TroubleText(rank)));
    }
  }
  Words w;
  w.labels = {"inside communicator creation"};
  w.brief = absl::StrFormat("%s of %d (size %d) waits %.1f s in creation%s%s", RanksText(waiting, f.comm_size),
                            s.ranks_present, f.comm_size, s.waited_s,
                            missing.empty() ? "" : absl::StrCat("; missing ", RanksText(missing, f.comm_size)),
                            troubled.empty() ? "" : absl::StrCat(", ", trouble_word));
  if (missing.empty()) {
    w.summary = absl::StrFormat(
        "Every rank of %s (%d ranks) entered communicator creation, and %s have not left it after %.1f s. The "
        "ranks found each other, so the bootstrap network or the transport setup is stuck: check "
        "NCCL_SOCKET_IFNAME / NCCL_IB_HCA, firewalls between nodes, and NCCL_DEBUG=INFO output of the waiting "
        "ranks.",
        comm_text, f.comm_size, RanksText(waiting, f.comm_size), s.waited_s);
  } else if (!alive.empty()) {
    w.summary = absl::StrFormat(
        "%s entered creation of %s (size %d) %.1f s ago and %s for %s. %s. %s",
        Capitalized(RanksText(waiting, f.comm_size)), comm_text, f.comm_size, s.waited_s, RanksVerb(waiting, "wait"),
        RanksText(missing, f.comm_size), absl::StrJoin(alive, "; "),
        troubled.empty() ? "They are still busy before it (data loading, a checkpoint load, compilation) or took "
                           "another path (a new_group or split called on some ranks only): find where they are "
                           "(their stacks, below, or `collwatch stacks` on their pids)."
                         : "That is the cause: continue it, or find what stopped it (a debugger or py-spy "
                           "attached, a job-control signal, the node's storage).");
  } else {
    w.summary = absl::StrFormat(
        "%s entered creation of %s (size %d) %.1f s ago and %s for %s, which never called it. Those ranks did not "
        "start, crashed before it, took another path (a new_group or split called on some ranks only), or were "
        "given another unique id or world size. Check their logs and that every rank calls the same communicator "
        "creations in the same order with the same MASTER_ADDR.",
        Capitalized(RanksText(waiting, f.comm_size)), comm_text, f.comm_size, s.waited_s, RanksVerb(waiting, "wait"),
        RanksText(missing, f.comm_size));
  }
  return w;
}

Words RankLostWords(const Finding& f, const StallFacts& s) {
  std::vector<std::string> states;
  for (const StalledRank& rank : s.ranks) {
    const ProcessReport report = rank.process.value_or(ProcessReport{});
    states.push_back(absl::StrFormat("rank %d (%s pid %d) %s", rank.rank, report.host, report.pid,
                                     report.ended.empty() ? std::string(ProcessStatusName(rank.status)) : report.ended));
  }
  Words w;
  w.brief = absl::StrFormat("%s%s gone; %s waiting at %s", RanksText(f.lagging_ranks, f.comm_size),
                            JobRanksNote(s.lost_place), RanksText(s.entered, f.comm_size), CollectiveText(f.comm_id, f.seq, s.call));
  w.summary = absl::StrFormat(
      "%s. The other ranks entered this collective and will wait for it until the NCCL or PyTorch "
      "timeout: nothing they do from here on can complete. Look at the lost process's own output for "
      "the cause (an exception, the OOM killer, a segfault, a node failure); collwatch has its records "
      "up to its last call. Fix that rank's failure, and use an elastic launcher (torchrun "
      "--max-restarts) or a job-level abort so the survivors do not sit out the timeout.",
      Capitalized(absl::StrJoin(states, "; ")));
  if (!s.also_missing.empty()) {
    absl::StrAppend(&w.summary, " ", Capitalized(RanksText(s.also_missing, f.comm_size)),
                    s.also_missing.size() == 1 ? " has" : " have", " not entered it either, and ",
                    s.also_missing.size() == 1 ? "was" : "were", " still running when this was found.");
  }
  if (!s.same_call_before.empty()) absl::StrAppend(&w.summary, " ", LeftOutOrFailedText(f, s));
  return w;
}

// --- Stalls that resolved ---------------------------------------------------------------------

// A straggler: the wait ended and the job went on. Said as such, with how long it lasted.
Words StragglerWords(const Finding& f, const StallFacts& s, const StallResolution& r) {
  const std::string where = CollectiveText(f.comm_id, f.seq, s.call);
  const std::string after = absl::StrFormat(
      "reported %.1f s into the wait (stall threshold %.1f s), it resolved %.1f s after that, and the job went on: a "
      "straggler, not a hang, which does not make the job unhealthy",
      f.detect_latency_s, s.threshold_s, r.resolved_after_s);
  const std::string advice =
      "If the pause is expected (a checkpoint or an evaluation on one rank), the threshold for joining grows with "
      "the longest arrival spread seen, so it is reported once; to avoid even that, set --stall-after above it, "
      "or move the work after a collective every rank joins (docs/findings.md).";
  Words w;
  if (f.kind == FindingKind::kNotJoined) {
    const std::vector<int32_t>& late = f.lagging_ranks;
    w.labels = {"entered the collective", absl::StrFormat("arrived %.1f s late", r.lag_s)};
    w.brief = absl::StrFormat("straggler: %s arrived %.1f s late at %s; the job went on", RanksText(late, f.comm_size),
                              r.lag_s, where);
    w.summary = absl::StrFormat(
        "%s arrived at %s %.1f s after %s entered it; %s. The waiting ranks lost that time: extra work on some ranks "
        "only (logging, evaluation or checkpointing on rank 0 without a barrier), a slow node, or a slow start. %s",
        Capitalized(RanksText(late, f.comm_size)), where, r.lag_s, RanksText(s.entered, f.comm_size), after, advice);
    return w;
  }
  if (f.kind == FindingKind::kCommInitStall) {
    w.labels = {"waited in creation"};
    w.brief = absl::StrFormat("straggler: creating %s took %.1f s; the job went on", CommText(f.comm_id), r.lag_s);
    w.summary = absl::StrFormat(
        "Creating %s took %.1f s: %s waited for %s; %s. Ranks that start late (data loading, a checkpoint load, "
        "compilation) hold up the others' first communicator. %s",
        CommText(f.comm_id), r.lag_s, RanksText(s.entered, f.comm_size), RanksText(f.lagging_ranks, f.comm_size),
        after, advice);
    return w;
  }
  w.labels = {"entered, completed late"};
  w.brief = absl::StrFormat("straggler: %s completed %.1f s after every rank entered it; the job went on", where,
                            r.lag_s);
  w.summary = absl::StrFormat(
      "Every rank of %s entered seq %d and it completed %.1f s later (expected about %.2f s); %s. A collective this "
      "slow that still completes is a slow or congested link, a throttled GPU, or a rank whose process was briefly "
      "held up.",
      CommText(f.comm_id), f.seq, r.lag_s, s.expected_s, after);
  return w;
}

// --- One place ------------------------------------------------------------------------------

// The ranks a finding names whose streams were refused: the finding may rest on a gap.
std::string RefusedStreamsText(const Finding& f) {
  std::vector<std::string> streams;
  for (const RefusedStream& stream : f.refused_streams) {
    streams.push_back(absl::StrCat(stream.rank >= 0 ? absl::StrCat("rank ", stream.rank) : std::string("a process"),
                                   " (host ", stream.host, ", pid ", stream.pid, ", job '", stream.job, "')"));
  }
  return absl::StrCat("But the collector refused the records of ", absl::StrJoin(streams, ", "),
                      ": they came as another job, so what this says of ",
                      f.refused_streams.size() == 1 ? "that rank" : "those ranks",
                      " may only mean that its records never arrived. Give every node the same job id "
                      "(COLLWATCH_JOB_ID, or the launcher's: docs/multi-node.md).");
}

std::optional<Words> WordsOf(const Finding& f) {
  if (const auto* d = std::get_if<DivergenceFacts>(&f.evidence)) {
    switch (f.kind) {
      case FindingKind::kPathDivergence: return PathDivergenceWords(f, *d);
      case FindingKind::kSkippedReduceScatter: return SkippedReduceScatterWords(f, *d);
      case FindingKind::kSignatureMismatch: return SignatureMismatchWords(f, *d);
      case FindingKind::kOpMismatch: return OpMismatchWords(f, *d);
      default: return std::nullopt;
    }
  }
  if (const auto* p = std::get_if<P2pFacts>(&f.evidence)) {
    switch (f.kind) {
      case FindingKind::kSignatureMismatch: return P2pSignatureMismatchWords(f, *p);
      case FindingKind::kNotJoined: return P2pNotJoinedWords(f, *p);
      default: return std::nullopt;
    }
  }
  if (const auto* c = std::get_if<CycleFacts>(&f.evidence)) {
    return f.kind == FindingKind::kWaitCycle ? WaitCycleWords(f, *c) : OrderInversionWords(f, *c);
  }
  if (const auto* s = std::get_if<StallFacts>(&f.evidence)) {
    if (f.resolution && f.kind != FindingKind::kRankLost) return StragglerWords(f, *s, *f.resolution);
    switch (f.kind) {
      case FindingKind::kNotJoined: return NotJoinedWords(f, *s);
      case FindingKind::kTransportStall:
      case FindingKind::kRankNotRunning: return TransportStallWords(f, *s);
      case FindingKind::kCommInitStall: return CommInitStallWords(f, *s);
      case FindingKind::kRankLost: return RankLostWords(f, *s);
      default: return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace

void WriteWords(Finding* finding) {
  std::optional<Words> words = WordsOf(*finding);
  if (!words) return;
  finding->headline = absl::StrCat(std::string(FindingKindName(finding->kind)), words->joint, words->brief);
  finding->brief = std::move(words->brief);
  finding->summary = std::move(words->summary);
  if (!finding->refused_streams.empty()) absl::StrAppend(&finding->summary, " ", RefusedStreamsText(*finding));
  for (size_t i = 0; i < finding->rank_classes.size() && i < words->labels.size(); ++i) {
    finding->rank_classes[i].label = std::move(words->labels[i]);
  }
  for (ClassContext& context : finding->context) {
    context.lines.clear();
    for (const ContextCall& call : context.calls) context.lines.push_back(ContextLine(call.agreed ? '=' : '>', call.call));
    if (context.more_reported > 0) context.lines.push_back(absl::StrFormat("  ... %d more reported", context.more_reported));
  }
}

}  // namespace collwatch::analyzer
