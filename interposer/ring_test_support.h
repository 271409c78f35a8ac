// Test-only: what the ring tests (ring_test.cc: records; ring_file_test.cc: files and
// folders) share: a record pattern that shows a torn copy, a fixture with a scratch
// folder and a writer Config pointing into it, and reading a lane whole.
// Threading: single-threaded test code.
#ifndef COLLWATCH_INTERPOSER_RING_TEST_SUPPORT_H_
#define COLLWATCH_INTERPOSER_RING_TEST_SUPPORT_H_

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>

#include "gtest/gtest.h"
#include "interposer/config.h"
#include "ring/hash.h"
#include "ring/ring_directory.h"
#include "ring/ring_format.h"
#include "ring/ring_reader.h"

namespace collwatch {

// A record whose words all derive from `value`, so a torn copy is detectable.
inline ring::Record PatternRecord(uint64_t value) {
  ring::Record record{};
  record.kind = static_cast<uint16_t>(ring::RecordKind::kEnter);
  record.fn = static_cast<uint16_t>(ring::ApiFn::kAllReduce);
  record.comm_id = Mix64(value);
  record.seq = value;
  record.count = value * 3;
  record.stream = ~value;
  record.t_ns = value + 7;
  record.aux0 = value;
  record.aux1 = Mix64(value + 1);
  record.aux2 = value ^ 0x5555555555555555ull;
  return record;
}

inline bool MatchesPattern(const ring::Record& record) {
  const uint64_t value = record.aux0;
  return record.comm_id == Mix64(value) && record.seq == value && record.count == value * 3 &&
         record.stream == ~value && record.t_ns == value + 7 && record.aux1 == Mix64(value + 1) &&
         record.aux2 == (value ^ 0x5555555555555555ull);
}

class RingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/collwatch-ring-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Config ConfigWith(uint64_t records, uint32_t lanes = 4) {
    Config config;
    config.ring_records = records;
    config.ring_lanes = lanes;
    std::snprintf(config.ring_dir, sizeof config.ring_dir, "%s/rings", dir_.c_str());
    std::snprintf(config.job, sizeof config.job, "test");
    return config;
  }

  std::string OnlyRing() {
    auto paths = ListRingFiles(dir_ + "/rings");
    EXPECT_TRUE(paths.ok());
    EXPECT_EQ(paths->size(), 1u);
    return paths->empty() ? "" : paths->front();
  }

  // Maps the ring at `path` (ConfigWith(capacity): 4 lanes) writable and hands `edit` the
  // header of lane `lane`, its records right after it: for tests that damage a ring.
  void EditLane(const std::string& path, uint64_t capacity, uint32_t lane,
                const std::function<void(ring::LaneHeader*)>& edit) {
    const uint64_t bytes =
        ring::RingFileBytes(4, capacity, ring::kDefaultStringCapacity, ring::kDefaultCallPathCapacity);
    const int fd = open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    void* map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    ASSERT_NE(map, MAP_FAILED);
    const auto* header = static_cast<ring::Header*>(map);
    edit(reinterpret_cast<ring::LaneHeader*>(static_cast<char*>(map) + header->lanes_offset +
                                             lane * header->lane_bytes));
    munmap(map, bytes);
  }

  std::string dir_;
};

inline constexpr uint32_t kLane = 1;  // an owned lane, for single-writer tests

inline ReadBatch ReadLaneFrom(const RingReader& reader, uint32_t lane, LaneCursor* cursor,
                              bool writer_gone = false) {
  ReadBatch batch;
  reader.ReadLane(lane, cursor, SIZE_MAX, writer_gone, &batch);
  return batch;
}

}  // namespace collwatch

#endif  // COLLWATCH_INTERPOSER_RING_TEST_SUPPORT_H_
