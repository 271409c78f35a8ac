// Checks of what an event stream claims, before the collector acts on it: the hello's
// identity (its names become store folders) and the order of a batch's records. Each
// returns INVALID_ARGUMENT with a message that says what was wrong.
// Threading: pure functions.
#ifndef COLLWATCH_COLLECTOR_STREAM_CHECKS_H_
#define COLLWATCH_COLLECTOR_STREAM_CHECKS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "proto/collwatch.pb.h"

namespace collwatch {

// Job and host: plain names of 1..255 bytes (no '/', '\', control characters, "." or
// ".."); a pid; at most `max_lanes` lanes; ranks -1 (unset) or 0 <= rank < world size <=
// 2^24; a ring path of at most 4 KiB.
absl::Status CheckHelloIdentity(const v1::RankIdentity& identity, uint32_t max_lanes);

// Within one batch, each lane's records in increasing position (event_codec.h). Every
// event's lane must be below `lanes` (checked before).
absl::Status CheckLaneOrder(const v1::StreamEventsRequest& batch, uint32_t lanes);

}  // namespace collwatch

#endif  // COLLWATCH_COLLECTOR_STREAM_CHECKS_H_
