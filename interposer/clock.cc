// TSC calibration against CLOCK_MONOTONIC. Threading: CalibrateClock only from the
// watcher thread; the published scales are read lock-free by every thread.
#include "interposer/clock.h"

#include <cstdio>
#include <cstring>

namespace collwatch {

TscScale g_tsc_scales[2];
std::atomic<uint32_t> g_tsc_active{0};

namespace {

// A TSC further than this from CLOCK_MONOTONIC at a calibration has jumped (calibration
// error over a 100 ms period is in the microseconds).
constexpr uint64_t kStepNs = 1'000'000;
// A (TSC, CLOCK_MONOTONIC) pair read further apart than this was interrupted.
constexpr uint64_t kMaxWindowNs = 50'000;
// Jumps tolerated before the TSC is given up for this process.
constexpr int kMaxSteps = 3;
// A baseline of at least 20 ms keeps the frequency error in the ppm range.
constexpr uint64_t kMinBaselineNs = 20'000'000;

bool KernelClockIsTsc() noexcept {
  FILE* file = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  if (file == nullptr) return false;
  char name[32] = {};
  const bool read = std::fgets(name, sizeof name, file) != nullptr;
  std::fclose(file);
  return read && std::strncmp(name, "tsc", 3) == 0;
}

// True when /proc/cpuinfo's flags line has `flag` as a whole word.
bool LineHasFlag(const char* line, const char* flag) noexcept {
  const size_t length = std::strlen(flag);
  for (const char* at = std::strstr(line, flag); at != nullptr; at = std::strstr(at + 1, flag)) {
    const bool starts = at > line && (at[-1] == ' ' || at[-1] == '\t');
    const bool ends = at[length] == ' ' || at[length] == '\n' || at[length] == '\0';
    if (starts && ends) return true;
  }
  return false;
}

// Ticks at a constant rate in every power state: usable as a clock once calibrated.
bool CpuTscIsInvariant() noexcept {
  FILE* file = std::fopen("/proc/cpuinfo", "r");
  if (file == nullptr) return false;
  char line[8192];
  bool invariant = false;
  while (std::fgets(line, sizeof line, file) != nullptr) {
    if (std::strncmp(line, "flags", 5) != 0) continue;
    invariant = LineHasFlag(line, "constant_tsc") && LineHasFlag(line, "nonstop_tsc");
    break;
  }
  std::fclose(file);
  return invariant;
}

// Watcher-owned calibration state.
int g_usable = -1;  // -1 unknown, 0 no, 1 yes
int g_steps = 0;
uint64_t g_first_tsc = 0;
uint64_t g_first_ns = 0;

void Publish(uint64_t tsc, uint64_t ns, uint64_t mult) noexcept {
  const uint32_t next = 1 - g_tsc_active.load(std::memory_order_relaxed);
  g_tsc_scales[next].base_tsc.store(tsc, std::memory_order_relaxed);
  g_tsc_scales[next].base_ns.store(ns, std::memory_order_relaxed);
  g_tsc_scales[next].mult.store(mult, std::memory_order_relaxed);
  g_tsc_active.store(next, std::memory_order_release);
}

uint64_t AbsDiff(uint64_t a, uint64_t b) noexcept { return a > b ? a - b : b - a; }

}  // namespace

bool ClockUsesTsc() noexcept {
  return g_tsc_scales[g_tsc_active.load(std::memory_order_acquire)].mult.load(
             std::memory_order_relaxed) != 0;
}

void CalibrateClock(bool tsc_allowed) noexcept {
#if defined(__x86_64__)
  if (g_usable < 0) g_usable = (KernelClockIsTsc() || CpuTscIsInvariant()) ? 1 : 0;
  if (g_usable == 0 || !tsc_allowed) {
    if (ClockUsesTsc()) Publish(0, 0, 0);
    return;
  }
  // Read the pair close together: take the tightest of three tries.
  uint64_t tsc = 0;
  uint64_t ns = 0;
  uint64_t best_window = UINT64_MAX;
  for (int i = 0; i < 3; ++i) {
    const uint64_t before = __rdtsc();
    const uint64_t now = MonotonicClockNs();
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
  const TscScale& in_use = g_tsc_scales[g_tsc_active.load(std::memory_order_relaxed)];
  const uint64_t mult_in_use = in_use.mult.load(std::memory_order_relaxed);
  // Preempted inside every try: the pair is not a sample; wait for the next period.
  if (mult_in_use != 0 && ((static_cast<Uint128>(best_window) * mult_in_use) >> 32) > kMaxWindowNs) {
    return;
  }
  if (tsc <= g_first_tsc || (mult_in_use != 0 && AbsDiff(TscToNs(in_use, tsc), ns) > kStepNs)) {
    // The TSC jumped: restart the baseline here, keeping the known rate meanwhile.
    if (++g_steps > kMaxSteps) {
      g_usable = 0;
      Publish(0, 0, 0);
      return;
    }
    g_first_tsc = tsc;
    g_first_ns = ns;
    if (mult_in_use != 0) Publish(tsc, ns, mult_in_use);
    return;
  }
  if (ns - g_first_ns < kMinBaselineNs) return;
  const auto mult = static_cast<uint64_t>(
      (static_cast<Uint128>(ns - g_first_ns) << 32) / (tsc - g_first_tsc));
  Publish(tsc, ns, mult);
#else
  (void)tsc_allowed;
#endif
}

}  // namespace collwatch
