// The CI baseline file: a run's schedule folded per rank class with the step count left
// open, written as text that reviews like code, and read back by a parser written for
// hostile input (every error names its line; counts are never expanded; sizes capped).
// Threading: pure functions; callers serialise use of one OpTable.
#ifndef COLLWATCH_ANALYZER_BASELINE_H_
#define COLLWATCH_ANALYZER_BASELINE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "analyzer/schedule.h"
#include "analyzer/step_folding.h"

namespace collwatch::analyzer {

struct BaselineSection {
  std::vector<int32_t> ranks;     // ascending
  std::vector<Segment> segments;  // at most one with steps = true
  int line = 0;                   // of its `ranks` line
};

struct BaselineComm {
  int index = 0;
  int parent = 0;
  int32_t size = 0;
  std::vector<BaselineSection> sections;
  int line = 0;                   // of its `comm` line
};

struct Baseline {
  int version = 1;
  // Regions from Python call paths name their lines (`code-lines`, from `collwatch
  // baseline --code-lines`); `check` then extracts the run's schedule the same way.
  bool code_lines = false;
  std::vector<BaselineComm> comms;
};

inline constexpr int kBaselineVersion = 1;
// Limits of the parser: longer files, lines, or more ranks in all are rejected.
inline constexpr size_t kMaxBaselineBytes = 64u << 20;
inline constexpr size_t kMaxBaselineLineBytes = 64u << 10;
inline constexpr uint64_t kMaxBaselineRanks = 1u << 22;  // in all sizes, and in all rank lists
inline constexpr uint64_t kMaxStepRepeat = 1'000'000'000'000ull;

// The baseline of a run: each class folded, the step's count left open ("x N") so that
// runs with any number of identical steps give the same file. Fails when a rank reported
// nothing (a baseline needs every rank) or there is no communicator.
absl::StatusOr<Baseline> MakeBaseline(const JobSchedule& schedule);
// The file text. Nothing in it depends on the run beyond its schedule (no ids, times,
// paths or step counts): regenerating it from an unchanged program changes no byte.
std::string FormatBaseline(const Baseline& baseline, const OpTable& table);
// Reads a baseline; the error names the line and what is wrong with it. Never allocates
// more than a small multiple of the text's size (rank lists are capped in all).
absl::StatusOr<Baseline> ParseBaseline(std::string_view text, OpTable* table);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_BASELINE_H_
