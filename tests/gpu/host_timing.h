// Test-only, for the GPU cost programs: a check that ends the program, and the host time
// per call of a step, issued back to back or in short bursts. Header-only.
#ifndef COLLWATCH_TESTS_GPU_HOST_TIMING_H_
#define COLLWATCH_TESTS_GPU_HOST_TIMING_H_

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#define CHECK(call)                                                    \
  do {                                                                 \
    if (!(call)) {                                                     \
      std::fprintf(stderr, "%s failed at line %d\n", #call, __LINE__); \
      std::exit(10);                                                   \
    }                                                                  \
  } while (0)

namespace collwatch::gpu {

inline double NowNs() {
  return static_cast<double>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

inline double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Host time in ns per call of `step`, one figure per run of `calls` calls back to back, over
// `runs` runs; `drain` (untimed) lets the device catch up after each run.
inline std::vector<double> PerCallTimes(int runs, int calls, const std::function<void()>& step,
                                        const std::function<void()>& drain) {
  std::vector<double> per_call;
  for (int r = 0; r < runs; ++r) {
    const double start = NowNs();
    for (int i = 0; i < calls; ++i) step();
    per_call.push_back((NowNs() - start) / calls);
    drain();
  }
  return per_call;
}

// Median over `repetitions` of the host time in ns per call, `calls` calls back to back per
// repetition.
inline double TimePerCall(int calls, int repetitions, const std::function<void()>& step,
                          const std::function<void()>& drain) {
  return Median(PerCallTimes(repetitions, calls, step, drain));
}

struct Spread {
  double p10 = 0, p50 = 0, p90 = 0;
};

// Host time in ns per call over `bursts` bursts of `burst_size` calls, each synchronised
// after (untimed). Bursts short enough that the device never falls a launch queue behind
// measure what a call costs the host; long back-to-back runs (TimePerCall) could instead
// be bound by the device once its queue is full (on 2 x H100 they were not:
// docs/profiler-plugin.md).
inline Spread TimePerCallInBursts(int bursts, int burst_size, const std::function<void()>& step,
                                  const std::function<void()>& drain) {
  std::vector<double> per_call = PerCallTimes(bursts, burst_size, step, drain);
  std::sort(per_call.begin(), per_call.end());
  const auto at = [&](double q) { return per_call[static_cast<size_t>(q * (per_call.size() - 1))]; };
  return {at(0.1), at(0.5), at(0.9)};
}

}  // namespace collwatch::gpu

#endif  // COLLWATCH_TESTS_GPU_HOST_TIMING_H_
