// The repeating training step of a schedule: folding a sequence of ops into prologue,
// step x k and epilogue, and reading a folded schedule back position by position (with
// any number of steps) without expanding it.
// Threading: pure functions; a StepExpansion only reads the segments it was given.
#ifndef COLLWATCH_ANALYZER_STEP_FOLDING_H_
#define COLLWATCH_ANALYZER_STEP_FOLDING_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace collwatch::analyzer {

// A schedule as written in a baseline: literal lines before the steps, one step that
// repeats, literal lines after. `steps` is false for the literal parts.
struct Segment {
  std::vector<uint32_t> ops;
  bool steps = false;     // the repeating step
  uint64_t repeat = 1;    // steps: times seen (Fold) or required (baseline; 0 = any, >= 1)
  std::vector<int> lines; // baseline line of each op (parsed baselines only)
};

// Finds the repeating step: the period p and start s that hide the most lines, i.e.
// that maximise (k - 1) * p where ops[s, s + k*p) is k copies of ops[s, s + p), k >= 2;
// ties go to the earliest start, then the shortest period. The result is prologue,
// step (repeat = k), epilogue, empty parts left out; without a repeat, one literal part.
// Runs of the same code with more or fewer identical steps fold to the same step.
std::vector<Segment> FoldSchedule(const std::vector<uint32_t>& ops);

// Where a position of an expanded schedule comes from.
struct StepPosition {
  size_t segment = 0;
  uint64_t iteration = 0;  // of a step segment
  size_t line = 0;         // index in the segment's ops
};

// Segments taken counts[i] times each, in order, read position by position. Sizes
// saturate (at half of uint64_t's range), so `step x 1000000000000` costs nothing.
// Keeps a reference to `segments`: they must outlive the expansion.
class StepExpansion {
 public:
  StepExpansion(const std::vector<Segment>& segments, std::vector<uint64_t> counts);
  uint64_t size() const { return size_; }
  uint64_t count(size_t segment) const { return counts_[segment]; }
  const std::vector<Segment>& segments() const { return segments_; }

  // Past the end: segment == segments().size().
  StepPosition Locate(uint64_t position) const;
  uint32_t At(uint64_t position) const;
  // Up to `length` ops from `first`.
  std::vector<uint32_t> Window(uint64_t first, size_t length) const;

  // "step 2 of 3, line 12 of 58" / "before the steps, line 3" / "after the steps, line 1";
  // without `with_counts` the number of steps is left out ("step 2, line 12 of 58");
  // `with_file_line` adds "; baseline line N" where the segment knows its lines.
  std::string Describe(const StepPosition& where, bool with_counts, bool with_file_line) const;

 private:
  const std::vector<Segment>& segments_;
  std::vector<uint64_t> counts_;
  uint64_t size_ = 0;
};

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_STEP_FOLDING_H_
