// TSC calibration against CLOCK_MONOTONIC. Threading: CalibrateClock only from the
// watcher thread; the published scales are read lock-free by every thread.
#include "interposer/clock.h"

#include <cstdio>
#include <cstring>

namespace collwatch {

TscScale g_tsc_scales[2];
std::atomic<uint32_t> g_tsc_active{0};

namespace {

bool KernelClockIsTsc() noexcept {
  FILE* file = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  if (file == nullptr) return false;
  char name[32] = {};
  const bool read = std::fgets(name, sizeof name, file) != nullptr;
  std::fclose(file);
  return read && std::strncmp(name, "tsc", 3) == 0;
}

// Watcher-owned calibration state.
int g_usable = -1;  // -1 unknown, 0 no, 1 yes
uint64_t g_first_tsc = 0;
uint64_t g_first_ns = 0;

}  // namespace

void CalibrateClock() noexcept {
#if defined(__x86_64__)
  if (g_usable < 0) g_usable = KernelClockIsTsc() ? 1 : 0;
  if (g_usable == 0) return;
  // Read the pair close together: take the tightest of three tries.
  uint64_t tsc = 0;
  uint64_t ns = 0;
  uint64_t best_window = UINT64_MAX;
  for (int i = 0; i < 3; ++i) {
    const uint64_t before = __rdtsc();
    const uint64_t now = ClockGettimeNs();
    const uint64_t after = __rdtsc();
    if (after - before < best_window) {
      best_window = after - before;
      tsc = before + (after - before) / 2;
      ns = now;
    }
  }
  if (g_first_tsc == 0) {
    g_first_tsc = tsc;
    g_first_ns = ns;
    return;
  }
  // A baseline of at least 20 ms keeps the frequency error in the ppm range.
  if (ns - g_first_ns < 20'000'000 || tsc <= g_first_tsc) return;
  const auto mult = static_cast<uint64_t>(
      (static_cast<Uint128>(ns - g_first_ns) << 32) / (tsc - g_first_tsc));
  const uint32_t next = 1 - g_tsc_active.load(std::memory_order_relaxed);
  g_tsc_scales[next].base_tsc.store(tsc, std::memory_order_relaxed);
  g_tsc_scales[next].base_ns.store(ns, std::memory_order_relaxed);
  g_tsc_scales[next].mult.store(mult, std::memory_order_relaxed);
  g_tsc_active.store(next, std::memory_order_release);
#endif
}

}  // namespace collwatch
