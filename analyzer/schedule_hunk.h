// A hunk: how check and diff show the first difference between two schedules — the two
// first differing lines, what kind of change it is, context, and the edit script of the
// next ops on each side (analyzer/alignment.h's LCS, ties read as insertions); and each
// difference as data, which the text, the JSON and the JUnit report are made from.
// Threading: pure functions.
#ifndef COLLWATCH_ANALYZER_SCHEDULE_HUNK_H_
#define COLLWATCH_ANALYZER_SCHEDULE_HUNK_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"
#include "analyzer/schedule.h"

namespace collwatch::analyzer {

// What differs between two schedules: A and B for diff, the baseline and the run for check.
enum class DifferenceKind {
  kCollectives,          // a rank class issued other collectives from some position on
  kRanksAbsent,          // ranks that reported nothing on one side only (check: in the run)
  kCommunicatorMissing,  // a communicator of A (of the baseline) that B (the run) lacks
  kCommunicatorAdded,    // a communicator of B (of the run) that A (the baseline) lacks
};
// "collectives", "ranks_absent", "communicator_missing", "communicator_added".
std::string_view DifferenceKindName(DifferenceKind kind);

// One difference, as diff and check find it.
struct ScheduleDifference {
  DifferenceKind kind = DifferenceKind::kCollectives;
  std::string communicator;    // CommLabel: "comm 2 (size 2, split from comm 1)"
  std::vector<int32_t> ranks;  // kCollectives: the ranks compared; kRanksAbsent: the absent ones
  uint64_t collective = 0;     // kCollectives: 1-based position of the first difference, else 0
  std::string headline;        // one line: what differs and where
  std::string text;            // as the terminal shows it: the hunk, or the one line
};

// Equal lines shown before the first difference, and after the last change.
inline constexpr size_t kHunkContextLines = 3;
// Ops compared on each side from the first difference.
inline constexpr size_t kHunkWindow = 64;

// What a hunk shows: the context before `first` (equal on both sides) and each side's
// window from `first`.
struct HunkSides {
  std::vector<uint32_t> context;  // positions first - context.size() .. first - 1
  std::vector<uint32_t> minus;    // from first
  std::vector<uint32_t> plus;     // from first
  bool minus_more = false;        // the sequence goes on past the window
  bool plus_more = false;
};

// The header line, the two lines that differ first, the kind of change, then the context
// and the edit script of the two windows from `first`, until three equal lines follow the
// last change. `minus_name` and `plus_name` name the sides ("the baseline", "A").
std::string RenderHunk(const OpTable& table, uint64_t first, const HunkSides& sides, const std::string& header,
                       absl::string_view minus_name, absl::string_view plus_name);

// ops[first, first + length), clipped to the sequence.
std::vector<uint32_t> HunkSlice(const std::vector<uint32_t>& ops, uint64_t first, size_t length);
// The kHunkContextLines ops before `first` (fewer at the start).
std::vector<uint32_t> HunkContextBefore(const std::vector<uint32_t>& ops, uint64_t first);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_SCHEDULE_HUNK_H_
