// Tests of the region intern table, the per-thread range stack and the mirror into a
// ring's string slots. The table is process-wide: every test uses names of its own,
// and the test that fills the table runs in a child process.
#include "interposer/regions.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ring/hash.h"
#include "ring/ring_format.h"

namespace collwatch {
namespace {

uint32_t Intern(const std::string& name) { return InternRegion(name.data(), name.size()); }

std::string NameOf(uint32_t id) {
  char buffer[ring::kMaxStringBytes + 1];
  const size_t length = RegionName(id, buffer, sizeof(buffer));
  return std::string(buffer, std::min<size_t>(length, ring::kMaxStringBytes));
}

TEST(InternRegion, SameNameSameId) {
  const uint32_t id = Intern("same/forward");
  EXPECT_NE(id, 0u);
  EXPECT_EQ(Intern("same/forward"), id);
  EXPECT_EQ(NameOf(id), "same/forward");
}

TEST(InternRegion, DifferentNamesDifferentIds) {
  std::set<uint32_t> ids;
  for (int i = 0; i < 100; ++i) ids.insert(Intern("different/" + std::to_string(i)));
  EXPECT_EQ(ids.size(), 100u);
  EXPECT_EQ(ids.count(0), 0u);
}

TEST(InternRegion, LengthNotTerminatorDecides) {
  const char text[] = "prefix/abcdef";
  const uint32_t whole = InternRegion(text, sizeof(text) - 1);
  const uint32_t part = InternRegion(text, 7);  // "prefix/"
  EXPECT_NE(whole, part);
  EXPECT_EQ(NameOf(part), "prefix/");
}

TEST(InternRegion, LongNamesTruncatedButDistinct) {
  const std::string stem(200, 'x');
  const uint32_t a = Intern(stem + "/a");
  const uint32_t b = Intern(stem + "/b");
  ASSERT_NE(a, 0u);
  ASSERT_NE(b, 0u);
  EXPECT_NE(a, b);
  EXPECT_EQ(Intern(stem + "/a"), a);
  EXPECT_EQ(NameOf(a), stem.substr(0, ring::kMaxStringBytes));
  EXPECT_EQ(RegionName(b, nullptr, 0), ring::kMaxStringBytes);
}

TEST(InternRegion, TruncationKeepsUtf8SequencesWhole) {
  // 111 ASCII bytes, then a 3-byte character straddling the 112-byte limit.
  const std::string name = std::string(111, 'u') + "\xe2\x82\xac" + "tail";
  const uint32_t id = Intern(name);
  ASSERT_NE(id, 0u);
  EXPECT_EQ(NameOf(id), std::string(111, 'u'));
}

TEST(InternRegion, EmptyAndNullNames) {
  const uint32_t empty = InternRegion("", 0);
  EXPECT_NE(empty, 0u);
  EXPECT_EQ(InternRegion(nullptr, 5), empty);  // NULL is the empty name
  EXPECT_EQ(RegionName(empty, nullptr, 0), 0u);
}

TEST(RegionName, UnknownIdsAndSmallBuffers) {
  char buffer[4] = {'z', 'z', 'z', 'z'};
  EXPECT_EQ(RegionName(0, buffer, sizeof(buffer)), 0u);
  EXPECT_EQ(RegionName(ring::kDefaultStringCapacity + 1, buffer, sizeof(buffer)), 0u);
  const uint32_t id = Intern("small-buffer");
  EXPECT_EQ(RegionName(id, buffer, sizeof(buffer)), 12u);
  EXPECT_STREQ(buffer, "sma");
}

TEST(InternRegion, HashedVariantMatchesPlain) {
  const std::string name = "hashed/variant";
  EXPECT_EQ(InternRegionHashed(name.data(), name.size(), Hash64(name.data(), name.size())),
            Intern(name));
  // Same text under another hash: another name (e.g. the same message in a domain).
  EXPECT_NE(InternRegionHashed(name.data(), name.size(), 12345), Intern(name));
}

// A ring sized down for a small /dev/shm has kRegionSmallWindow name slots: a process with
// a few hundred names (the usual) still has each carried into it, none dropped.
TEST(InternRegion, AFewHundredNamesFitARingAtTheFloor) {
  std::vector<std::pair<uint32_t, std::string>> names;
  for (int i = 0; i < 400; ++i) {
    const std::string name = "floor/layer." + std::to_string(i);
    const uint32_t id = Intern(name);
    ASSERT_GE(id, 1u) << name;
    EXPECT_LE(id, kRegionSmallWindow) << name << ": a ring at the floor has no slot for it";
    names.emplace_back(id, name);
  }
  std::vector<ring::StringSlot> slots(kRegionSmallWindow);
  const uint64_t dropped = RegionsDropped();
  MirrorRegionsInto(slots.data(), slots.size());
  for (const auto& [id, name] : names) {
    const ring::StringSlot& slot = slots[id - 1];
    ASSERT_EQ(slot.state.load(), ring::kStringReady) << name;
    EXPECT_EQ(std::string(slot.text, slot.length), name);
  }
  EXPECT_EQ(RegionsDropped(), dropped);
  MirrorRegionsInto(nullptr, 0);
}

TEST(InternRegionDeathTest, FullTableReturnsZeroAndCounts) {
  // In a child process: filling the table would break every later test.
  EXPECT_EXIT(
      {
        const uint64_t dropped_before = RegionsDropped();
        std::vector<uint32_t> ids;
        uint64_t failures = 0;
        for (uint64_t i = 0; i < 2 * ring::kDefaultStringCapacity; ++i) {
          const uint32_t id = Intern("fill/" + std::to_string(i));
          if (id == 0) {
            ++failures;
          } else {
            ids.push_back(id);
          }
        }
        bool ok = failures > 0 && ids.size() <= ring::kDefaultStringCapacity &&
                  ids.size() >= ring::kDefaultStringCapacity * 3 / 4 &&
                  RegionsDropped() - dropped_before == failures;
        // Names already in stay found, with their ids.
        for (uint64_t i = 0; i < 50 && ok; ++i) {
          const uint32_t again = Intern("fill/" + std::to_string(i));
          ok = again == 0 || std::find(ids.begin(), ids.end(), again) != ids.end();
        }
        ok = ok && std::set<uint32_t>(ids.begin(), ids.end()).size() == ids.size();
        _exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(InternRegion, ConcurrentInterningAgrees) {
  constexpr int kThreads = 8;
  constexpr int kNames = 300;
  std::vector<std::string> names;
  for (int i = 0; i < kNames; ++i) names.push_back("concurrent/" + std::to_string(i));
  std::vector<std::vector<uint32_t>> ids(kThreads, std::vector<uint32_t>(kNames));
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<int> order(kNames);
      for (int i = 0; i < kNames; ++i) order[i] = i;
      // Half the threads go in the same order (maximal collisions), half shuffled.
      if (t % 2 == 1) std::shuffle(order.begin(), order.end(), std::mt19937(t));
      ready.fetch_add(1);
      while (ready.load() < kThreads) {
      }
      for (int i : order) ids[t][i] = Intern(names[i]);
    });
  }
  for (auto& thread : threads) thread.join();
  std::set<uint32_t> distinct;
  for (int i = 0; i < kNames; ++i) {
    ASSERT_NE(ids[0][i], 0u);
    for (int t = 1; t < kThreads; ++t) ASSERT_EQ(ids[t][i], ids[0][i]) << names[i];
    distinct.insert(ids[0][i]);
    EXPECT_EQ(NameOf(ids[0][i]), names[i]);
  }
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kNames));
}

TEST(RegionStack, PushPopCurrent) {
  const uint32_t outer = Intern("stack/outer");
  const uint32_t inner = Intern("stack/inner");
  EXPECT_EQ(CurrentRegionId(), 0u);
  PushRegion(outer);
  EXPECT_EQ(CurrentRegionId(), outer);
  PushRegion(inner);
  EXPECT_EQ(CurrentRegionId(), inner);
  EXPECT_EQ(RegionDepth(), 2u);
  PushRegion(0);  // an unnamed range hides the named ones
  EXPECT_EQ(CurrentRegionId(), 0u);
  PopRegion();
  EXPECT_EQ(CurrentRegionId(), inner);
  PopRegion();
  EXPECT_EQ(CurrentRegionId(), outer);
  PopRegion();
  EXPECT_EQ(CurrentRegionId(), 0u);
  EXPECT_EQ(RegionDepth(), 0u);
}

TEST(RegionStack, OverflowIsCountedAndUnwinds) {
  constexpr uint32_t kPushes = 70;  // the stack holds 64
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < kPushes; ++i) ids.push_back(Intern("deep/" + std::to_string(i)));
  const uint64_t dropped_before = RegionsDropped();
  for (uint32_t i = 0; i < kPushes; ++i) PushRegion(ids[i]);
  EXPECT_EQ(RegionsDropped() - dropped_before, kPushes - 64);
  EXPECT_EQ(RegionDepth(), kPushes);
  EXPECT_EQ(CurrentRegionId(), ids[63]);  // innermost stored level stays current
  for (uint32_t i = kPushes; i > 64; --i) PopRegion();
  EXPECT_EQ(CurrentRegionId(), ids[63]);
  PopRegion();
  EXPECT_EQ(CurrentRegionId(), ids[62]);
  for (uint32_t i = 0; i < 63; ++i) PopRegion();
  EXPECT_EQ(CurrentRegionId(), 0u);
  EXPECT_EQ(RegionDepth(), 0u);
}

TEST(RegionStack, UnderflowIsIgnored) {
  EXPECT_EQ(RegionDepth(), 0u);
  PopRegion();
  PopRegion();
  EXPECT_EQ(RegionDepth(), 0u);
  EXPECT_EQ(CurrentRegionId(), 0u);
  const uint32_t id = Intern("underflow/after");
  PushRegion(id);
  EXPECT_EQ(CurrentRegionId(), id);
  PopRegion();
  EXPECT_EQ(CurrentRegionId(), 0u);
}

TEST(RegionStack, ThreadsHaveTheirOwnStacks) {
  const uint32_t mine = Intern("threads/main");
  PushRegion(mine);
  uint32_t seen = 99;
  std::thread([&] {
    seen = CurrentRegionId();
    PushRegion(Intern("threads/other"));
  }).join();
  EXPECT_EQ(seen, 0u);
  EXPECT_EQ(CurrentRegionId(), mine);
  PopRegion();
}

// A mirrored ring must stay valid while anything may intern: static storage. Each test
// mirrors into the ring it checks (ctest runs every test in a process of its own).
ring::StringSlot g_ring[ring::kDefaultStringCapacity];

void ExpectMirrored(uint32_t id, const std::string& name) {
  ASSERT_NE(id, 0u);
  const ring::StringSlot& slot = g_ring[id - 1];
  ASSERT_EQ(slot.state.load(std::memory_order_acquire), ring::kStringReady) << name;
  EXPECT_EQ(std::string(slot.text, slot.length), name);
  EXPECT_EQ(slot.hash, Hash64(name.data(), name.size()));
}

TEST(MirrorRegions, CopiesEarlierAndLaterNames) {
  const uint32_t before = Intern("mirror/before");
  MirrorRegionsInto(g_ring, ring::kDefaultStringCapacity);
  ExpectMirrored(before, "mirror/before");
  const uint32_t after = Intern("mirror/after");
  ExpectMirrored(after, "mirror/after");
  // Slots of ids never interned stay empty.
  size_t ready = 0;
  for (const auto& slot : g_ring) ready += slot.state.load() == ring::kStringReady;
  std::set<uint32_t> live;
  for (uint32_t id = 1; id <= ring::kDefaultStringCapacity; ++id) {
    if (RegionName(id, nullptr, 0) > 0 || g_ring[id - 1].state.load() == ring::kStringReady) {
      live.insert(id);
    }
  }
  EXPECT_EQ(ready, live.size());
}

TEST(MirrorRegions, SlotsAreWrittenOnce) {
  MirrorRegionsInto(g_ring, ring::kDefaultStringCapacity);
  const uint32_t id = Intern("mirror/once");
  ExpectMirrored(id, "mirror/once");
  // Another mirror pass over the same ring rewrites nothing.
  std::vector<char> snapshot(reinterpret_cast<const char*>(g_ring),
                             reinterpret_cast<const char*>(g_ring) + sizeof(g_ring));
  MirrorRegionsInto(g_ring, ring::kDefaultStringCapacity);
  EXPECT_EQ(std::memcmp(snapshot.data(), g_ring, sizeof(g_ring)), 0);

  // A ring slot someone else already holds is left alone.
  static ring::StringSlot other_ring[ring::kDefaultStringCapacity];
  ring::StringSlot& taken = other_ring[id - 1];
  taken.length = 7;
  std::memcpy(taken.text, "foreign", 7);
  taken.state.store(ring::kStringReady);
  MirrorRegionsInto(other_ring, ring::kDefaultStringCapacity);
  EXPECT_EQ(std::string(taken.text, taken.length), "foreign");
  MirrorRegionsInto(g_ring, ring::kDefaultStringCapacity);
}

TEST(MirrorRegions, RacesWithConcurrentInterning) {
  static ring::StringSlot second_ring[ring::kDefaultStringCapacity];
  constexpr int kThreads = 4;
  constexpr int kNames = 200;
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  std::vector<std::vector<uint32_t>> ids(kThreads, std::vector<uint32_t>(kNames));
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) {
      }
      for (int i = 0; i < kNames; ++i) {
        ids[t][i] = Intern("race/" + std::to_string(t) + "/" + std::to_string(i));
      }
    });
  }
  go.store(true);
  MirrorRegionsInto(second_ring, ring::kDefaultStringCapacity);
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kNames; ++i) {
      const uint32_t id = ids[t][i];
      ASSERT_NE(id, 0u);
      const ring::StringSlot& slot = second_ring[id - 1];
      ASSERT_EQ(slot.state.load(), ring::kStringReady) << t << "/" << i;
      EXPECT_EQ(std::string(slot.text, slot.length),
                "race/" + std::to_string(t) + "/" + std::to_string(i));
    }
  }
  MirrorRegionsInto(g_ring, ring::kDefaultStringCapacity);  // back to the first ring
}

TEST(MirrorRegions, SmallerRingCountsWhatItCannotHold) {
  static ring::StringSlot tiny[4];
  MirrorRegionsInto(tiny, 4);
  const uint64_t dropped_before = RegionsDropped();
  uint32_t id = 0;
  for (int i = 0; i < 50 && (id == 0 || id <= 4); ++i) id = Intern("tiny/" + std::to_string(i));
  ASSERT_GT(id, 4u);
  EXPECT_GE(RegionsDropped() - dropped_before, 1u);
  MirrorRegionsInto(g_ring, ring::kDefaultStringCapacity);
}

}  // namespace
}  // namespace collwatch
