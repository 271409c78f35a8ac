// How long a collective should take on this job, learned from its completed ones: the
// stall threshold scales with it, so a first all-gather of gigabytes is not called stuck
// after a second, and a small all-reduce is not given minutes.
// Threading: single-threaded.
#ifndef COLLWATCH_ANALYZER_EXPECTED_DURATION_H_
#define COLLWATCH_ANALYZER_EXPECTED_DURATION_H_

#include <array>
#include <cstddef>
#include <cstdint>

namespace collwatch::analyzer {

class ExpectedDuration {
 public:
  // Assumed before anything completed: slow enough for a first all-gather over PCIe or
  // a busy CPU backend.
  static constexpr double kPriorBytesPerSecond = 200e6;
  static constexpr double kPriorLatencyS = 0.05;

  // One completed collective: `bytes` moved per rank, `transfer_s` from the last rank's
  // arrival to completion, `join_s` from the first rank's arrival to the last's.
  void Observe(double bytes, double transfer_s, double join_s);

  // Seconds a collective of `bytes` per rank should need once every rank is there: as
  // slow per byte as the slowest recent one, and no faster than the slowest small one.
  double TransferS(double bytes) const;
  // Seconds between the first and the last rank's arrival seen recently (0: none yet).
  double JoinS() const { return max_join_s_; }
  size_t samples() const { return count_; }

 private:
  static constexpr size_t kWindow = 256;
  struct Sample {
    double bytes = 0;
    double transfer_s = 0;
  };
  std::array<Sample, kWindow> samples_{};
  size_t count_ = 0;
  double max_join_s_ = 0;
};

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_EXPECTED_DURATION_H_
