// The clocks collwatch reads: ring records carry the writer's CLOCK_MONOTONIC (the ring
// header pairs it with CLOCK_REALTIME once), and the collector, the store, the analyzer's
// "now" and the tools use CLOCK_REALTIME. The interposer's hot path has its own faster
// monotonic clock (interposer/clock.h) that falls back to these.
// Threading: pure functions, noexcept, no allocation (the interposer calls them).
#ifndef COLLWATCH_RING_CLOCKS_H_
#define COLLWATCH_RING_CLOCKS_H_

#include <time.h>

#include <cstdint>

namespace collwatch {

inline uint64_t ClockNs(clockid_t clock) noexcept {
  timespec now{};
  clock_gettime(clock, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
}
inline uint64_t MonotonicClockNs() noexcept { return ClockNs(CLOCK_MONOTONIC); }
inline uint64_t RealtimeNs() noexcept { return ClockNs(CLOCK_REALTIME); }

}  // namespace collwatch

#endif  // COLLWATCH_RING_CLOCKS_H_
