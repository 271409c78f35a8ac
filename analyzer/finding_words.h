// The phrases findings are written with: ranks, calls, runs of calls and regions, worded
// so that a job without NVTX ranges reads as naturally as one with them.
// Threading: pure functions.
#ifndef COLLWATCH_ANALYZER_FINDING_WORDS_H_
#define COLLWATCH_ANALYZER_FINDING_WORDS_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "analyzer/job_model.h"

namespace collwatch::analyzer {

inline constexpr double kNsPerS = 1e9;
inline double Seconds(int64_t ns) { return static_cast<double>(ns) / kNsPerS; }

// Bytes one rank contributes to a collective (count as NCCL defines it).
double CallBytes(const Call& call);

// "rank 3", "ranks 0,2", "all ranks but 5".
std::string RanksText(const std::vector<int32_t>& ranks, int32_t nranks);

// `verb` agreeing with RanksText(ranks) as its subject: "wait" -> "waits" for one rank.
std::string RanksVerb(const std::vector<int32_t>& ranks, std::string_view verb);

// Distinct NVTX regions of `calls`, in order of first appearance (none: empty).
std::vector<std::string> RegionsOf(const JobModel& model, std::span<const Call* const> calls);
// " in fwd/embed", or "" for a call outside any NVTX range.
std::string InRegionText(const JobModel& model, const Call& call);
// "fwd/a, fwd/b and 3 more" ("" for none).
std::string RegionListText(const std::vector<std::string>& regions, size_t max_names = 6);

// A run of calls by op and size: "5 all-gathers (6.0 MiB x4, 3.0 MiB)",
// "1 reduce-scatter of 2.0 MiB, 2 all-gathers of 8.0 MiB".
std::string RunText(std::span<const Call* const> calls);

// One line of a finding's aligned context: "> seq 41     all-gather ...".
std::string ContextLine(const JobModel& model, char mark, const Call& call);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_FINDING_WORDS_H_
