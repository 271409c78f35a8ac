// Step folding (see step_folding.h): every candidate period is scanned for its longest
// run of copies; the expansion reads segments without materialising them.
// Threading: pure functions over their arguments.
#include "analyzer/step_folding.h"

#include <algorithm>
#include <array>
#include <limits>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace collwatch::analyzer {
namespace {

struct Repeat {
  size_t start = 0;
  size_t period = 0;
  size_t times = 0;
  uint64_t hidden() const { return times < 2 ? 0 : static_cast<uint64_t>(times - 1) * period; }
};

bool Better(const Repeat& a, const Repeat& b) {
  return std::tuple(a.hidden(), b.start, b.period) > std::tuple(b.hidden(), a.start, a.period);
}

// Every period up to this length is tried; longer schedules try likely periods only.
constexpr size_t kFullScanLength = 4096;
constexpr size_t kSmallPeriods = 64;
constexpr size_t kGapCandidates = 256;
constexpr size_t kRecentOccurrences = 8;

// Likely periods of a long schedule: short ones, and the most frequent distances between
// an op and its last few occurrences (a step of period p puts each of its ops exactly p
// after the same op of the step before, at most `kRecentOccurrences` occurrences back
// unless one op fills most of the step).
std::vector<size_t> CandidatePeriods(const std::vector<uint32_t>& ops) {
  const size_t n = ops.size();
  std::vector<size_t> periods;
  if (n <= kFullScanLength) {
    for (size_t p = 1; p <= n / 2; ++p) periods.push_back(p);
    return periods;
  }
  for (size_t p = 1; p <= kSmallPeriods && p <= n / 2; ++p) periods.push_back(p);
  std::vector<uint32_t> gap_count(n / 2 + 1, 0);
  struct Recent {
    std::array<size_t, kRecentOccurrences> positions{};
    size_t seen = 0;
  };
  std::unordered_map<uint32_t, Recent> recent;  // op -> its last occurrences (a ring)
  for (size_t i = 0; i < n; ++i) {
    Recent& entry = recent[ops[i]];
    for (size_t k = 0; k < std::min(entry.seen, kRecentOccurrences); ++k) {
      const size_t gap = i - entry.positions[k];
      if (gap > kSmallPeriods && gap <= n / 2) ++gap_count[gap];
    }
    entry.positions[entry.seen++ % kRecentOccurrences] = i;
  }
  std::vector<std::pair<uint32_t, size_t>> ranked;
  for (size_t gap = kSmallPeriods + 1; gap < gap_count.size(); ++gap) {
    if (gap_count[gap] > 0) ranked.emplace_back(gap_count[gap], gap);
  }
  const size_t keep = std::min(ranked.size(), kGapCandidates);
  std::partial_sort(
      ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(keep), ranked.end(),
      [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  for (size_t i = 0; i < keep; ++i) periods.push_back(ranked[i].second);
  return periods;
}

// The best repeat with period p: each maximal run where ops[i] == ops[i + p].
void ScanPeriod(const std::vector<uint32_t>& ops, size_t p, Repeat* best) {
  const size_t n = ops.size();
  size_t i = 0;
  while (i + p < n) {
    if (ops[i] != ops[i + p]) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j + p < n && ops[j] == ops[j + p]) ++j;
    const Repeat candidate{i, p, (j - i + p) / p};
    if (Better(candidate, *best)) *best = candidate;
    i = j + 1;
  }
}

uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max() / 2;
  if (a != 0 && b > kMax / a) return kMax;
  return a * b;
}

}  // namespace

std::vector<Segment> FoldSchedule(const std::vector<uint32_t>& ops) {
  std::vector<Segment> segments;
  if (ops.empty()) return segments;
  Repeat best;
  for (const size_t period : CandidatePeriods(ops)) ScanPeriod(ops, period, &best);
  // Two lines hidden at least: "a a" stays as it is, "a b a b" or "a a a" folds.
  if (best.hidden() < 2) {
    segments.push_back(Segment{ops, false, 1, {}});
    return segments;
  }
  const auto begin = ops.begin();
  const auto step_begin = begin + static_cast<std::ptrdiff_t>(best.start);
  const auto step_end = step_begin + static_cast<std::ptrdiff_t>(best.period);
  const auto steps_end = step_begin + static_cast<std::ptrdiff_t>(best.period * best.times);
  if (best.start > 0) segments.push_back(Segment{std::vector<uint32_t>(begin, step_begin), false, 1, {}});
  segments.push_back(Segment{std::vector<uint32_t>(step_begin, step_end), true, best.times, {}});
  if (steps_end != ops.end()) segments.push_back(Segment{std::vector<uint32_t>(steps_end, ops.end()), false, 1, {}});
  return segments;
}

// ---- Expansion ------------------------------------------------------------------------

StepExpansion::StepExpansion(const std::vector<Segment>& segments, std::vector<uint64_t> counts)
    : segments_(segments), counts_(std::move(counts)) {
  for (size_t i = 0; i < segments_.size(); ++i) {
    size_ = std::min(size_ + SaturatingMul(counts_[i], segments_[i].ops.size()),
                     std::numeric_limits<uint64_t>::max() / 2);
  }
}

StepPosition StepExpansion::Locate(uint64_t position) const {
  StepPosition where;
  for (size_t i = 0; i < segments_.size(); ++i) {
    const uint64_t length = segments_[i].ops.size();
    const uint64_t span = SaturatingMul(counts_[i], length);
    if (position < span) {
      where.segment = i;
      where.iteration = position / length;
      where.line = static_cast<size_t>(position % length);
      return where;
    }
    position -= span;
  }
  where.segment = segments_.size();
  return where;
}

uint32_t StepExpansion::At(uint64_t position) const {
  const StepPosition where = Locate(position);
  return segments_[where.segment].ops[where.line];
}

std::vector<uint32_t> StepExpansion::Window(uint64_t first, size_t length) const {
  std::vector<uint32_t> out;
  for (uint64_t i = first; i < size_ && out.size() < length; ++i) out.push_back(At(i));
  return out;
}

std::string StepExpansion::Describe(const StepPosition& where, bool with_counts, bool with_file_line) const {
  if (where.segment >= segments_.size()) return "past the end";
  const Segment& segment = segments_[where.segment];
  bool after_steps = false, any_steps = false;
  for (size_t i = 0; i < segments_.size(); ++i) {
    any_steps |= segments_[i].steps;
    if (i < where.segment) after_steps |= segments_[i].steps;
  }
  std::string text;
  if (segment.steps) {
    text = absl::StrCat("step ", where.iteration + 1,
                        with_counts ? absl::StrCat(" of ", counts_[where.segment]) : std::string(), ", line ",
                        where.line + 1, " of ", segment.ops.size());
  } else if (any_steps) {
    text = absl::StrFormat("%s, line %d", after_steps ? "after the steps" : "before the steps", where.line + 1);
  } else {
    text = absl::StrFormat("line %d of %d", where.line + 1, segment.ops.size());
  }
  if (with_file_line && where.line < segment.lines.size()) {
    absl::StrAppend(&text, "; baseline line ", segment.lines[where.line]);
  }
  return text;
}

}  // namespace collwatch::analyzer
