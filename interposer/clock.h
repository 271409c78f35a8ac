// The interposer's clock: CLOCK_MONOTONIC nanoseconds, read on the hot path from the
// TSC (a few ns) once the watcher thread has calibrated it against clock_gettime, and
// from clock_gettime (vDSO, ~20 ns) before that or where the kernel does not trust the
// TSC. Threading: NowNs from any thread; Calibrate only from the watcher thread.
#ifndef COLLWATCH_INTERPOSER_CLOCK_H_
#define COLLWATCH_INTERPOSER_CLOCK_H_

#include <time.h>

#include <atomic>
#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace collwatch {

inline uint64_t ClockGettimeNs() noexcept {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
}

__extension__ typedef unsigned __int128 Uint128;  // GCC/Clang: one mul instruction

// ns = base_ns + ((tsc - base_tsc) * mult) >> 32, published as a whole by flipping
// `active` between two parameter sets.
struct TscScale {
  std::atomic<uint64_t> base_tsc{0};
  std::atomic<uint64_t> base_ns{0};
  std::atomic<uint64_t> mult{0};  // 0: not calibrated
};
extern TscScale g_tsc_scales[2];
extern std::atomic<uint32_t> g_tsc_active;

inline uint64_t MonotonicNs() noexcept {
#if defined(__x86_64__)
  const TscScale& scale = g_tsc_scales[g_tsc_active.load(std::memory_order_acquire)];
  const uint64_t mult = scale.mult.load(std::memory_order_relaxed);
  if (mult != 0) {
    const uint64_t delta = __rdtsc() - scale.base_tsc.load(std::memory_order_relaxed);
    return scale.base_ns.load(std::memory_order_relaxed) +
           static_cast<uint64_t>((static_cast<Uint128>(delta) * mult) >> 32);
  }
#endif
  return ClockGettimeNs();
}

// Watcher thread, periodically: refines the TSC scale (no-op where the TSC is not the
// kernel's clocksource). The first call only takes the starting sample.
void CalibrateClock() noexcept;

}  // namespace collwatch

#endif  // COLLWATCH_INTERPOSER_CLOCK_H_
