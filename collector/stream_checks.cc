// Checks of an event stream's claims. Threading: see stream_checks.h.
#include "collector/stream_checks.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "store/event_codec.h"

namespace collwatch {
namespace {

constexpr int32_t kMaxWorldSize = 1 << 24;
constexpr size_t kMaxNameBytes = 255;  // the ring header holds 63 bytes of each
constexpr size_t kMaxRingPathBytes = 4096;

// The store maps unsafe characters away too; refusing them here says so out loud.
absl::Status CheckName(const char* what, const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError(absl::StrCat("hello lacks a ", what, " name"));
  if (name.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("hello's ", what, " name has ", name.size(), " bytes; at most ", kMaxNameBytes));
  }
  const bool bad_char = std::any_of(name.begin(), name.end(), [](char c) {
    return c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  if (bad_char || name == "." || name == "..") {
    return absl::InvalidArgumentError(absl::StrCat("hello's ", what, " name '", absl::CHexEscape(name),
                                                   "' is not a plain name (no '/', '\\', control characters, "
                                                   "'.' or '..')"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckHelloIdentity(const v1::RankIdentity& identity, uint32_t max_lanes) {
  if (absl::Status job = CheckName("job", identity.job()); !job.ok()) return job;
  if (absl::Status host = CheckName("host", identity.host()); !host.ok()) return host;
  if (identity.pid() <= 0) return absl::InvalidArgumentError("hello lacks a pid");
  if (identity.lane_count() > max_lanes) {
    return absl::InvalidArgumentError(
        absl::StrCat("hello claims ", identity.lane_count(), " lanes; at most ", max_lanes));
  }
  const bool world_ok = identity.world_size() >= -1 && identity.world_size() <= kMaxWorldSize;
  const bool rank_ok = identity.rank() >= -1 && identity.rank() < kMaxWorldSize &&
                       (identity.world_size() <= 0 || identity.rank() < identity.world_size());
  const bool local_rank_ok = identity.local_rank() >= -1 && identity.local_rank() < kMaxWorldSize;
  if (!world_ok || !rank_ok || !local_rank_ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hello claims rank ", identity.rank(), " (local ", identity.local_rank(), ") of world size ",
        identity.world_size(), ": ranks are -1 (unset) or 0 <= rank < world size <= ", kMaxWorldSize));
  }
  if (identity.ring_path().size() > kMaxRingPathBytes) {
    return absl::InvalidArgumentError(absl::StrCat("hello's ring_path is over ", kMaxRingPathBytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status CheckLaneOrder(const v1::StreamEventsRequest& batch, uint32_t lanes) {
  // A record that goes back within a batch is not a resend (those come in a new batch
  // and are deduplicated by the store) but a broken or forged stream.
  std::vector<uint64_t> next_position(lanes, 0);
  for (const v1::Event& event : batch.events()) {
    const uint64_t position = LanePosition(event);
    if (position < next_position[event.lane()]) {
      return absl::InvalidArgumentError(absl::StrCat("events out of order: lane ", event.lane(), " index ",
                                                     event.index(), " comes after a later record of that lane"));
    }
    next_position[event.lane()] = position + 1;
  }
  return absl::OkStatus();
}

}  // namespace collwatch
