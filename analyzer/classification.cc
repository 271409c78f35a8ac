// Divergence classification: alignment first, then the agreed history, then the
// signatures and shapes of what each class reported.
#include "analyzer/classification.h"

#include <algorithm>
#include <optional>

#include "analyzer/alignment.h"

namespace collwatch::analyzer {
namespace {

using ring::ApiFn;

uint64_t HashOfCall(const Call& call) { return HashOf(FingerprintOf(call)); }

std::vector<uint64_t> Hashes(std::span<const Call* const> calls) {
  std::vector<uint64_t> hashes;
  hashes.reserve(calls.size());
  for (const Call* call : calls) hashes.push_back(HashOfCall(*call));
  return hashes;
}

std::vector<const Call*> Prefix(std::span<const Call* const> calls, size_t n) {
  return {calls.begin(), calls.begin() + static_cast<ptrdiff_t>(std::min(n, calls.size()))};
}

const Call* Later(const Call* a, const Call* b) { return a->enter_ns >= b->enter_ns ? a : b; }

FindingKind InsertedRunKind(const std::vector<const Call*>& run) {
  const bool reduce_scatters_only = std::all_of(run.begin(), run.end(), [](const Call* call) {
    return call->fn == ApiFn::kReduceScatter;
  });
  return reduce_scatters_only ? FindingKind::kSkippedReduceScatter : FindingKind::kPathDivergence;
}

// The run the agreed history shows between a call like `from` and the next call like
// `to`: what one class ran and the other skipped. Where the history shows `from` after
// the same call that precedes the divergence (the last agreed one), that occurrence is
// the one the diverging class repeats; otherwise, where NVTX regions make each call's
// fingerprint specific (`labelled`), the latest occurrence. Without regions, units of
// equal size look alike, and an occurrence in another context is too often another call.
std::optional<std::vector<const Call*>> HistoryRun(std::span<const Call* const> history, uint64_t from, uint64_t to,
                                                   size_t max_run, bool labelled) {
  if (history.empty()) return std::nullopt;
  const uint64_t before_divergence = HashOfCall(*history.back());
  for (const bool same_context : {true, false}) {
    if (!same_context && !labelled) break;
    for (size_t start = history.size(); start-- > 0;) {
      if (HashOfCall(*history[start]) != from) continue;
      if (same_context && (start == 0 || HashOfCall(*history[start - 1]) != before_divergence)) continue;
      for (size_t end = start + 1; end < history.size() && end - start <= max_run; ++end) {
        if (HashOfCall(*history[end]) == to) {
          return std::vector<const Call*>(history.begin() + static_cast<ptrdiff_t>(start),
                                          history.begin() + static_cast<ptrdiff_t>(end));
        }
      }
    }
  }
  return std::nullopt;
}

// Whether the first n calls of a and b have one shape: the same op and dtype at every
// position, and equal counts on one side exactly where the other has equal counts (the
// same calls, with sizes scaled), and whether those counts vary at all.
struct ShapeComparison {
  bool same = true;
  bool varied = false;
};
ShapeComparison CompareShapes(std::span<const Call* const> a, std::span<const Call* const> b, size_t n) {
  ShapeComparison shape;
  for (size_t i = 0; i < n && shape.same; ++i) {
    shape.same = a[i]->fn == b[i]->fn && a[i]->dtype == b[i]->dtype;
    shape.varied = shape.varied || a[i]->count != a[0]->count || b[i]->count != b[0]->count;
    for (size_t j = 0; j < i && shape.same; ++j) {
      shape.same = (a[i]->count == a[j]->count) == (b[i]->count == b[j]->count);
    }
  }
  return shape;
}

void SetTwoSided(Classification* c, std::vector<const Call*> major_run, std::vector<const Call*> minor_run,
                 bool open_ended) {
  c->two_sided = true;
  c->open_ended = open_ended;
  c->major_run = std::move(major_run);
  c->minor_run = std::move(minor_run);
}

// Both classes issued a stretch of calls the other did not, then agreed again.
void ClassifySubstitution(Classification* c, std::span<const Call* const> major, std::span<const Call* const> minor,
                          size_t major_run, size_t minor_run) {
  const Call& a = *major.front();
  const Call& b = *minor.front();
  c->kind = FindingKind::kPathDivergence;
  SetTwoSided(c, Prefix(major, major_run), Prefix(minor, minor_run), /*open_ended=*/false);
  if (major_run != minor_run) return;
  bool same_ops = true;
  bool regions_only = false;
  for (size_t i = 0; i < major_run; ++i) {
    same_ops = same_ops && major[i]->fn == minor[i]->fn;
    regions_only = regions_only || FingerprintOf(*major[i]).SameSignature(FingerprintOf(*minor[i]));
  }
  if (same_ops && !regions_only) {
    c->kind = FindingKind::kSignatureMismatch;
  } else if (!same_ops && major_run == 1 && (a.fn == ApiFn::kReduceScatter) != (b.fn == ApiFn::kReduceScatter)) {
    c->kind = FindingKind::kSkippedReduceScatter;
    c->two_sided = false;
    c->major_inserted = a.fn == ApiFn::kReduceScatter;
    c->run = {c->major_inserted ? &a : &b};
  } else if (!same_ops && major_run == 1) {
    c->kind = FindingKind::kOpMismatch;
  }
}

}  // namespace

Classification ClassifyDivergence(const DivergenceEvidence& evidence) {
  const std::span<const Call* const> major = evidence.major;
  const std::span<const Call* const> minor = evidence.minor;
  const Call& a = *major.front();
  const Call& b = *minor.front();
  Classification c;
  c.last_evidence = Later(&a, &b);

  // Where the classes agree again after the differing stretch, the stretch is the answer.
  const FirstDifference first = AlignFirstDifference(Hashes(major), Hashes(minor));
  if (first.matched_after > 0) {
    c.basis = DivergenceBasis::kAlignment;
    c.wants_more = first.matched_after < kFirmAnchor;
    c.last_evidence = Later(major[first.a_run + first.matched_after - 1], minor[first.b_run + first.matched_after - 1]);
    if ((first.a_run == 0) != (first.b_run == 0)) {
      c.major_inserted = first.a_run > 0;
      c.run = c.major_inserted ? Prefix(major, first.a_run) : Prefix(minor, first.b_run);
      c.kind = InsertedRunKind(c.run);
    } else {
      ClassifySubstitution(&c, major, minor, first.a_run, first.b_run);
    }
    return c;
  }

  // A reduce-scatter against another collective: a gradient hook that did not fire. (It
  // comes before the history: without regions a backward re-gather looks like its forward
  // gather, so the history can show a spurious run ending in a same-sized reduce-scatter.)
  const uint64_t major_head = HashOfCall(a);
  const uint64_t minor_head = HashOfCall(b);
  const bool labelled = a.region != 0 && b.region != 0;
  if ((a.fn == ApiFn::kReduceScatter) != (b.fn == ApiFn::kReduceScatter)) {
    c.kind = FindingKind::kSkippedReduceScatter;
    c.major_inserted = a.fn == ApiFn::kReduceScatter;
    // The history may show several reduce-scatters skipped together.
    std::optional<std::vector<const Call*>> run =
        c.major_inserted ? HistoryRun(evidence.history, major_head, minor_head, evidence.max_run, labelled)
                         : HistoryRun(evidence.history, minor_head, major_head, evidence.max_run, labelled);
    if (run && InsertedRunKind(*run) == FindingKind::kSkippedReduceScatter) {
      c.basis = DivergenceBasis::kHistory;
      c.run = *std::move(run);
    } else if (evidence.history.empty() && major.size() == 1 && minor.size() == 1) {
      // One call on each side, nothing agreed before it and nothing after (PyTorch's
      // desync case: all_gather_base on one rank, reduce_scatter_base on the other, as the
      // first calls): as likely two different collectives as one a class skipped.
      c.basis = DivergenceBasis::kHeadsOnly;
      c.kind = FindingKind::kOpMismatch;
      c.decided = false;
      c.other_readings = {FindingKind::kSkippedReduceScatter};
      c.wants_more = true;
    } else {
      c.basis = DivergenceBasis::kHeadsOnly;
      c.run = {c.major_inserted ? &a : &b};
      c.wants_more = true;  // an anchor reported later would show the run whole
    }
    return c;
  }

  // Blocking backends stop every rank inside its first differing call: the schedule the
  // ranks agreed on before may show one class's call followed, later, by the other's.
  if (auto run = HistoryRun(evidence.history, major_head, minor_head, evidence.max_run, labelled)) {
    c.basis = DivergenceBasis::kHistory;
    c.major_inserted = true;
    c.run = *std::move(run);
  } else if (auto other = HistoryRun(evidence.history, minor_head, major_head, evidence.max_run, labelled)) {
    c.basis = DivergenceBasis::kHistory;
    c.major_inserted = false;
    c.run = *std::move(other);
  }
  if (c.basis == DivergenceBasis::kHistory) {
    c.kind = InsertedRunKind(c.run);
    return c;
  }

  // The same op from code in other NVTX regions: the regions tell the paths apart (a
  // realignment reported later would show the run whole).
  if (a.fn == b.fn && a.region != b.region) {
    c.basis = DivergenceBasis::kRegions;
    c.kind = FindingKind::kPathDivergence;
    c.wants_more = true;
    SetTwoSided(&c, {&a}, {&b}, /*open_ended=*/false);
    return c;
  }

  // Same op and element count, other dtype, reduce op or root: the same call, configured
  // differently (no other code path gathers exactly as many elements in another dtype).
  if (a.fn == b.fn && a.count == b.count) {
    c.basis = DivergenceBasis::kSignature;
    c.kind = FindingKind::kSignatureMismatch;
    return c;
  }

  // No realignment: compare the shapes of what both classes reported.
  const size_t n = std::min(major.size(), minor.size());
  c.wants_more = true;
  c.last_evidence = Later(major[n - 1], minor[n - 1]);
  if (n >= 2) {
    c.basis = DivergenceBasis::kStructure;
    const ShapeComparison shape = CompareShapes(major, minor, n);
    if (!shape.same) {
      c.kind = FindingKind::kPathDivergence;
      SetTwoSided(&c, Prefix(major, n), Prefix(minor, n), /*open_ended=*/true);
      return c;
    }
    if (n >= kStructureCalls && shape.varied) {
      c.kind = FindingKind::kSignatureMismatch;
      return c;
    }
  }
  // Calls from different statements are different calls, whatever their sizes: the same
  // call configured differently is issued from the same line.
  if (evidence.heads_from_different_code) {
    c.basis = DivergenceBasis::kCallSites;
    c.kind = FindingKind::kPathDivergence;
    SetTwoSided(&c, Prefix(major, n), Prefix(minor, n), /*open_ended=*/true);
    return c;
  }
  // The first differing calls (or a stretch of identical-looking ones) are all there is:
  // a size or op difference of the same call, or calls of code the other class skipped.
  c.decided = false;
  c.kind = a.fn == b.fn ? FindingKind::kSignatureMismatch : FindingKind::kOpMismatch;
  c.other_readings = {FindingKind::kPathDivergence};
  SetTwoSided(&c, Prefix(major, n), Prefix(minor, n), /*open_ended=*/true);
  return c;
}

}  // namespace collwatch::analyzer
