// The interposer's clock: CLOCK_MONOTONIC nanoseconds, read on the hot path from the
// TSC (one rdtsc, which overlaps with the record's stores) once the watcher thread has
// calibrated it against clock_gettime, and from clock_gettime (vDSO, 20-45 ns) before
// that or where the TSC is not invariant. Threading: MonotonicNs from any thread;
// CalibrateClock only from the watcher thread.
#ifndef COLLWATCH_INTERPOSER_CLOCK_H_
#define COLLWATCH_INTERPOSER_CLOCK_H_

#include <time.h>

#include <atomic>
#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "ring/clocks.h"

namespace collwatch {

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

// `tsc` in nanoseconds on `scale` (whose mult is not 0).
inline uint64_t TscToNs(const TscScale& scale, uint64_t tsc) noexcept {
  // A thread on a CPU whose TSC lags the calibrating CPU's by a few cycles can read a
  // tick just before base_tsc: clamp, never wrap to the far future.
  const auto delta = static_cast<int64_t>(tsc - scale.base_tsc.load(std::memory_order_relaxed));
  const uint64_t ticks = delta > 0 ? static_cast<uint64_t>(delta) : 0;
  return scale.base_ns.load(std::memory_order_relaxed) +
         static_cast<uint64_t>((static_cast<Uint128>(ticks) *
                                scale.mult.load(std::memory_order_relaxed)) >> 32);
}

inline uint64_t MonotonicNs() noexcept {
#if defined(__x86_64__)
  const TscScale& scale = g_tsc_scales[g_tsc_active.load(std::memory_order_acquire)];
  if (scale.mult.load(std::memory_order_relaxed) != 0) return TscToNs(scale, __rdtsc());
#endif
  return MonotonicClockNs();
}

// Watcher thread, periodically (every 100 ms): refines the TSC scale. The TSC is used
// where the kernel's clocksource is the TSC, or where the CPU says it is invariant
// (constant_tsc and nonstop_tsc: virtual machines often keep kvm-clock as the kernel's
// clocksource over such a TSC) and `tsc_allowed`. The first call only takes the starting
// sample. A TSC that jumps against CLOCK_MONOTONIC (a VM restored or migrated) is
// re-based at once; one that keeps jumping is given up for clock_gettime.
void CalibrateClock(bool tsc_allowed) noexcept;

// True while MonotonicNs reads the TSC.
bool ClockUsesTsc() noexcept;

}  // namespace collwatch

#endif  // COLLWATCH_INTERPOSER_CLOCK_H_
