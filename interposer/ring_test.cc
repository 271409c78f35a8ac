// Ring writer + reader: round trip, concurrent writers, wrap-around, torn records,
// racing readers, files that are not rings, and a ring read after its writer was
// SIGKILLed.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "interposer/ring_writer.h"
#include "ring/hash.h"
#include "ring/ring_directory.h"
#include "ring/ring_reader.h"

namespace collwatch {
namespace {

// A record whose words all derive from `value`, so a torn copy is detectable.
ring::Record PatternRecord(uint64_t value) {
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

bool MatchesPattern(const ring::Record& record) {
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

  std::string dir_;
};

constexpr uint32_t kLane = 1;  // an owned lane, for single-writer tests

ReadBatch ReadLaneFrom(const RingReader& reader, uint32_t lane, LaneCursor* cursor,
                       bool writer_gone = false) {
  ReadBatch batch;
  reader.ReadLane(lane, cursor, SIZE_MAX, writer_gone, &batch);
  return batch;
}

TEST_F(RingTest, RoundTripKeepsEveryFieldAndIdentity) {
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "8", 1);
  std::unique_ptr<RingWriter> writer = RingWriter::Create(ConfigWith(1024));
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  ASSERT_NE(writer, nullptr);
  for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(writer->Append(kLane, PatternRecord(i)), i);

  auto reader = RingReader::Open(OnlyRing());
  ASSERT_TRUE(reader.ok()) << reader.status();
  const RingIdentity& id = (*reader)->identity();
  EXPECT_EQ(id.pid, getpid());
  EXPECT_EQ(id.rank, 3);
  EXPECT_EQ(id.world_size, 8);
  EXPECT_EQ(id.local_rank, ring::kUnset);
  EXPECT_EQ(id.job, "test");
  EXPECT_EQ(id.lane_capacity, 1024u);
  EXPECT_EQ(id.lane_count, 4u);
  EXPECT_TRUE((*reader)->WriterProcessAlive());

  LaneCursor cursor;
  ReadBatch batch = ReadLaneFrom(**reader, kLane, &cursor);
  ASSERT_EQ(batch.records.size(), 100u);
  EXPECT_EQ(batch.lost, 0u);
  EXPECT_EQ(batch.torn, 0u);
  EXPECT_EQ(cursor.next, 100u);
  for (uint64_t i = 0; i < 100; ++i) {
    EXPECT_EQ(batch.records[i].lane, kLane);
    EXPECT_EQ(batch.records[i].index, i);
    EXPECT_EQ(batch.records[i].record.aux0, i);
    EXPECT_TRUE(MatchesPattern(batch.records[i].record));
    EXPECT_EQ(batch.records[i].record.commit, i + 1);
  }
  // Reading on from the cursor returns nothing new, then the new record.
  EXPECT_TRUE(ReadLaneFrom(**reader, kLane, &cursor).records.empty());
  writer->Append(kLane, PatternRecord(100));
  EXPECT_EQ(ReadLaneFrom(**reader, kLane, &cursor).records.size(), 1u);
  EXPECT_EQ((*reader)->records_written(), 101u);
}

TEST_F(RingTest, LanesAreClaimedReleasedAndSharedBeyondCapacity) {
  std::unique_ptr<RingWriter> writer = RingWriter::Create(ConfigWith(64, 4));
  ASSERT_NE(writer, nullptr);
  EXPECT_EQ(writer->ClaimLane(101), 1u);
  EXPECT_EQ(writer->ClaimLane(102), 2u);
  EXPECT_EQ(writer->ClaimLane(103), 3u);
  EXPECT_EQ(writer->ClaimLane(104), RingWriter::kSharedLane);
  writer->ReleaseLane(2);
  EXPECT_EQ(writer->ClaimLane(105), 2u);
}

// A call's return written into its own kEnter slot reads as a kEnter, then (once it
// returned) a kReturn pointing back at it; until then the lane waits at that call.
TEST_F(RingTest, InPlaceReturnReadsAsEnterThenReturn) {
  std::unique_ptr<RingWriter> writer = RingWriter::Create(ConfigWith(64));
  ASSERT_NE(writer, nullptr);
  ring::Record call = PatternRecord(5);
  call.flags = ring::kFlagReturnsInPlace;
  const uint64_t index = writer->Append(kLane, call);
  auto reader = RingReader::Open(OnlyRing());
  ASSERT_TRUE(reader.ok());

  LaneCursor cursor;
  ReadBatch open = ReadLaneFrom(**reader, kLane, &cursor);
  ASSERT_EQ(open.records.size(), 1u);
  EXPECT_EQ(open.records[0].record.kind, static_cast<uint16_t>(ring::RecordKind::kEnter));
  EXPECT_EQ(cursor.next, index);  // waits at the open call
  EXPECT_TRUE(cursor.enter_emitted);
  EXPECT_TRUE(ReadLaneFrom(**reader, kLane, &cursor).records.empty());

  writer->ReturnInPlace(kLane, index, 999, 3, call.flags | ring::kFlagCompletesAtReturn);
  writer->Append(kLane, PatternRecord(6));
  ReadBatch rest = ReadLaneFrom(**reader, kLane, &cursor);
  ASSERT_EQ(rest.records.size(), 2u);  // the return (not the enter again), then the next
  const ring::Record& returned = rest.records[0].record;
  EXPECT_EQ(returned.kind, static_cast<uint16_t>(ring::RecordKind::kReturn));
  EXPECT_EQ(returned.t_ns, 999u);
  EXPECT_EQ(returned.result, 3);
  EXPECT_EQ(returned.ref_lane, kLane);
  EXPECT_EQ(returned.ref_index, index);
  EXPECT_TRUE(returned.flags & ring::kFlagCompletesAtReturn);
  EXPECT_EQ(rest.records[1].record.aux0, 6u);

  // From scratch: enter (without the return's flags) and return, in order.
  LaneCursor fresh;
  ReadBatch all = ReadLaneFrom(**reader, kLane, &fresh);
  ASSERT_EQ(all.records.size(), 3u);
  EXPECT_EQ(all.records[0].record.kind, static_cast<uint16_t>(ring::RecordKind::kEnter));
  EXPECT_FALSE(all.records[0].record.flags & ring::kFlagCompletesAtReturn);
  EXPECT_EQ(all.records[0].record.t_ns, call.t_ns);
  EXPECT_EQ(all.records[1].record.kind, static_cast<uint16_t>(ring::RecordKind::kReturn));
}

TEST_F(RingTest, CallThatNeverReturnsStaysAnEnterAfterItsWriterIsGone) {
  std::unique_ptr<RingWriter> writer = RingWriter::Create(ConfigWith(64));
  ASSERT_NE(writer, nullptr);
  ring::Record call = PatternRecord(1);
  call.flags = ring::kFlagReturnsInPlace;
  writer->Append(kLane, call);
  auto reader = RingReader::Open(OnlyRing());
  ASSERT_TRUE(reader.ok());
  LaneCursor cursor;
  ReadBatch batch = ReadLaneFrom(**reader, kLane, &cursor, /*writer_gone=*/true);
  ASSERT_EQ(batch.records.size(), 1u);
  EXPECT_EQ(batch.records[0].record.kind, static_cast<uint16_t>(ring::RecordKind::kEnter));
  EXPECT_EQ(cursor.next, 1u);
}

TEST_F(RingTest, RingFileIsPrivateToItsUser) {
  std::unique_ptr<RingWriter> writer = RingWriter::Create(ConfigWith(64));
  ASSERT_NE(writer, nullptr);
  struct stat dir_info {};
  struct stat file_info {};
  ASSERT_EQ(stat((dir_ + "/rings").c_str(), &dir_info), 0);
  ASSERT_EQ(stat(OnlyRing().c_str(), &file_info), 0);
  EXPECT_EQ(dir_info.st_mode & 0777, 0700u);
  EXPECT_EQ(file_info.st_mode & 0777, 0600u);
}

// 8 threads, 4 lanes: three threads own a lane, five share lane 0.
TEST_F(RingTest, ConcurrentWritersLoseNothingAndKeepPerThreadOrder) {
  constexpr int kThreads = 8;
  constexpr uint64_t kPerThread = 20000;
  std::unique_ptr<RingWriter> writer = RingWriter::Create(ConfigWith(1u << 17, 4));
  ASSERT_NE(writer, nullptr);
  std::vector<std::thread> threads;
  std::vector<uint32_t> lanes(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&writer, &lanes, t] {
      const uint32_t lane = writer->ClaimLane(static_cast<uint32_t>(1000 + t));
      lanes[t] = lane;
      for (uint64_t i = 0; i < kPerThread; ++i) writer->Append(lane, PatternRecord(t * kPerThread + i));
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(std::count(lanes.begin(), lanes.end(), RingWriter::kSharedLane), kThreads - 3);

  auto reader = RingReader::Open(OnlyRing());
  ASSERT_TRUE(reader.ok()) << reader.status();
  ReadBatch batch = (*reader)->ReadAll(false);
  ASSERT_EQ(batch.records.size(), kThreads * kPerThread);
  std::vector<int64_t> last(kThreads, -1);
  std::set<uint64_t> seen;
  for (const IndexedRecord& item : batch.records) {
    ASSERT_TRUE(MatchesPattern(item.record));
    const uint64_t value = item.record.aux0;
    const int thread = static_cast<int>(value / kPerThread);
    const auto ordinal = static_cast<int64_t>(value % kPerThread);
    EXPECT_EQ(item.lane, lanes[thread]);
    EXPECT_GT(ordinal, last[thread]) << "thread " << thread << " out of order";
    last[thread] = ordinal;
    seen.insert(value);
  }
  EXPECT_EQ(seen.size(), kThreads * kPerThread);
}

TEST_F(RingTest, WrapAroundOverwritesOldestAndCountsTheLoss) {
  std::unique_ptr<RingWriter> writer = RingWriter::Create(ConfigWith(64));
  ASSERT_NE(writer, nullptr);
  for (uint64_t i = 0; i < 1000; ++i) writer->Append(kLane, PatternRecord(i));
  auto reader = RingReader::Open(OnlyRing());
  ASSERT_TRUE(reader.ok());
  LaneCursor cursor;
  ReadBatch batch = ReadLaneFrom(**reader, kLane, &cursor);
  EXPECT_EQ(batch.lost, 1000u - 64u);
  ASSERT_EQ(batch.records.size(), 64u);
  EXPECT_EQ(batch.records.front().record.aux0, 1000u - 64u);
  EXPECT_EQ(batch.records.back().record.aux0, 999u);
  // A reader that kept up loses nothing across the wrap.
  ReadBatch later = ReadLaneFrom(**reader, kLane, &cursor);
  EXPECT_TRUE(later.records.empty());
  for (uint64_t i = 1000; i < 1040; ++i) writer->Append(kLane, PatternRecord(i));
  later = ReadLaneFrom(**reader, kLane, &cursor);
  EXPECT_EQ(later.lost, 0u);
  EXPECT_EQ(later.records.size(), 40u);
}

// A writer that reserved an index and died before committing: the live reader waits at
// that record; a post-mortem reader counts it as torn and reads past it.
TEST_F(RingTest, UncommittedRecordWaitsThenCountsAsTorn) {
  std::unique_ptr<RingWriter> writer = RingWriter::Create(ConfigWith(256));
  ASSERT_NE(writer, nullptr);
  for (uint64_t i = 0; i < 10; ++i) writer->Append(kLane, PatternRecord(i));
  // Reserve index 10 the way Append does, but never commit it.
  const std::string path = OnlyRing();
  {
    const uint64_t bytes = ring::RingFileBytes(4, 256, ring::kDefaultStringCapacity);
    const int fd = open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    void* map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    ASSERT_NE(map, MAP_FAILED);
    const auto* header = static_cast<ring::Header*>(map);
    auto* lane = reinterpret_cast<ring::LaneHeader*>(static_cast<char*>(map) + header->lanes_offset +
                                                     kLane * header->lane_bytes);
    lane->write_index.fetch_add(1);
    munmap(map, bytes);
  }
  for (uint64_t i = 11; i < 20; ++i) writer->Append(kLane, PatternRecord(i));

  auto reader = RingReader::Open(path);
  ASSERT_TRUE(reader.ok());
  LaneCursor live_cursor;
  ReadBatch live = ReadLaneFrom(**reader, kLane, &live_cursor, /*writer_gone=*/false);
  EXPECT_EQ(live.records.size(), 10u);
  EXPECT_EQ(live_cursor.next, 10u);
  EXPECT_EQ(live.torn, 0u);
  LaneCursor dead_cursor;
  ReadBatch post_mortem = ReadLaneFrom(**reader, kLane, &dead_cursor, /*writer_gone=*/true);
  EXPECT_EQ(post_mortem.records.size(), 19u);
  EXPECT_EQ(post_mortem.torn, 1u);
  EXPECT_EQ(dead_cursor.next, 20u);
}

// Readers racing writers on a tiny ring never accept a torn copy as valid.
TEST_F(RingTest, RacingReaderNeverSeesTornRecords) {
  std::unique_ptr<RingWriter> writer = RingWriter::Create(ConfigWith(64));
  ASSERT_NE(writer, nullptr);
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int t = 0; t < 2; ++t) {
    writers.emplace_back([&, t] {
      for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        writer->Append(RingWriter::kSharedLane, PatternRecord(i * 2 + t));
      }
    });
  }
  auto reader = RingReader::Open(OnlyRing());
  ASSERT_TRUE(reader.ok());
  LaneCursor cursor;
  uint64_t valid = 0;
  uint64_t lost = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < deadline) {
    ReadBatch batch;
    (*reader)->ReadLane(RingWriter::kSharedLane, &cursor, 32, false, &batch);
    for (const IndexedRecord& item : batch.records) {
      ASSERT_TRUE(MatchesPattern(item.record)) << "torn record accepted at " << item.index;
    }
    valid += batch.records.size();
    lost += batch.lost;
  }
  stop = true;
  for (auto& thread : writers) thread.join();
  EXPECT_GT(valid, 0u);
  EXPECT_GT(lost, 0u);  // the writers lap a 64-record ring faster than we read
}

TEST_F(RingTest, RingSurvivesSigkillOfItsWriter) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::unique_ptr<RingWriter> writer = RingWriter::Create(ConfigWith(1u << 16));
    if (writer == nullptr) _exit(2);
    for (uint64_t i = 0; i < 5000; ++i) writer->Append(kLane, PatternRecord(i));
    const char byte = 1;
    if (write(ready[1], &byte, 1) != 1) _exit(3);
    // Keep writing until killed: the kill lands at an arbitrary point of an Append.
    for (uint64_t i = 5000;; ++i) writer->Append(kLane, PatternRecord(i));
  }
  close(ready[1]);
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  usleep(20000);
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));

  auto reader = RingReader::Open(OnlyRing());
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_FALSE((*reader)->WriterProcessAlive());
  EXPECT_EQ((*reader)->writer_state(), ring::WriterState::kRunning);  // never exited cleanly
  const uint64_t written = (*reader)->write_index(kLane);
  ASSERT_GT(written, 5000u);
  LaneCursor cursor;
  ReadBatch batch = ReadLaneFrom(**reader, kLane, &cursor, /*writer_gone=*/true);
  EXPECT_LE(batch.torn, 1u);  // at most the one record the kill interrupted
  EXPECT_EQ(batch.records.size() + batch.lost + batch.torn, written);
  for (const IndexedRecord& item : batch.records) ASSERT_TRUE(MatchesPattern(item.record));
  // The newest records survive: the last one read is the last one reserved (or the one
  // before it, when the kill interrupted that one).
  ASSERT_FALSE(batch.records.empty());
  EXPECT_GE(batch.records.back().index + 2, written);
}

TEST_F(RingTest, FilesThatAreNotRingsGetClearErrors) {
  // Empty, or sized but without its header yet: a writer still creating it (retry).
  const std::string empty = dir_ + "/empty.ring";
  std::ofstream(empty).close();
  auto opened = RingReader::Open(empty);
  ASSERT_FALSE(opened.ok());
  EXPECT_TRUE(absl::IsUnavailable(opened.status())) << opened.status();
  EXPECT_NE(opened.status().message().find("not ready"), std::string::npos);
  const std::string zeros = dir_ + "/zeros.ring";
  std::ofstream(zeros) << std::string(8192, '\0');
  opened = RingReader::Open(zeros);
  EXPECT_TRUE(absl::IsUnavailable(opened.status())) << opened.status();

  const std::string short_file = dir_ + "/short.ring";
  std::ofstream(short_file) << std::string(100, 'x');
  opened = RingReader::Open(short_file);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("less than a header"), std::string::npos);

  const std::string garbage = dir_ + "/garbage.ring";
  std::ofstream(garbage) << std::string(8192, 'x');
  opened = RingReader::Open(garbage);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("wrong magic"), std::string::npos);

  std::unique_ptr<RingWriter> writer = RingWriter::Create(ConfigWith(64));
  ASSERT_NE(writer, nullptr);
  const std::string good = OnlyRing();
  const std::string truncated = dir_ + "/truncated.ring";
  std::filesystem::copy_file(good, truncated);
  std::filesystem::resize_file(truncated, 4096 + 100);
  opened = RingReader::Open(truncated);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("truncated"), std::string::npos);

  EXPECT_FALSE(RingReader::Open(dir_ + "/missing.ring").ok());
}

// Found writing the ring fuzzer: an offset near 2^64 made `offset + size` wrap below the
// file's size, and the reader then read outside its mapping.
TEST_F(RingTest, OffsetsThatWrapAroundAreRefused) {
  std::unique_ptr<RingWriter> writer = RingWriter::Create(ConfigWith(64));
  ASSERT_NE(writer, nullptr);
  const std::string good = OnlyRing();
  for (const size_t field : {offsetof(ring::Header, lanes_offset), offsetof(ring::Header, strings_offset)}) {
    const std::string damaged = dir_ + "/wrapped.ring";
    std::filesystem::copy_file(good, damaged, std::filesystem::copy_options::overwrite_existing);
    std::fstream file(damaged, std::ios::in | std::ios::out | std::ios::binary);
    const uint64_t offset = UINT64_MAX - 127;  // a multiple of 64 that wraps past the end
    file.seekp(static_cast<std::streamoff>(field));
    file.write(reinterpret_cast<const char*>(&offset), sizeof offset);
    file.close();
    auto opened = RingReader::Open(damaged);
    ASSERT_FALSE(opened.ok()) << field;
    EXPECT_NE(opened.status().message().find("inconsistent"), std::string::npos) << opened.status();
  }
}

TEST_F(RingTest, UnwritableFolderDisablesInsteadOfFailing) {
  Config config = ConfigWith(64);
  std::snprintf(config.ring_dir, sizeof config.ring_dir, "/proc/collwatch-cannot-exist");
  EXPECT_EQ(RingWriter::Create(config), nullptr);
}


// A folder's safety verdict, and that RingWriter::Create then writes nothing anywhere.
class RingFolderSafetyTest : public RingTest {
 protected:
  std::string Rings() const { return dir_ + "/rings"; }
  RingDirVerdict Verdict(const std::string& path) const {
    const RingDirCheck check = OpenPrivateRingDir(path.c_str(), /*create=*/false);
    if (check.fd >= 0) close(check.fd);
    return check.verdict;
  }
  // Create refuses, and leaves `watched` (a folder) as empty as it found it.
  void ExpectRefusedAndNothingWritten(const std::string& watched) {
    EXPECT_EQ(RingWriter::Create(ConfigWith(64)), nullptr);
    EXPECT_TRUE(std::filesystem::is_empty(watched)) << watched << " was written into";
  }
};

TEST_F(RingFolderSafetyTest, FreshFolderIsPrivateAndRingIsPrivateWhateverTheUmask) {
  const mode_t previous = umask(0);  // the job's umask must not widen our modes
  std::unique_ptr<RingWriter> writer = RingWriter::Create(ConfigWith(64));
  umask(previous);
  ASSERT_NE(writer, nullptr);
  struct stat dir_info {};
  struct stat file_info {};
  ASSERT_EQ(lstat(Rings().c_str(), &dir_info), 0);
  ASSERT_EQ(lstat(OnlyRing().c_str(), &file_info), 0);
  EXPECT_TRUE(S_ISDIR(dir_info.st_mode));
  EXPECT_EQ(dir_info.st_mode & 07777, 0700u);
  EXPECT_EQ(dir_info.st_uid, geteuid());
  EXPECT_TRUE(S_ISREG(file_info.st_mode));
  EXPECT_EQ(file_info.st_mode & 07777, 0600u);
  EXPECT_EQ(file_info.st_uid, geteuid());
  EXPECT_EQ(Verdict(Rings()), RingDirVerdict::kPrivate);
}

// Someone created the folder first, with modes that let others read or plant rings.
TEST_F(RingFolderSafetyTest, FolderOpenToOthersIsRefused) {
  for (mode_t mode : {0755, 0750, 0770, 0777, 01777, 0701}) {
    std::filesystem::remove_all(Rings());
    ASSERT_EQ(mkdir(Rings().c_str(), 0700), 0);
    ASSERT_EQ(chmod(Rings().c_str(), mode), 0);
    EXPECT_EQ(Verdict(Rings()), RingDirVerdict::kTooOpen) << std::oct << mode;
    ExpectRefusedAndNothingWritten(Rings());
  }
}

// Another user's folder at our path. Root can make one (a folder given to nobody);
// anyone else finds one in "/", which root owns.
TEST_F(RingFolderSafetyTest, FolderOwnedByAnotherUserIsRefused) {
  if (geteuid() == 0) {
    ASSERT_EQ(mkdir(Rings().c_str(), 0700), 0);
    ASSERT_EQ(chown(Rings().c_str(), 65534, 65534), 0);
    EXPECT_EQ(Verdict(Rings()), RingDirVerdict::kForeignOwner);
    ExpectRefusedAndNothingWritten(Rings());
  } else {
    EXPECT_EQ(Verdict("/"), RingDirVerdict::kForeignOwner);
    Config config = ConfigWith(64);
    std::snprintf(config.ring_dir, sizeof config.ring_dir, "/");
    EXPECT_EQ(RingWriter::Create(config), nullptr);
  }
}

// A symlink planted where the folder should be (as another user could in /dev/shm) is
// never followed, even when it points at a private folder of ours.
TEST_F(RingFolderSafetyTest, SymlinkAtTheFolderPathIsNotFollowed) {
  const std::string target = dir_ + "/target";
  ASSERT_EQ(mkdir(target.c_str(), 0700), 0);
  ASSERT_EQ(symlink(target.c_str(), Rings().c_str()), 0);
  EXPECT_EQ(Verdict(Rings()), RingDirVerdict::kNotADirectory);
  ExpectRefusedAndNothingWritten(target);
  // A plain file there is refused the same way.
  std::filesystem::remove(Rings());
  std::ofstream(Rings()) << "not a folder";
  EXPECT_EQ(Verdict(Rings()), RingDirVerdict::kNotADirectory);
  EXPECT_EQ(RingWriter::Create(ConfigWith(64)), nullptr);
}

// In a parent others may write without the sticky bit, our folder could be swapped for
// theirs after the check; a sticky one (like /dev/shm and /tmp) is fine.
TEST_F(RingFolderSafetyTest, SharedParentMustBeSticky) {
  ASSERT_EQ(chmod(dir_.c_str(), 0777), 0);
  EXPECT_EQ(Verdict(Rings()), RingDirVerdict::kUnsafeParent);
  EXPECT_EQ(RingWriter::Create(ConfigWith(64)), nullptr);
  EXPECT_FALSE(std::filesystem::exists(Rings()));
  ASSERT_EQ(chmod(dir_.c_str(), 01777), 0);
  EXPECT_NE(RingWriter::Create(ConfigWith(64)), nullptr);
  EXPECT_EQ(Verdict(Rings()), RingDirVerdict::kPrivate);
  ASSERT_EQ(chmod(dir_.c_str(), 0700), 0);
}

// A ring larger than the file size limit (ulimit -f) would earn the job a SIGXFSZ,
// which kills it: no ring instead. The test process itself would die if it were made.
TEST_F(RingFolderSafetyTest, RingOverTheFileSizeLimitIsNotCreated) {
  rlimit previous{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &previous), 0);
  rlimit low = previous;
  low.rlim_cur = 1 << 20;  // the ring below needs 4 lanes x 32768 x 128 bytes
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &low), 0);
  std::unique_ptr<RingWriter> writer = RingWriter::Create(ConfigWith(1u << 15));
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &previous), 0);
  EXPECT_EQ(writer, nullptr);
  EXPECT_TRUE(std::filesystem::is_empty(Rings()));
}

}  // namespace
}  // namespace collwatch
