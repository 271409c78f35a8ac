// A communicator's ranks read in contiguous ranges on several threads: the post-mortem final
// pass reads every rank of a large job (AnalyzerOptions::read_threads). The readers only read
// the model; each writes its own range's results, joined by the caller in rank order.
#ifndef COLLWATCH_ANALYZER_RANK_RANGES_H_
#define COLLWATCH_ANALYZER_RANK_RANGES_H_

#include <algorithm>
#include <cstdint>
#include <system_error>
#include <thread>
#include <vector>

namespace collwatch::analyzer {

// How many ranges to read `nranks` ranks of `calls_each` calls in, on at most `threads`: a
// thread reads at least 32,768 calls, as starting one costs about as much as reading 2,000.
inline int32_t RankRangesFor(unsigned threads, int32_t nranks, uint64_t calls_each) {
  constexpr uint64_t kCallsPerThread = uint64_t{1} << 15;
  const uint64_t ranks = static_cast<uint64_t>(std::max(nranks, 1));
  const uint64_t most = std::min<uint64_t>(std::max(threads, 1u), ranks * calls_each / kCallsPerThread + 1);
  return static_cast<int32_t>(std::min(most, ranks));
}

// Runs `read(range, first_rank, end_rank)` for each of `ranges` contiguous ranges of
// [0, nranks): the first on this thread, the others on threads of their own (here, where
// none can be had). Returns once every range is read.
template <typename Read>
void ForRankRanges(int32_t nranks, int32_t ranges, const Read& read) {
  auto first_of = [&](int32_t range) { return static_cast<int32_t>(int64_t{nranks} * range / ranges); };
  std::vector<std::thread> readers;
  for (int32_t range = 1; range < ranges; ++range) {
    try {
      readers.emplace_back([&read, &first_of, range] { read(range, first_of(range), first_of(range + 1)); });
    } catch (const std::system_error&) {
      break;
    }
  }
  read(0, 0, first_of(1));
  for (auto range = static_cast<int32_t>(readers.size()) + 1; range < ranges; ++range) {
    read(range, first_of(range), first_of(range + 1));
  }
  for (std::thread& reader : readers) reader.join();
}

}  // namespace collwatch::analyzer

#endif  // COLLWATCH_ANALYZER_RANK_RANGES_H_
