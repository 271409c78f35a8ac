// The Watch stream's deltas: what changed between two snapshots of the cluster state,
// and how a dashboard applies it, so a dashboard over a slow link receives little. A
// delta's ClusterState holds:
//   ranks + rank_status  the new processes: identity i goes with rank_status i; the
//                        rank_status entries past ranks_size() are changed processes
//                        (an identity never changes), all keyed by RankStatus.process
//   comms                the communicators that changed, with all their scalar fields
//                        and only the rank entries that changed
//   findings             the findings from WatchResponse.findings_from on: new ones, and
//                        earlier ones that changed (their stacks came in, or the stall
//                        resolved: a straggler)
//   stacks               the job's latest stacks, when they changed
// Threading: pure functions.
#ifndef COLLWATCH_COLLECTOR_WATCH_DELTA_H_
#define COLLWATCH_COLLECTOR_WATCH_DELTA_H_

#include "proto/collwatch.pb.h"

namespace collwatch {

// The delta from `previous` to `current` (both full states from LiveState::Snapshot:
// processes keyed by RankStatus.process, communicators by id, findings only appended).
v1::WatchResponse MakeWatchDelta(const v1::ClusterState& previous, const v1::ClusterState& current);

// Applies a full state (replaces `state`) or a delta (merges into it).
void ApplyWatchResponse(const v1::WatchResponse& response, v1::ClusterState* state);

}  // namespace collwatch

#endif  // COLLWATCH_COLLECTOR_WATCH_DELTA_H_
