// The Watch stream's deltas: what changed between two snapshots of the cluster state,
// and how a dashboard applies it. A delta names only the processes and rank entries
// that changed (a communicator it names carries all its scalar fields) and the findings
// that are new, so a dashboard over a slow link receives little while a job runs.
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
