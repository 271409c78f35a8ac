// PendingCalls: the same answers as one hash map under every mix of sets, finds and erases,
// whether a key sits in the direct-mapped table or was moved out to the map; and keys a
// damaged record may carry (all ones, colliding low bits) are keys like any other.
// Threading: single-threaded.
#include "analyzer/pending_calls.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace collwatch::analyzer::pending_calls_test {
namespace {

std::vector<uint32_t> Waiting(const PendingCalls& pending) {
  std::vector<uint32_t> calls;
  pending.ForEach([&](uint32_t call) { calls.push_back(call); });
  std::sort(calls.begin(), calls.end());
  return calls;
}

TEST(PendingCallsTest, AnswersAsOneMapUnderRandomUse) {
  std::mt19937_64 random(39);
  PendingCalls pending;
  std::map<uint64_t, uint32_t> expected;
  // Few lanes and a short span of indexes: keys collide in the table and come back.
  auto key = [&] { return (random() % 3) << 48 | random() % 200; };
  for (uint32_t step = 0; step < 200'000; ++step) {
    const uint64_t k = key();
    switch (random() % 3) {
      case 0:
        pending.Set(k, step);
        expected[k] = step;
        break;
      case 1:
        pending.Erase(k);
        expected.erase(k);
        break;
      default: {
        const uint32_t* found = pending.Find(k);
        auto it = expected.find(k);
        ASSERT_EQ(found != nullptr, it != expected.end()) << "key " << k << " at step " << step;
        if (found != nullptr) {
          ASSERT_EQ(*found, it->second);
        }
      }
    }
    ASSERT_EQ(pending.size(), expected.size());
    ASSERT_EQ(pending.empty(), expected.empty());
  }
  std::vector<uint32_t> all;
  for (const auto& [k, call] : expected) all.push_back(call);
  std::sort(all.begin(), all.end());
  EXPECT_EQ(Waiting(pending), all) << "each waiting call visited once, none erased";
}

TEST(PendingCallsTest, AnEnterFollowedByItsReturnsStaysInTheTable) {
  PendingCalls pending;
  for (uint32_t index = 0; index < 1000; ++index) {
    pending.Set(uint64_t{1} << 48 | index, index);
    ASSERT_NE(pending.Find(uint64_t{1} << 48 | index), nullptr);
    pending.Erase(uint64_t{1} << 48 | index);
  }
  EXPECT_TRUE(pending.empty());
}

TEST(PendingCallsTest, AnyKeyIsAKeyEvenAllOnes) {
  PendingCalls pending;
  EXPECT_EQ(pending.Find(UINT64_MAX), nullptr) << "an empty slot answers no key";
  EXPECT_EQ(pending.Find(0), nullptr);
  pending.Set(UINT64_MAX, 7);
  pending.Set(0, 8);
  pending.Set(16, 9);  // the same slot as 0: moves 0 out to the map
  ASSERT_NE(pending.Find(UINT64_MAX), nullptr);
  EXPECT_EQ(*pending.Find(UINT64_MAX), 7u);
  EXPECT_EQ(*pending.Find(0), 8u);
  EXPECT_EQ(*pending.Find(16), 9u);
  pending.Set(0, 10);  // back into the table; the map's copy must go
  EXPECT_EQ(*pending.Find(0), 10u);
  EXPECT_EQ(Waiting(pending), (std::vector<uint32_t>{7, 9, 10}));
}

}  // namespace
}  // namespace collwatch::analyzer::pending_calls_test
