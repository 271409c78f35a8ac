// Sequence alignment of two ranks' collective sequences (as fingerprint hashes): a
// longest-common-subsequence alignment that finds the first block of differences and
// what each side inserted there. Threading: pure functions.
#ifndef COLLWATCH_ANALYZER_ALIGNMENT_H_
#define COLLWATCH_ANALYZER_ALIGNMENT_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace collwatch::analyzer {

// The first block of differences between two sequences that start at a mismatch.
struct FirstDifference {
  size_t a_run = 0;        // a[0, a_run) has no counterpart in b
  size_t b_run = 0;        // b[0, b_run) has no counterpart in a
  size_t matched_after = 0;  // elements matched right after the block (0: no anchor seen)
};

// Aligns a and b (LCS, O(|a| |b|) time, O(|a| |b|) bits) and returns the first block of
// differences from position 0 (matches taken as early as possible). Without any common
// element, the block is everything (a_run = |a|, b_run = |b|, matched_after = 0).
FirstDifference AlignFirstDifference(std::span<const uint64_t> a, std::span<const uint64_t> b);

// Every element of a and b labelled by the alignment: true where it is matched.
struct Alignment {
  std::vector<bool> a_matched;
  std::vector<bool> b_matched;
  std::vector<std::pair<size_t, size_t>> pairs;  // matched (a index, b index), in order
};
Alignment Align(std::span<const uint64_t> a, std::span<const uint64_t> b);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_ALIGNMENT_H_
