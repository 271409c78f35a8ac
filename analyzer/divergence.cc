// A divergence explained: the rank classes from the first mismatch on, their
// classification (classification.h), and the finding's words, which follow from the
// evidence: no padding advice for an inserted run, both readings where it cannot decide.
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analyzer/analyzer.h"
#include "analyzer/classification.h"
#include "analyzer/finding_words.h"
#include "analyzer/process_ranks.h"

namespace collwatch::analyzer {
namespace {

using ring::ApiFn;

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

bool Contains(std::string_view text, std::string_view word) { return text.find(word) != std::string_view::npos; }

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
  return "make the module run on every rank (a dummy input on the ranks that would skip it, e.g. a dummy "
         "image for text-only batches of a vision-language model, a zero-weight token for an unused expert) "
         "or make the branch decision collectively (rank 0 decides and broadcasts it).";
}

std::string SizeMismatchFix(double ratio) {
  return absl::StrFormat(
      "the ranks communicate tensors of different sizes (byte ratio %.2f): a different model configuration, "
      "padding or bucket layout on some ranks, or a tensor whose shape depends on the rank's data. Fix: make "
      "the communicated shapes identical on every rank (same config; pad variable-length data to a common "
      "size first).",
      ratio);
}

// A run with its regions where it has any: "5 all-gathers of 6.0 MiB in fwd/vision.*".
std::string RunWithRegions(const JobModel& model, std::span<const Call* const> run) {
  const std::vector<std::string> regions = RegionsOf(model, run);
  return regions.empty() ? RunText(run) : absl::StrCat(RunText(run), " in ", RegionListText(regions, 3));
}

std::string KindsText(const std::vector<FindingKind>& kinds) {
  std::vector<std::string> names;
  for (FindingKind kind : kinds) names.emplace_back(FindingKindName(kind));
  return absl::StrJoin(names, " or ");
}

}  // namespace

Finding Analyzer::ExplainDivergence(const Comm& comm, uint64_t seq, int64_t now_ns, bool final_pass,
                                    bool* wants_more) const {
  *wants_more = false;
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
    std::vector<uint64_t> head;
    for (size_t i = 0; i < common; ++i) head.push_back(HashOf(FingerprintOf(*calls[i])));
    class_of[head].push_back(rank);
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
    finding.decided = false;
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
  std::vector<const Call*> history;
  const int32_t history_rank = representative(classes[0]);
  for (uint64_t s = seq > options_.history_window ? seq - options_.history_window : 1; s < seq; ++s) {
    if (const Call* call = model_.Collective(comm, history_rank, s)) history.push_back(call);
  }
  const Classification verdict = ClassifyDivergence({major, minor, history, window});
  *wants_more = verdict.wants_more;

  const Call& a = *major.front();
  const Call& b = *minor.front();
  Finding finding;
  finding.kind = verdict.kind;
  finding.decided = verdict.decided;
  finding.other_readings = verdict.other_readings;
  finding.comm_id = comm.id;
  finding.seq = seq;
  finding.lagging_ranks = not_there;
  finding.first_bad_ns = first_bad;
  finding.found_ns = final_pass ? std::max(last_needed, verdict.last_evidence->enter_ns) : now_ns;
  const std::string comm_text = CommText(comm.id);
  auto ranks_of = [&](const std::vector<int32_t>& ranks) {
    return absl::StrCat(RanksText(ranks, comm.nranks), JobRanksNote(model_, comm, ranks));
  };
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
  // One-sided runs: which class issued the run, which skipped it.
  const std::vector<int32_t>& with_run = verdict.major_inserted ? classes[0] : classes[1];
  const std::vector<int32_t>& without_run = verdict.major_inserted ? classes[1] : classes[0];
  const Call& with_head = verdict.major_inserted ? a : b;
  const Call& without_head = verdict.major_inserted ? b : a;
  auto order_classes = [&] {
    if (finding.rank_classes[0].ranks != classes[0]) std::swap(finding.rank_classes[0], finding.rank_classes[1]);
  };

  switch (finding.kind) {
    case FindingKind::kPathDivergence: {
      if (verdict.two_sided) {
        const std::vector<const Call*> all = [&] {
          std::vector<const Call*> both = verdict.major_run;
          both.insert(both.end(), verdict.minor_run.begin(), verdict.minor_run.end());
          return both;
        }();
        finding.regions = RegionsOf(model_, all);
        const std::string major_text = RunWithRegions(model_, verdict.major_run);
        const std::string minor_text = RunWithRegions(model_, verdict.minor_run);
        if (verdict.basis == DivergenceBasis::kRegions) {
          // One call each, told apart by where it was issued: the regions say it all.
          finding.rank_classes = {RankClass{classes[0], absl::StrCat("issued it", InRegionText(model_, a))},
                                  RankClass{classes[1], absl::StrCat("issued it", InRegionText(model_, b))}};
          finding.headline = absl::StrFormat("PATH_DIVERGENCE at %s seq %d: %s%s, %s%s", comm_text, seq,
                                             RanksText(classes[0], comm.nranks), InRegionText(model_, a),
                                             RanksText(classes[1], comm.nranks), InRegionText(model_, b));
        } else {
          finding.rank_classes = {RankClass{classes[0], absl::StrCat("issued ", major_text)},
                                  RankClass{classes[1], absl::StrCat("issued ", minor_text)}};
          finding.headline = absl::StrFormat("PATH_DIVERGENCE at %s seq %d: %s issued %s where %s issued %s",
                                             comm_text, seq, RanksText(classes[0], comm.nranks), major_text,
                                             RanksText(classes[1], comm.nranks), minor_text);
        }
        // A single call reads best as itself; a stretch by its ops and sizes, then its first call.
        auto stretch_text = [&](const std::vector<const Call*>& stretch, const std::string& text) {
          return stretch.size() == 1 ? DescribeCall(model_, *stretch.front())
                                     : absl::StrCat(text, " (first: ", DescribeCall(model_, *stretch.front()), ")");
        };
        std::string evidence;
        if (verdict.basis == DivergenceBasis::kRegions) {
          evidence = "The calls come from different NVTX regions: the ranks are running different code.";
        } else if (verdict.open_ended) {
          evidence = absl::StrFormat(
              "The %d calls each class reported from here do not line up with the other class's in op or "
              "size pattern, as the same code with another configuration would: the ranks are running "
              "different code.",
              verdict.major_run.size());
        } else {
          evidence = "Then both went on with the same collectives: the ranks ran different code for that "
                     "stretch.";
        }
        finding.summary = absl::StrFormat(
            "From seq %d of %s, %s issued %s where %s issued %s. %s NCCL matches collectives by order only, "
            "so from here on the ranks exchange the wrong tensors (silently, while the sizes happen to agree) "
            "or hang.%s Likely cause: a data-dependent branch, e.g. a module that runs only for some batches "
            "(image vs text-only samples, an unused expert, a conditional head). Fix: %s",
            seq, comm_text, ranks_of(classes[0]), stretch_text(verdict.major_run, major_text), ranks_of(classes[1]),
            stretch_text(verdict.minor_run, minor_text), evidence, others, PathFix(finding.regions));
        break;
      }
      finding.regions = RegionsOf(model_, verdict.run);
      const std::string run_text = RunWithRegions(model_, verdict.run);
      const std::string region_list = RegionListText(finding.regions, 3);
      finding.rank_classes = {
          RankClass{with_run, absl::StrCat("ran ", verdict.run.size(), " extra collective", verdict.run.size() == 1 ? "" : "s",
                                           region_list.empty() ? "" : absl::StrCat(" (", region_list, ")"))},
          RankClass{without_run, absl::StrCat("skipped them; went on with ", DescribeCall(model_, without_head))}};
      order_classes();
      finding.headline = absl::StrFormat("PATH_DIVERGENCE at %s seq %d: %s ran %s that %s skipped", comm_text, seq,
                                         RanksText(with_run, comm.nranks), run_text, RanksText(without_run, comm.nranks));
      finding.summary = absl::StrFormat(
          "From seq %d of %s, %s issued %s (first: %s) that %s did not issue; those went straight on with %s. "
          "The ranks took different code paths%s. NCCL matches collectives by order only, so the two classes "
          "now pair unrelated collectives: they corrupt each other's parameters while sizes agree, and hang "
          "when they do not.%s Fix: %s",
          seq, comm_text, ranks_of(with_run), run_text, DescribeCall(model_, with_head), ranks_of(without_run),
          DescribeCall(model_, without_head),
          verdict.basis == DivergenceBasis::kHistory
              ? " (the run is read off the schedule the ranks agreed on before)"
              : absl::StrFormat(" (after the run both classes issue the same collectives again)"),
          others, PathFix(finding.regions));
      break;
    }
    case FindingKind::kSkippedReduceScatter: {
      const Call& rs = *verdict.run.front();
      const double unit_bytes = CallBytes(rs) * comm.nranks;
      finding.regions = RegionsOf(model_, verdict.run);
      const std::string what = finding.regions.empty()
                                   ? absl::StrFormat("a %s gradient unit (%s)", HumanBytes(unit_bytes), RunText(verdict.run))
                                   : RegionListText(finding.regions);
      finding.rank_classes = {RankClass{with_run, absl::StrCat("reduce-scattered ", what)},
                              RankClass{without_run, absl::StrCat("skipped it; went on with ", DescribeCall(model_, without_head))}};
      order_classes();
      finding.headline = absl::StrFormat("SKIPPED_REDUCE_SCATTER at %s seq %d: %s did not reduce-scatter %s", comm_text,
                                         seq, RanksText(without_run, comm.nranks), what);
      finding.summary = absl::StrFormat(
          "At seq %d of %s, %s issued %s (%zu reduce-scatter%s: the gradient of a parameter unit of %s, %s per "
          "rank) and %s did not: they went on with %s. Their gradient hook for that unit never fired because "
          "its parameters took no part in their forward pass (an expert that received no tokens, a head or "
          "tower skipped for their batch). NCCL now pairs the reduce-scatter with an unrelated collective: "
          "gradients are corrupted while sizes agree, and the job hangs when they do not.%s Fix: make every "
          "parameter take part in every rank's forward (route a zero-weight token through each expert, or add "
          "0 * sum(unit parameters) to the loss), or have the optimizer reduce-scatter a zero gradient for units "
          "a rank did not use (FSDP: use_orig_params with all units in every forward; DeepSpeed: keep experts "
          "in the graph).",
          seq, comm_text, ranks_of(with_run), DescribeCall(model_, with_head), verdict.run.size(),
          verdict.run.size() == 1 ? "" : "s", HumanBytes(unit_bytes), HumanBytes(CallBytes(rs)), ranks_of(without_run),
          DescribeCall(model_, without_head), others);
      break;
    }
    case FindingKind::kSignatureMismatch: {
      finding.regions = RegionsOf(model_, std::vector<const Call*>{&a, &b});
      std::vector<std::string> differences;
      if (a.count != b.count) differences.push_back(absl::StrFormat("count %d vs %d", a.count, b.count));
      if (a.dtype != b.dtype) differences.push_back(absl::StrFormat("dtype %s vs %s", DtypeName(a.dtype), DtypeName(b.dtype)));
      if (a.redop != b.redop) differences.push_back(absl::StrFormat("reduce op %s vs %s", RedOpName(a.redop), RedOpName(b.redop)));
      if (a.root_or_peer != b.root_or_peer) differences.push_back(absl::StrFormat("root %d vs %d", a.root_or_peer, b.root_or_peer));
      const double ratio = CallBytes(b) > 0 ? CallBytes(a) / CallBytes(b) : 0;
      finding.rank_classes = {RankClass{classes[0], DescribeCall(model_, a)}, RankClass{classes[1], DescribeCall(model_, b)}};
      if (!verdict.decided) {
        finding.headline = absl::StrFormat("SIGNATURE_MISMATCH at %s seq %d (undecided: or %s): %s %s on %s, %s on %s",
                                           comm_text, seq, KindsText(verdict.other_readings), OpName(a.fn),
                                           HumanBytes(CallBytes(a)), RanksText(classes[0], comm.nranks),
                                           HumanBytes(CallBytes(b)), RanksText(classes[1], comm.nranks));
        finding.summary = absl::StrFormat(
            "At seq %d of %s, %s issued %s while %s issued %s. What was reported cannot tell two readings apart%s: "
            "(1) SIGNATURE_MISMATCH, the same collective with different sizes on the two classes: %s "
            "(2) PATH_DIVERGENCE, different code: %s %s in a module %s skipped or ran elsewhere (a vision tower "
            "for an image batch against text-only batches, an expert, a conditional head), and these are "
            "different collectives that NCCL pairs by order; fix: %s Both hang or corrupt data. To decide: "
            "compare with a clean run (`collwatch diff`), look at where each rank is (py-spy dump on their "
            "pids), or run with NVTX ranges around the modules.%s",
            seq, comm_text, ranks_of(classes[0]), DescribeCall(model_, a), ranks_of(classes[1]),
            DescribeCall(model_, b),
            verdict.major_run.size() <= 1
                ? " (no rank issued a call after it, no NVTX range names the code, and no earlier step "
                  "showed these calls)"
                : " (the calls after it look alike on both classes, and no NVTX range names the code)",
            SizeMismatchFix(ratio), RanksText(classes[0], comm.nranks), classes[0].size() == 1 ? "is" : "are",
            RanksText(classes[1], comm.nranks),
            PathFix(finding.regions), others);
        break;
      }
      finding.headline = absl::StrFormat("SIGNATURE_MISMATCH at %s seq %d: %s (%s)", comm_text, seq, OpName(a.fn),
                                         absl::StrJoin(differences, ", "));
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
        cause = absl::StrCat(verdict.basis == DivergenceBasis::kStructure
                                 ? "The calls after it have the same ops in the same size pattern on both classes: "
                                   "the same code with other sizes. "
                                 : "The ranks then issue the same collectives again: only this call's size differs. ",
                             "Likely cause: ", SizeMismatchFix(ratio));
      } else {
        cause = "The ranks disagree on the reduction operator or the root: these come from code or configuration "
                "that differs between ranks. Fix: pass the same op and root on every rank.";
      }
      finding.summary = absl::StrFormat("At seq %d of %s, %s issued %s while %s issued %s. %s%s", seq, comm_text,
                                        ranks_of(classes[0]), DescribeCall(model_, a), ranks_of(classes[1]),
                                        DescribeCall(model_, b), cause, others);
      break;
    }
    default: {
      finding.kind = FindingKind::kOpMismatch;
      finding.regions = RegionsOf(model_, std::vector<const Call*>{&a, &b});
      finding.rank_classes = {RankClass{classes[0], DescribeCall(model_, a)}, RankClass{classes[1], DescribeCall(model_, b)}};
      finding.headline = absl::StrFormat("OP_MISMATCH at %s seq %d%s: %s vs %s", comm_text, seq,
                                         verdict.decided ? "" : absl::StrCat(" (undecided: or ", KindsText(verdict.other_readings), ")"),
                                         OpName(a.fn), OpName(b.fn));
      finding.summary = absl::StrFormat(
          "At seq %d of %s, %s issued %s while %s issued %s: different collectives at the same position. NCCL "
          "pairs them anyway: the job hangs or exchanges garbage.%s%s Likely cause: the ranks run different code "
          "or different configurations (a collective under a rank-dependent condition, a metric all-reduce on "
          "some ranks only). Fix: issue the same collectives in the same order on every rank; compare the two "
          "ranks' schedules with `collwatch diff`.",
          seq, comm_text, ranks_of(classes[0]), DescribeCall(model_, a), ranks_of(classes[1]), DescribeCall(model_, b),
          verdict.decided ? "" : " Nothing after it was reported to tell whether one class issued an extra "
                                 "collective the other skipped (a PATH_DIVERGENCE) or both issued one call each.",
          others);
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
