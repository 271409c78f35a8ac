// A diagnosis: what went wrong, where, which ranks, and what to do about it. The kinds
// and field names are DESIGN.md's contract (report.json findings[]).
// Threading: plain values.
#ifndef COLLWATCH_ANALYZER_FINDING_H_
#define COLLWATCH_ANALYZER_FINDING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "process/rank_membership.h"

namespace collwatch::analyzer {

// Values equal proto FindingKind's.
enum class FindingKind : int {
  kPathDivergence = 1,
  kSkippedReduceScatter = 2,
  kSignatureMismatch = 3,
  kOpMismatch = 4,
  kNotJoined = 5,
  kTransportStall = 6,
  kCommInitStall = 7,
  kRankLost = 8,
};
std::string_view FindingKindName(FindingKind kind);  // "PATH_DIVERGENCE"
std::optional<FindingKind> ParseFindingKind(std::string_view name);

// What a finding says about one process it names (report.json finding `processes`).
struct ProcessReport {
  int32_t rank = -1;          // rank in the finding's communicator
  int32_t global_rank = -1;   // RANK of the process, -1 unknown
  int32_t pid = 0;
  std::string host;
  std::string state;          // "running", "sleeping in futex_wait_queue", "I/O (in ...)",
                              // "stopped", "zombie", "gone", "unknown"
  bool cpu_advancing = false;
  double heartbeat_age_s = -1;   // seconds since its ring's heartbeat (-1: none)
  bool heartbeat_fresh = false;  // heartbeat younger than a few watcher periods
  std::string ended;             // "" while running; "exited with 1",
                                 // "killed or crashed (no exit recorded)", ...
};

// Ranks that behaved identically (ranks in the communicator, ascending).
struct RankClass {
  std::vector<int32_t> ranks;
  std::string label;  // e.g. "ran 5 extra collectives in fwd/vision.*"
};

// What one rank class did around the divergence, one line per call.
struct ClassContext {
  std::vector<int32_t> ranks;
  std::vector<std::string> lines;  // "  = 41 all-gather ... in fwd/embed" ('=' agreed, '>' after)
};

struct Finding {
  FindingKind kind = FindingKind::kPathDivergence;
  // False when the evidence fits other kinds too: `kind` is the literal reading (what the
  // differing calls show), `other_readings` the rest; the summary gives each with its fix.
  bool decided = true;
  std::vector<FindingKind> other_readings;
  uint64_t comm_id = 0;
  uint64_t seq = 0;                    // the first bad collective (p2p: per-peer seq)
  std::vector<RankClass> rank_classes; // divergences: largest class first
  std::vector<int32_t> lagging_ranks;  // stalls: ranks that have not arrived / are lost
  std::vector<std::string> regions;    // NVTX regions involved
  double detect_latency_s = 0;         // first bad record -> finding
  std::string headline;                // one line: kind, comm, seq, ranks
  std::string summary;                 // one paragraph: what, likely cause, fix
  int64_t first_bad_ns = 0;            // CLOCK_REALTIME of the first bad record
  int64_t found_ns = 0;                // CLOCK_REALTIME when the analyzer could tell
  std::vector<ClassContext> context;   // the aligned sequences around the divergence
  // Stalls: how each rank the finding names is doing (state, CPU, heartbeat, its end).
  std::vector<ProcessReport> processes;
};

// "comm 3f2a9c01" (the first 8 hex digits).
std::string CommText(uint64_t comm_id);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_FINDING_H_
