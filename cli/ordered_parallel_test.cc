#include "cli/ordered_parallel.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace collwatch::ordered_parallel_test {
namespace {

TEST(OrderedParallelTest, ConsumesEveryResultInOrderOnTheCallingThread) {
  constexpr size_t kInputs = 200;
  std::vector<size_t> consumed;
  std::mutex producers_mutex;
  std::set<std::thread::id> producers;
  const std::thread::id caller = std::this_thread::get_id();
  OrderedParallel<size_t>(
      kInputs, 4, 8,
      [&](size_t i) {
        // Later inputs finish first now and then: order must come from the consumer.
        if (i % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
        std::lock_guard<std::mutex> lock(producers_mutex);
        producers.insert(std::this_thread::get_id());
        return i * i;
      },
      [&](size_t i, size_t square) {
        EXPECT_EQ(std::this_thread::get_id(), caller);
        EXPECT_EQ(square, i * i);
        consumed.push_back(i);
      });
  ASSERT_EQ(consumed.size(), kInputs);
  for (size_t i = 0; i < kInputs; ++i) EXPECT_EQ(consumed[i], i);
  EXPECT_EQ(producers.count(caller), 0u) << "the workers produce";
}

TEST(OrderedParallelTest, NeverProducesMoreThanItsWindowAheadOfTheConsumer) {
  std::atomic<size_t> consumed{0};
  std::atomic<size_t> furthest_ahead{0};
  OrderedParallel<int>(
      100, 3, 5,
      [&](size_t i) {
        const size_t ahead = i - std::min(i, consumed.load());
        size_t seen = furthest_ahead.load();
        while (ahead > seen && !furthest_ahead.compare_exchange_weak(seen, ahead)) {
        }
        return 0;
      },
      [&](size_t i, int) { consumed = i + 1; });
  EXPECT_EQ(consumed.load(), 100u);
  EXPECT_LE(furthest_ahead.load(), 6u) << "the window (5) and the one being consumed";
}

TEST(OrderedParallelTest, OneThreadOrOneInputRunsOnTheCallingThread) {
  const std::thread::id caller = std::this_thread::get_id();
  for (const auto& [count, threads] : {std::pair<size_t, unsigned>{10, 1}, {1, 8}}) {
    size_t consumed = 0;
    OrderedParallel<int>(
        count, threads, 4,
        [&](size_t) {
          EXPECT_EQ(std::this_thread::get_id(), caller);
          return 1;
        },
        [&](size_t, int one) { consumed += static_cast<size_t>(one); });
    EXPECT_EQ(consumed, count);
  }
}

}  // namespace
}  // namespace collwatch::ordered_parallel_test
