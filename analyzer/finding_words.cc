// Phrases shared by every finding's words. Threading: see finding_words.h.
#include "analyzer/finding_words.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analyzer/call_sites.h"
#include "analyzer/finding_evidence.h"

namespace collwatch::analyzer {
namespace {

bool Contains(std::string_view text, std::string_view word) { return text.find(word) != std::string_view::npos; }

}  // namespace

std::string RanksText(const std::vector<int32_t>& ranks, int32_t nranks) {
  const std::string list = RankListText(ranks, 8, nranks);
  if (list.rfind("all but ", 0) == 0) return absl::StrCat("all ranks but ", list.substr(8));
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", list);
}

std::string RanksVerb(const std::vector<int32_t>& ranks, std::string_view verb) {
  return ranks.size() == 1 ? absl::StrCat(std::string(verb), "s") : std::string(verb);
}

std::string Capitalized(std::string text) {
  if (!text.empty()) text[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(text[0])));
  return text;
}

std::string DescribeCall(const CallFacts& call) {
  std::string text = absl::StrFormat("%s %s (%u x %s)", OpName(call.fn), HumanBytes(CallBytes(call)), call.count,
                                     DtypeName(call.dtype));
  if (call.redop >= 0 && call.fn != ring::ApiFn::kAllGather) absl::StrAppend(&text, " ", std::string(RedOpName(call.redop)));
  if (call.root_or_peer >= 0) {
    absl::StrAppend(&text, ring::IsP2p(call.fn) ? " peer " : " root ", call.root_or_peer);
  }
  absl::StrAppend(&text, InRegionText(call));
  return text;
}

std::string DescribeCall(const JobModel& model, const Call& call) { return DescribeCall(FactsOf(model, call)); }

std::string InRegionText(const CallFacts& call) { return call.region.empty() ? "" : absl::StrCat(" in ", call.region); }

std::string RegionListText(const std::vector<std::string>& regions, size_t max_names) {
  std::vector<std::string> shown(regions.begin(), regions.begin() + static_cast<ptrdiff_t>(std::min(max_names, regions.size())));
  std::string text = absl::StrJoin(shown, ", ");
  if (regions.size() > max_names) absl::StrAppend(&text, " and ", regions.size() - max_names, " more");
  return text;
}

std::string RunText(std::span<const CallFacts> calls) {
  // Per op, in order of first appearance: how many, and the sizes with their repeats.
  struct OpSizes {
    std::string op;
    size_t calls = 0;
    std::vector<std::pair<std::string, size_t>> sizes;
  };
  std::vector<OpSizes> ops;
  for (const CallFacts& call : calls) {
    const std::string op(OpName(call.fn));
    auto entry = std::find_if(ops.begin(), ops.end(), [&](const OpSizes& o) { return o.op == op; });
    if (entry == ops.end()) entry = ops.insert(ops.end(), OpSizes{op, 0, {}});
    ++entry->calls;
    const std::string size = HumanBytes(CallBytes(call));
    auto same = std::find_if(entry->sizes.begin(), entry->sizes.end(), [&](const auto& s) { return s.first == size; });
    if (same == entry->sizes.end()) {
      entry->sizes.emplace_back(size, 1);
    } else {
      ++same->second;
    }
  }
  std::vector<std::string> parts;
  for (const OpSizes& op : ops) {
    std::string text = absl::StrCat(op.calls, " ", op.op, op.calls == 1 ? "" : "s");
    if (op.sizes.size() == 1) {
      absl::StrAppend(&text, " of ", op.sizes[0].first);
    } else {
      std::vector<std::string> sizes;
      for (const auto& [size, repeats] : op.sizes) {
        sizes.push_back(repeats == 1 ? size : absl::StrCat(size, " x", repeats));
      }
      absl::StrAppend(&text, " (", absl::StrJoin(sizes.size() > 4 ? std::vector<std::string>(sizes.begin(), sizes.begin() + 4) : sizes, ", "),
                      sizes.size() > 4 ? ", ..." : "", ")");
    }
    parts.push_back(std::move(text));
  }
  return absl::StrJoin(parts, ", ");
}

std::string RunWithRegions(std::span<const CallFacts> calls) {
  const std::vector<std::string> regions = RegionsOf(calls);
  return regions.empty() ? RunText(calls) : absl::StrCat(RunText(calls), " in ", RegionListText(regions, 3));
}

std::string ContextLine(char mark, const CallFacts& call) {
  return absl::StrFormat("%c seq %-6d %s", mark, call.seq, DescribeCall(call));
}

std::string JobRanksNote(const JobPlace& place) {
  std::vector<std::string> parts;
  if (!place.global.empty()) {
    parts.push_back(absl::StrCat("global ", place.global.size() == 1 ? "rank " : "ranks ", RankListText(place.global)));
  }
  for (const JobPlace::SharedProcess& process : place.shared) {
    parts.push_back(absl::StrCat("in the process of ", ProcessLabel(process.ranks, process.host, process.pid)));
  }
  return parts.empty() ? "" : absl::StrCat(" (", absl::StrJoin(parts, "; "), ")");
}

std::string ClassRanksText(int32_t nranks, const DivergingClass& rank_class) {
  return absl::StrCat(RanksText(rank_class.ranks, nranks), JobRanksNote(rank_class.place));
}

std::string OthersText(const Finding& f, const DivergenceFacts& d) {
  std::string others;
  if (d.classes.size() > 2) {
    std::vector<std::string> parts;
    for (size_t c = 2; c < d.classes.size(); ++c) {
      parts.push_back(absl::StrFormat("%s issued %s", RanksText(d.classes[c].ranks, f.comm_size),
                                      DescribeCall(d.classes[c].head)));
    }
    others = absl::StrCat(" ", d.classes.size(), " classes in all; also ", absl::StrJoin(parts, "; "), ".");
  }
  if (!f.lagging_ranks.empty()) {
    absl::StrAppend(&others, " ", RanksText(f.lagging_ranks, f.comm_size), " had not reached seq ", f.seq, " yet.");
  }
  return others;
}

std::string CollectiveText(uint64_t comm_id, uint64_t seq, const CallFacts& call) {
  return absl::StrFormat("%s seq %d (%s)", CommText(comm_id), seq, DescribeCall(call));
}

std::string KindsText(const std::vector<FindingKind>& kinds) {
  std::vector<std::string> names;
  for (FindingKind kind : kinds) names.emplace_back(FindingKindName(kind));
  return absl::StrJoin(names, " or ");
}

std::string TroubleText(const StalledRank& rank) {
  const int32_t pid = rank.process ? rank.process->pid : 0;
  const std::string host = rank.process ? rank.process->host : "";
  switch (rank.trouble) {
    case ProcessTrouble::kNone:
      return "";
    case ProcessTrouble::kStopped:
      return absl::StrFormat(
          "its process (pid %d on %s) is stopped: a SIGSTOP, a debugger or job control holds it, and it runs no "
          "code at all (not even NCCL's proxy thread) until it is continued (kill -CONT %d)",
          pid, host, pid);
    case ProcessTrouble::kDiskWait:
      return absl::StrFormat(
          "its process (pid %d on %s) is in uninterruptible I/O%s: a filesystem, network mount or device on that "
          "node does not answer",
          pid, host, rank.wait_channel.empty() ? "" : absl::StrCat(" (in ", rank.wait_channel, ")"));
    case ProcessTrouble::kEnded: {
      const std::string ended = rank.process ? rank.process->ended : "";
      return absl::StrFormat("its process (pid %d on %s) %s", pid, host, ended.empty() ? "stopped reporting" : ended);
    }
  }
  return "";
}

std::string TroubleWord(const StalledRank& rank) {
  return rank.trouble == ProcessTrouble::kStopped ? "stopped" : "in uninterruptible I/O";
}

std::string RankTroubleText(const StalledRank& rank) {
  return absl::StrFormat("rank %d%s: %s", rank.rank, JobRanksNote(rank.place), TroubleText(rank));
}

std::string LateRankText(const StalledRank& rank, uint64_t waited_seq) {
  const ProcessReport report = rank.process.value_or(ProcessReport{});
  if (!rank.reported && waited_seq > 1) {
    // No trace of it, yet the collectives before completed, which takes every rank.
    return absl::StrFormat("Rank %d left no trace on this communicator, yet seq 1-%d completed, which takes "
                           "every rank: it took part up to seq %d at least, and where it went after is not "
                           "recorded",
                           rank.rank, waited_seq - 1, waited_seq - 1);
  }
  if (!rank.reported) {
    return rank.process ? absl::StrFormat("Rank %d has not reported on this communicator at all (process "
                                          "pid %d %s, no NCCL call on it yet)",
                                          rank.rank, report.pid, report.state)
                        : absl::StrFormat("Rank %d has not reported on this communicator at all", rank.rank);
  }
  const std::string position = rank.entered_seq == 0 ? "has issued no collective on this communicator yet"
                                                     : absl::StrFormat("is at seq %d", rank.entered_seq);
  std::string last = "no NCCL call";
  if (rank.last_call) {
    const RecentCall& call = *rank.last_call;
    // A process of several ranks: its last call may be another rank's; say whose (a call
    // on no communicator, comm_id 0, is no rank's).
    const bool say_whose = rank.shares_process && call.comm_id != 0;
    last = absl::StrFormat(
        "%s last NCCL call was %s%s %.1f s ago, %s", rank.shares_process ? "its process's" : "its", OpName(call.call.fn),
        say_whose ? absl::StrFormat(" by rank %d of %s", call.rank, CommText(call.comm_id)) : "", call.ago_s,
        call.completed ? "finished" : (call.returned ? "returned" : "still inside NCCL"));
    if (!call.call.region.empty()) absl::StrAppend(&last, ", in ", call.call.region);
  }
  return absl::StrFormat("Rank %d%s %s; %s (process %s%s)", rank.rank, JobRanksNote(rank.place), position, last,
                         report.state, report.cpu_advancing ? ", CPU advancing" : "");
}

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
  return "make the module run on every rank (a dummy input on the ranks that would skip it, e.g. a dummy "
         "image for text-only batches of a vision-language model, a zero-weight token for an unused expert) "
         "or make the branch decision collectively (rank 0 decides and broadcasts it).";
}

std::string DamagedLabelsText(const Process& process) {
  if (process.damaged_labels == 0) return "";
  const ProcessInfo& info = process.info;
  const std::string who = info.global_rank >= 0
                              ? absl::StrCat("rank ", info.global_rank, " (", info.host, ", pid ", info.pid, ")")
                              : absl::StrCat("pid ", info.pid, " (", info.host, ")");
  const std::string first =
      process.first_damaged_seq == 0
          ? ""
          : absl::StrCat("; the first at ", CommText(process.first_damaged_comm), " #", process.first_damaged_seq);
  const bool one = process.damaged_labels == 1;
  return absl::StrCat(who, ": ", process.damaged_labels, one ? " call names" : " calls name",
                      " an NVTX region or a call path that could not be read (damaged or lost", first, "): ",
                      one ? "its region is" : "their regions are", " unknown and the comparison skipped them");
}

std::string SizeMismatchFix(double ratio) {
  return absl::StrFormat(
      "the ranks communicate tensors of different sizes (byte ratio %.2f): a different model configuration, "
      "padding or bucket layout on some ranks, or a tensor whose shape depends on the rank's data. Fix: make "
      "the communicated shapes identical on every rank (same config; pad variable-length data to a common "
      "size first).",
      ratio);
}

// What an undecided OP_MISMATCH could also be, and how to tell (empty when decided).
std::string OpMismatchUndecidedText(const Finding& f, const DivergenceFacts& d) {
  if (f.decided) return "";
  const bool skipped_reduce_scatter =
      std::find(f.other_readings.begin(), f.other_readings.end(), FindingKind::kSkippedReduceScatter) !=
      f.other_readings.end();
  if (!skipped_reduce_scatter) {
    return " Nothing after it was reported to tell whether one class issued an extra collective the other "
           "skipped (a PATH_DIVERGENCE) or both issued one call each.";
  }
  const DivergingClass& with = d.classes[0].head.fn == ring::ApiFn::kReduceScatter ? d.classes[0] : d.classes[1];
  const DivergingClass& without = &with == &d.classes[0] ? d.classes[1] : d.classes[0];
  return absl::StrFormat(
      " It is the first collective of the communicator and no rank issued a call after it, so two readings "
      "fit: (1) OP_MISMATCH, each class issued one different collective here; (2) SKIPPED_REDUCE_SCATTER, "
      "%s skipped a reduce-scatter that %s issued (a gradient hook that did not fire: a parameter unused "
      "on those ranks) and went on to its next collective; fix: use every parameter on every rank, or "
      "tell the wrapper which are unused. To decide: look at where each rank is (`collwatch stacks` on "
      "their pids), or compare with a clean run (`collwatch diff`).",
      RanksText(without.ranks, f.comm_size), RanksText(with.ranks, f.comm_size));
}

std::string SeqListText(const std::vector<uint64_t>& seqs) {
  std::vector<std::string> numbers;
  for (uint64_t seq : seqs) numbers.push_back(absl::StrCat(seq));
  if (numbers.size() <= 1) return absl::StrCat("seq ", absl::StrJoin(numbers, ""));
  const std::string last = numbers.back();
  numbers.pop_back();
  return absl::StrCat("seq ", absl::StrJoin(numbers, ", "), " and ", last);
}

std::string LeftOutOrFailedText(const Finding& f, const StallFacts& s) {
  const std::vector<int32_t>& lost = f.lagging_ranks;
  const std::vector<uint64_t>& before = s.same_call_before;
  const std::string they = lost.size() == 1 ? "it" : "they";
  // Evenly spaced, and this one the next: the call recurs as a step's calls do.
  const uint64_t period = before.back() < f.seq ? f.seq - before.back() : 0;
  bool recurs = before.size() >= 2 && period > 0;
  for (size_t i = 1; i < before.size(); ++i) recurs = recurs && before[i] - before[i - 1] == period;
  std::string text = absl::StrFormat(
      "%s completed every collective before seq %d and never issued it, the %s that %s had issued with the others at "
      "%s%s. The records cannot tell two readings apart: %s failed on the way to it (%s own output names the error), "
      "or %s left this call out and failed after.",
      Capitalized(RanksText(lost, f.comm_size)), f.seq, DescribeCall(s.call), they, SeqListText(before),
      recurs ? absl::StrFormat(" (once every %d collectives, as a training step's calls recur)", period) : "", they,
      lost.size() == 1 ? "its" : "their", they);
  if (s.call.fn == ring::ApiFn::kAllReduce) {
    absl::StrAppend(
        &text,
        " The second is what DistributedDataParallel does when a parameter gets no gradient on one rank (a branch "
        "not taken, an expert no token chose): that rank never all-reduces the parameter's gradient bucket, and its "
        "next forward raises \"Expected to have finished reduction in the prior iteration\". If that is the error, "
        "pass find_unused_parameters=True to DistributedDataParallel, or make the branch run on every rank (scale "
        "its output by zero where it is not wanted).");
  } else {
    absl::StrAppend(&text, " If it was left out, the code that issues it ran on some ranks only: make it run on "
                           "every rank.");
  }
  return text;
}

std::string LibraryPartingText(const Finding& f) {
  const std::optional<BranchPoint> parting = LibraryPartingOf(f.call_paths);
  if (!parting) return "";
  std::string text = absl::StrCat(" Their call paths part inside ", BranchPointText(*parting), ".");
  for (const BranchArm& arm : parting->arms) {
    if (arm.callee.find("_initialize_stage") == std::string::npos) continue;
    absl::StrAppend(
        &text, absl::StrFormat(
                   " %s's side comes from the stage set-up that a torch.distributed.pipelining schedule runs on "
                   "its own first step, while the other side was already in its microbatches: the stages "
                   "stepped different schedule objects (one built anew, for example for another number of "
                   "microbatches, on one stage only). Fix: build one schedule per stage with the same "
                   "n_microbatches on every stage, and give every stage batches of the same size (drop or pad "
                   "a short last batch on all stages alike).",
                   arm.ranks.size() == 1 ? absl::StrCat("Rank ", arm.ranks[0]) : std::string("That")));
    break;
  }
  return text;
}

namespace {

// Whether `rank`'s call path runs in a torch.distributed.pipelining schedule of several
// stages a rank (PipelineScheduleMulti and its runtime: interleaved, looped, zero-bubble).
bool InMultiStageSchedule(const Finding& f, int32_t rank) {
  for (const ClassCallPath& path : f.call_paths) {
    if (std::find(path.ranks.begin(), path.ranks.end(), rank) == path.ranks.end()) continue;
    for (const CallFrame& frame : path.path.frames) {
      if (absl::StartsWith(frame.function, "PipelineScheduleMulti.") ||
          absl::StartsWith(frame.function, "_PipelineScheduleRuntime.")) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace

std::string SendPlaceText(const Finding& f, const P2pFacts& p) {
  if (!p.send_place) return "";
  const P2pRhythm& r = p.sender_rhythm;
  const RhythmPlace& place = *p.send_place;
  // Where its first calls are forgotten, neither the set-up nor the repetition is counted.
  const size_t repetition = place.repetition + 1;
  const bool counted = p.rhythm_whole;
  std::string text = absl::StrFormat(
      " Rank %d's calls with rank %d repeat every %d (%s)%s; this send is send %d of %d in %s", p.sender, p.receiver,
      r.period_calls, RunsText(r.period),
      counted && r.offset != 0 ? absl::StrFormat(", after %d calls of set-up", r.offset) : "", place.nth, place.of,
      counted ? absl::StrFormat("repetition %d", repetition) : "its repetition");
  if (!InMultiStageSchedule(f, p.sender)) {
    absl::StrAppend(&text, absl::StrFormat(" (in a pipeline schedule: microbatch %d of %d in %s).", place.nth, place.of,
                                           counted ? absl::StrFormat("its stage's step %d", repetition)
                                                   : "a step of its stage"));
    return text;
  }
  // Each microbatch crosses between the two ranks once for every pair of their stages that
  // exchange: sends are not microbatches. Every stage runs its microbatches in order, so
  // only a step's first send is known to carry microbatch 1.
  absl::StrAppend(&text, absl::StrFormat(
                             ". With several stages a rank (PipelineScheduleMulti) each microbatch crosses between "
                             "the two ranks once for every pair of their stages that exchange, so %d sends a step "
                             "are not %d microbatches; ",
                             place.of, place.of));
  if (place.nth == 1) {
    absl::StrAppend(&text, "as every stage runs its microbatches in order, this first send of ",
                    counted ? absl::StrFormat("step %d", repetition) : std::string("its step"),
                    " carries microbatch 1.");
  } else {
    absl::StrAppend(&text, "which microbatch this send carries follows the schedule's order of actions, which "
                           "NCCL's calls do not show.");
  }
  return text;
}

}  // namespace collwatch::analyzer
