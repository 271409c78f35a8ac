// The collector's clock: CLOCK_REALTIME in nanoseconds, the time base of stored
// collector times, live state and the analyzer's "now". Threading: pure function.
#ifndef COLLWATCH_COLLECTOR_WALL_CLOCK_H_
#define COLLWATCH_COLLECTOR_WALL_CLOCK_H_

#include <time.h>

#include <cstdint>

namespace collwatch {

inline uint64_t RealtimeNs() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
}

}  // namespace collwatch

#endif  // COLLWATCH_COLLECTOR_WALL_CLOCK_H_
