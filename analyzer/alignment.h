// Sequence alignment of two collective sequences (fingerprint hashes, or a schedule's op
// ids): a longest-common-subsequence alignment that finds the first block of differences
// and what each side inserted there. Threading: pure functions.
#ifndef COLLWATCH_ANALYZER_ALIGNMENT_H_
#define COLLWATCH_ANALYZER_ALIGNMENT_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
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

// Where two readings keep as much in common, which side's element the walk from the
// front leaves unmatched first. Equal elements at the walk's position are always matched.
enum class AlignTie {
  kSkipA,  // a's: b's elements are matched as early as possible (the classification)
  kSkipB,  // b's: b is read as having inserted, then done what a did (schedule hunks:
           // a run that does extra work, then what was expected)
};

// Every element of a and b labelled by the alignment: true where it is matched.
struct Alignment {
  std::vector<bool> a_matched;
  std::vector<bool> b_matched;
  std::vector<std::pair<size_t, size_t>> pairs;  // matched (a index, b index), in order
};
Alignment Align(std::span<const uint64_t> a, std::span<const uint64_t> b, AlignTie tie = AlignTie::kSkipA);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_ALIGNMENT_H_
