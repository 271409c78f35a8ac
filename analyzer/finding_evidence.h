// What detection records for a finding, read off the job model: calls as CallFacts, how
// a rank's process is doing (StalledRank), and the time arithmetic detection shares. No
// words here: finding_text.h makes them from what these return.
// Threading: pure functions over a model the caller holds still.
#ifndef COLLWATCH_ANALYZER_FINDING_EVIDENCE_H_
#define COLLWATCH_ANALYZER_FINDING_EVIDENCE_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "analyzer/finding.h"
#include "analyzer/job_model.h"

namespace collwatch::analyzer {

inline constexpr double kNsPerS = 1e9;
inline double Seconds(int64_t ns) { return static_cast<double>(ns) / kNsPerS; }

// Bytes one rank contributes to a collective (count as NCCL defines it).
double CallBytes(const Call& call);

// A call with its region named.
CallFacts FactsOf(const JobModel& model, const Call& call);
std::vector<CallFacts> FactsOf(const JobModel& model, std::span<const Call* const> calls);
// Adds `call`'s Python call path to `finding` as the path of `ranks`, where it has one.
void AddCallPath(std::vector<int32_t> ranks, const CallFacts& call, Finding* finding);

// One rank's sends and receives with one peer on a communicator, oldest kept first (as
// P2pRhythm reads them), and the highest per-peer sequence number among the peer's calls
// of `toward_rank_fn` to the rank (0: none).
struct P2pChannel {
  std::vector<bool> is_send;
  std::vector<uint32_t> calls;  // the rank's call indexes, as is_send
  bool whole = false;           // from the rank's first send or receive on (none forgotten)
  uint64_t peer_posted = 0;
};
P2pChannel P2pChannelOf(const JobModel& model, const Comm& comm, int32_t rank, int32_t peer,
                        ring::ApiFn toward_rank_fn);

// Distinct NVTX regions of `calls`, in order of first appearance (none: empty).
std::vector<std::string> RegionsOf(const JobModel& model, std::span<const Call* const> calls);

// Rank `rank` of `comm` as a stall names it: where it sits in the job, what its process
// (`process`, none when no process is known for it) is doing at `now_ns`, and how far it
// got on the communicator.
StalledRank StalledRankOf(const JobModel& model, const Comm& comm, int32_t rank, std::optional<ProcessId> process,
                          int64_t now_ns);

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_FINDING_EVIDENCE_H_
