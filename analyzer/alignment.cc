// LCS alignment by dynamic programming over suffixes, walked from the front; ties between
// two readings broken as AlignTie says. Threading: pure functions.
#include "analyzer/alignment.h"

#include <algorithm>

namespace collwatch::analyzer {

Alignment Align(std::span<const uint64_t> a, std::span<const uint64_t> b, AlignTie tie) {
  const size_t n = a.size();
  const size_t m = b.size();
  // lcs[i][j]: LCS length of a[i..] and b[j..].
  std::vector<uint32_t> lcs((n + 1) * (m + 1), 0);
  auto at = [m](size_t i, size_t j) { return i * (m + 1) + j; };
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      lcs[at(i, j)] = a[i] == b[j] ? lcs[at(i + 1, j + 1)] + 1 : std::max(lcs[at(i + 1, j)], lcs[at(i, j + 1)]);
    }
  }
  Alignment result;
  result.a_matched.assign(n, false);
  result.b_matched.assign(m, false);
  size_t i = 0;
  size_t j = 0;
  while (i < n && j < m) {
    if (a[i] == b[j] && lcs[at(i, j)] == lcs[at(i + 1, j + 1)] + 1) {
      result.a_matched[i] = true;
      result.b_matched[j] = true;
      result.pairs.emplace_back(i, j);
      ++i;
      ++j;
    } else if (tie == AlignTie::kSkipA ? lcs[at(i + 1, j)] >= lcs[at(i, j + 1)]
                                       : lcs[at(i + 1, j)] > lcs[at(i, j + 1)]) {
      ++i;
    } else {
      ++j;
    }
  }
  return result;
}

FirstDifference AlignFirstDifference(std::span<const uint64_t> a, std::span<const uint64_t> b) {
  const Alignment alignment = Align(a, b);
  FirstDifference first;
  if (alignment.pairs.empty()) {
    first.a_run = a.size();
    first.b_run = b.size();
    return first;
  }
  const auto [ai, bj] = alignment.pairs.front();
  first.a_run = ai;
  first.b_run = bj;
  size_t k = 0;
  while (k < alignment.pairs.size() && alignment.pairs[k].first == ai + k && alignment.pairs[k].second == bj + k) ++k;
  first.matched_after = k;
  return first;
}

}  // namespace collwatch::analyzer
