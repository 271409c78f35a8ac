// Maps communicator segments (see shm_layout.h) and wakes ranks sleeping on them.
// Threading: Map/Unmap by the thread that creates or frees a communicator; accessors and
// wake helpers from any thread operating on it (they touch only atomics of the segment).
#ifndef COLLWATCH_CPU_NCCL_SEGMENT_H_
#define COLLWATCH_CPU_NCCL_SEGMENT_H_

#include <cstddef>
#include <cstdint>

#include "cpu_nccl/shm_layout.h"

namespace collwatch::cpu_nccl {

struct Segment {
  uint8_t* base = nullptr;
  Geometry geo{};

  SegmentHeader* Header() const noexcept { return reinterpret_cast<SegmentHeader*>(base); }
  RankControl* Rank(int r) const noexcept {
    return reinterpret_cast<RankControl*>(base + geo.ranks_offset) + r;
  }
  ChannelControl* Channel(int sender, int receiver) const noexcept {
    return reinterpret_cast<ChannelControl*>(base + geo.channels_offset) +
           static_cast<size_t>(sender) * geo.nranks + receiver;
  }
  // The staging slot rank r uses for its chunk number `chunk` (slots alternate).
  uint8_t* Slot(int r, uint64_t chunk) const noexcept {
    return base + geo.staging_offset +
           (static_cast<uint64_t>(r) * kSlotsPerRank + chunk % kSlotsPerRank) * geo.slot_bytes;
  }
  uint8_t* Ring(int sender, int receiver) const noexcept {
    return base + geo.rings_offset +
           (static_cast<uint64_t>(sender) * geo.nranks + receiver) * geo.channel_bytes;
  }
};

// Writes "<dir>/collwatch-nccl-<uid>-<key as 16 hex digits>"; false if it does not fit.
bool SegmentPath(const char* dir, uint64_t key, char* out, size_t capacity) noexcept;

// Opens `path` (creating it if needed), grows it to geo.total_bytes and maps it shared.
// Returns 0, or the errno of the failing call.
int MapSegment(const char* path, const Geometry& geo, Segment* out) noexcept;

void UnmapSegment(Segment* seg) noexcept;

// Wakes each rank other than `from` that sleeps waiting on `from` or on anyone.
void WakeWaitersOf(const Segment& seg, int from) noexcept;

// Wakes rank `target` if it sleeps waiting on `from` or on anyone.
void WakeRankIfWaiting(const Segment& seg, int target, int from) noexcept;

// Wakes the owner of `rc` whatever it waits for (used by abort).
void RingDoorbell(RankControl* rc) noexcept;

}  // namespace collwatch::cpu_nccl

#endif  // COLLWATCH_CPU_NCCL_SEGMENT_H_
