// `collwatch top --once --json`: what the dashboard shows, as one JSON object for scripts
// (docs/schema/top.schema.json): the job's totals, each communicator with its ranks'
// progress, health and notes (the same words as the screen's), and the findings.
// Threading: pure functions.
#ifndef COLLWATCH_DASHBOARD_TOP_SNAPSHOT_H_
#define COLLWATCH_DASHBOARD_TOP_SNAPSHOT_H_

#include <cstdint>

#include "dashboard/dashboard_model.h"
#include "nlohmann/json.hpp"
#include "proto/collwatch.pb.h"

namespace collwatch::dashboard {

// `now_ns`: CLOCK_REALTIME of the snapshot.
nlohmann::json TopSnapshotJson(const v1::ClusterState& state, const ConnectionState& connection, int64_t now_ns);

}  // namespace collwatch::dashboard

#endif  // COLLWATCH_DASHBOARD_TOP_SNAPSHOT_H_
