// A divergence explained: the rank classes from the first mismatch on, their
// classification (classification.h), and the evidence the finding's words need (what each
// class issued, the runs, where the ranks sit in the job); finding_text.cc words it.
#include <algorithm>
#include <map>

#include "analyzer/analyzer.h"
#include "analyzer/classification.h"
#include "analyzer/finding_evidence.h"
#include "analyzer/process_ranks.h"
#include "analyzer/rank_ranges.h"

namespace collwatch::analyzer {
namespace {

// A reported rank's calls from `seq` on (gaps from lost records skipped), at most `limit`:
// its own (`exact`), or for reading only what they are, folded ones as their references'
// (JobModel::CollectiveLike: every rank's read, none made again). Into `calls`, emptied
// first.
void CallsFrom(const JobModel& model, const Comm& comm, int32_t rank, uint64_t seq, size_t limit, bool exact,
               std::vector<const Call*>* calls) {
  calls->clear();
  const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
  const uint64_t last = entry.progress.entered();
  for (uint64_t s = std::max<uint64_t>(seq, entry.FirstHeldSeq()); s <= last && calls->size() < limit; ++s) {
    if (const Call* call = exact ? model.Collective(comm, rank, s) : model.CollectiveLike(comm, rank, s)) {
      calls->push_back(call);
    }
  }
}

// Whether two calls' call paths, both read from the calling thread, part where their ranks
// ran different statements (different lines of one function, or one line that led to
// different user functions).
bool FromDifferentCode(const JobModel& model, const Call& a, const Call& b) {
  if (a.call_path == 0 || b.call_path == 0 || a.call_path_inferred || b.call_path_inferred) return false;
  const std::optional<BranchPoint> point =
      BranchPointOf({{{}, model.call_path(a.call_path), false}, {{}, model.call_path(b.call_path), false}});
  if (!point || point->arms.size() != 2) return false;
  const BranchArm& x = point->arms[0];
  const BranchArm& y = point->arms[1];
  return x.line != y.line || (!x.callee.empty() && !y.callee.empty() && x.callee != y.callee);
}

}  // namespace

Finding Analyzer::ExplainDivergence(const Comm& comm, uint64_t seq, int64_t now_ns, bool final_pass,
                                    bool* wants_more) const {
  *wants_more = false;
  const auto nranks = static_cast<int32_t>(comm.ranks.size());
  const size_t window = options_.alignment_window;
  // Each reporting rank's calls from the mismatch on, read in rank ranges (rank_ranges.h),
  // each range's summary joined in rank order.
  std::vector<std::vector<const Call*>> calls_by_rank(static_cast<size_t>(nranks));
  struct RangeRead {
    std::vector<int32_t> not_there;
    size_t common = SIZE_MAX;
    int64_t first_bad = INT64_MAX, last_needed = 0;
  };
  const int32_t ranges = RankRangesFor(options_.read_threads, nranks, window);
  if (ranges > 1) {
    // Their room made here, filled by the readers: it stays with this thread's allocator,
    // which the readers' own arenas would otherwise add to (36 MiB at 131,072 ranks).
    for (int32_t rank = 0; rank < nranks; ++rank) {
      const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
      if (!entry.present || entry.progress.entered() < seq) continue;
      calls_by_rank[static_cast<size_t>(rank)].reserve(std::min<uint64_t>(window, entry.progress.entered() - seq + 1));
    }
  }
  std::vector<RangeRead> range_reads(static_cast<size_t>(ranges));
  ForRankRanges(nranks, ranges, [&](int32_t range, int32_t first_rank, int32_t end_rank) {
    RangeRead& read = range_reads[static_cast<size_t>(range)];
    for (int32_t rank = first_rank; rank < end_rank; ++rank) {
      const CommRank& entry = comm.ranks[static_cast<size_t>(rank)];
      if (!entry.present || entry.progress.entered() < seq) {
        read.not_there.push_back(rank);
        continue;
      }
      std::vector<const Call*>& calls = calls_by_rank[static_cast<size_t>(rank)];
      CallsFrom(model_, comm, rank, seq, window, /*exact=*/false, &calls);
      if (calls.empty()) {
        read.not_there.push_back(rank);
        continue;
      }
      read.common = std::min(read.common, calls.size());
      CallTimes front;
      model_.CollectiveLike(comm, rank, calls.front()->seq, &front);
      read.first_bad = std::min(read.first_bad, front.enter_ns);
      read.last_needed = std::max(read.last_needed, front.enter_ns);
    }
  });
  std::vector<int32_t> not_there;
  size_t common = window;
  int64_t first_bad = INT64_MAX, last_needed = 0;
  for (const RangeRead& read : range_reads) {
    not_there.insert(not_there.end(), read.not_there.begin(), read.not_there.end());
    common = std::min(common, read.common);
    first_bad = std::min(first_bad, read.first_bad);
    last_needed = std::max(last_needed, read.last_needed);
  }
  // Classes: identical sequences over the stretch every reporting rank has. Each range keeps
  // one key per class it saw (not one per rank), joined in range order: ranks stay in order.
  using ClassesByHead = std::map<std::vector<uint64_t>, std::vector<int32_t>>;
  std::vector<ClassesByHead> range_classes(static_cast<size_t>(ranges));
  ForRankRanges(nranks, ranges, [&](int32_t range, int32_t first_rank, int32_t end_rank) {
    std::vector<uint64_t> head;
    for (int32_t rank = first_rank; rank < end_rank; ++rank) {
      const auto& calls = calls_by_rank[static_cast<size_t>(rank)];
      if (calls.empty()) continue;
      head.clear();
      for (size_t i = 0; i < common; ++i) head.push_back(HashOf(FingerprintOf(*calls[i])));
      range_classes[static_cast<size_t>(range)][head].push_back(rank);
    }
  });
  ClassesByHead class_of;
  for (ClassesByHead& seen : range_classes) {
    for (auto& [head, ranks] : seen) {
      std::vector<int32_t>& all = class_of[head];
      all.insert(all.end(), ranks.begin(), ranks.end());
    }
  }
  std::vector<std::vector<int32_t>> classes;
  for (auto& [key, ranks] : class_of) classes.push_back(std::move(ranks));
  std::sort(classes.begin(), classes.end(), [](const auto& a, const auto& b) {
    return a.size() != b.size() ? a.size() > b.size() : a.front() < b.front();
  });
  if (classes.size() < 2) {
    // The disagreement rests on calls lost in the ring: no classes to tell apart.
    Finding finding;
    finding.kind = FindingKind::kOpMismatch;
    finding.decided = false;
    finding.comm_id = comm.id;
    finding.comm_size = comm.nranks;
    finding.seq = seq;
    finding.lagging_ranks = not_there;
    finding.first_bad_ns = first_bad == INT64_MAX ? now_ns : first_bad;
    finding.found_ns = now_ns;
    finding.evidence = DivergenceFacts{};
    return finding;
  }
  // Each class speaks through its member that reported the most, read as its own calls.
  auto representative = [&](const std::vector<int32_t>& ranks) {
    int32_t best = ranks.front();
    for (int32_t rank : ranks) {
      if (calls_by_rank[static_cast<size_t>(rank)].size() > calls_by_rank[static_cast<size_t>(best)].size()) best = rank;
    }
    return best;
  };
  for (const std::vector<int32_t>& ranks : classes) {
    const int32_t rank = representative(ranks);
    CallsFrom(model_, comm, rank, seq, window, /*exact=*/true, &calls_by_rank[static_cast<size_t>(rank)]);
  }
  const std::vector<const Call*>& major = calls_by_rank[static_cast<size_t>(representative(classes[0]))];
  const std::vector<const Call*>& minor = calls_by_rank[static_cast<size_t>(representative(classes[1]))];
  std::vector<const Call*> history;
  const uint64_t history_from = seq > options_.history_window ? seq - options_.history_window : 1;
  // With bounded history only the HistoryKeeper holds it all (the ranks agreed below seq).
  int32_t history_rank = representative(classes[0]);
  const int32_t keeper = HistoryKeeper(comm);
  const uint64_t history_held_from = comm.ranks[static_cast<size_t>(history_rank)].FirstHeldSeq();
  if (history_held_from > history_from && keeper >= 0 &&
      comm.ranks[static_cast<size_t>(keeper)].FirstHeldSeq() < history_held_from) {
    history_rank = keeper;
  }
  for (uint64_t s = history_from; s < seq; ++s) {
    if (const Call* call = model_.Collective(comm, history_rank, s)) history.push_back(call);
  }
  const Classification verdict = ClassifyDivergence(
      {major, minor, history, window, FromDifferentCode(model_, *major.front(), *minor.front())});
  *wants_more = verdict.wants_more;

  Finding finding;
  finding.kind = verdict.kind == FindingKind::kPathDivergence || verdict.kind == FindingKind::kSkippedReduceScatter ||
                         verdict.kind == FindingKind::kSignatureMismatch
                     ? verdict.kind
                     : FindingKind::kOpMismatch;
  finding.decided = verdict.decided;
  finding.other_readings = verdict.other_readings;
  finding.comm_id = comm.id;
  finding.comm_size = comm.nranks;
  finding.seq = seq;
  finding.lagging_ranks = not_there;
  finding.first_bad_ns = first_bad;
  finding.found_ns = final_pass ? std::max(last_needed, verdict.last_evidence->enter_ns) : now_ns;
  finding.rank_classes = {RankClass{classes[0], ""}, RankClass{classes[1], ""}};
  DivergenceFacts facts;
  for (const std::vector<int32_t>& ranks : classes) {
    const Call& head = *calls_by_rank[static_cast<size_t>(representative(ranks))].front();
    facts.classes.push_back(DivergingClass{ranks, JobPlaceOf(model_, comm, ranks), FactsOf(model_, head)});
  }
  for (const DivergingClass& diverging : facts.classes) AddCallPath(diverging.ranks, diverging.head, &finding);
  if (finding.call_paths.size() == facts.classes.size()) {
    finding.branch_point = BranchPointOf(finding.call_paths);
    if (finding.branch_point) WithSourceLines(&*finding.branch_point, options_.source_access);
    finding.first_parted = FirstPartingOf(finding.call_paths);
    if (finding.first_parted) WithSourceLines(&*finding.first_parted, options_.source_access);
  }
  facts.basis = verdict.basis;
  facts.major_inserted = verdict.major_inserted;
  facts.run = FactsOf(model_, verdict.run);
  facts.two_sided = verdict.two_sided;
  facts.open_ended = verdict.open_ended;
  facts.major_run = FactsOf(model_, verdict.major_run);
  facts.minor_run = FactsOf(model_, verdict.minor_run);
  // The regions involved: of the runs where one class issued calls the other did not, else
  // of the two differing calls.
  if (finding.kind == FindingKind::kPathDivergence && verdict.two_sided) {
    std::vector<CallFacts> both = facts.major_run;
    both.insert(both.end(), facts.minor_run.begin(), facts.minor_run.end());
    finding.regions = RegionsOf(both);
  } else if (finding.kind == FindingKind::kPathDivergence || finding.kind == FindingKind::kSkippedReduceScatter) {
    finding.regions = RegionsOf(facts.run);
  } else {
    finding.regions = RegionsOf(std::vector<CallFacts>{facts.classes[0].head, facts.classes[1].head});
  }
  finding.evidence = std::move(facts);

  // The aligned sequences: two agreed calls, then what each class did.
  for (const std::vector<int32_t>& ranks : classes) {
    const int32_t rank = representative(ranks);
    ClassContext context;
    context.ranks = ranks;
    for (uint64_t s = seq > kContextCalls ? seq - kContextCalls : 1; s < seq; ++s) {
      if (const Call* call = model_.Collective(comm, rank, s)) context.calls.push_back({true, FactsOf(model_, *call)});
    }
    const auto& calls = calls_by_rank[static_cast<size_t>(rank)];
    for (size_t i = 0; i < calls.size() && i < 8; ++i) context.calls.push_back({false, FactsOf(model_, *calls[i])});
    context.more_reported = calls.size() > 8 ? calls.size() - 8 : 0;
    finding.context.push_back(std::move(context));
  }
  return finding;
}

}  // namespace collwatch::analyzer
