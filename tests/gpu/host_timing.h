// Test-only, for the GPU cost programs: a check that ends the program, and the median
// host time per call of a step issued back to back. Header-only.
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

// Median over `repetitions` of the host time in ns per call of `step`, `calls` calls back to
// back per repetition; `drain` (untimed) lets the device catch up between repetitions.
inline double TimePerCall(int calls, int repetitions, const std::function<void()>& step,
                          const std::function<void()>& drain) {
  std::vector<double> per_call;
  for (int r = 0; r < repetitions; ++r) {
    const double start = NowNs();
    for (int i = 0; i < calls; ++i) step();
    per_call.push_back((NowNs() - start) / calls);
    drain();
  }
  return Median(per_call);
}

}  // namespace collwatch::gpu

#endif  // COLLWATCH_TESTS_GPU_HOST_TIMING_H_
