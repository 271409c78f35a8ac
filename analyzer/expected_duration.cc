// The expected-time model: a window of recent completed collectives.
#include "analyzer/expected_duration.h"

#include <algorithm>

namespace collwatch::analyzer {

void ExpectedDuration::Observe(double bytes, double transfer_s, double join_s) {
  samples_[count_ % kWindow] = Sample{std::max(bytes, 0.0), std::max(transfer_s, 0.0)};
  ++count_;
  max_join_s_ = std::max(max_join_s_, join_s);
}

double ExpectedDuration::TransferS(double bytes) const {
  if (count_ == 0) return kPriorLatencyS + bytes / kPriorBytesPerSecond;
  const size_t n = std::min(count_, kWindow);
  double latency_s = 0;
  double seconds_per_byte = 0;
  for (size_t i = 0; i < n; ++i) {
    const Sample& sample = samples_[i];
    latency_s = std::max(latency_s, sample.transfer_s);
    // Small ops say little about bandwidth: their time is latency.
    if (sample.bytes >= 64 * 1024) seconds_per_byte = std::max(seconds_per_byte, sample.transfer_s / sample.bytes);
  }
  // Only small ops seen so far: assume the prior bandwidth for large ones.
  if (seconds_per_byte == 0) seconds_per_byte = 1.0 / kPriorBytesPerSecond;
  return latency_s + bytes * seconds_per_byte;
}

}  // namespace collwatch::analyzer
