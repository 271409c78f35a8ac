// Ring writer + reader, the records: round trip, lanes, calls returning in place,
// concurrent writers, wrap-around, torn records, racing readers, and a ring read after
// its writer was SIGKILLed. Files and folders: ring_file_test.cc.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <algorithm>
#include <set>
#include <optional>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "interposer/ring_test_support.h"
#include "interposer/ring_writer.h"
#include "ring/ring_reader.h"

namespace collwatch {
namespace {


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
  ASSERT_NO_FATAL_FAILURE(EditLane(path, 256, kLane, [](ring::LaneHeader* lane) { lane->write_index.fetch_add(1); }));
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

// Garbage over records (a stray write, a damaged file): slots whose commit word no write of
// the lane could leave are counted as damaged, not as records overwritten by a later lap
// (which is the ring's design and only a note), and reading goes on past them, live too.
TEST_F(RingTest, GarbageSlotsAreDamagedNotOverwritten) {
  std::unique_ptr<RingWriter> writer = RingWriter::Create(ConfigWith(256));
  ASSERT_NE(writer, nullptr);
  for (uint64_t i = 0; i < 50; ++i) writer->Append(kLane, PatternRecord(i));
  const std::string path = OnlyRing();
  ASSERT_NO_FATAL_FAILURE(EditLane(path, 256, kLane, [](ring::LaneHeader* lane) {
    char* slots = reinterpret_cast<char*>(lane) + ring::kLaneHeaderBytes;
    // Slots 10-29: random-looking bytes; slot 30: the commit word of another slot's write;
    // slot 31: its own position a lap ahead of anything reserved; slot 32: its own commit
    // word over a payload of no kind a writer writes.
    uint64_t noise = 0x9e3779b97f4a7c15ull;
    for (size_t byte = 10 * ring::kRecordBytes; byte < 30 * ring::kRecordBytes; ++byte) {
      noise = noise * 6364136223846793005ull + 1442695040888963407ull;
      slots[byte] = static_cast<char>(noise >> 56);
    }
    ring::CommitWord(reinterpret_cast<ring::Record*>(slots) + 30).store(7 + 1);
    ring::CommitWord(reinterpret_cast<ring::Record*>(slots) + 31).store(31 + 256 + 1);
    reinterpret_cast<ring::Record*>(slots)[32].kind = 0x7777;
  }));
  auto reader = RingReader::Open(path);
  ASSERT_TRUE(reader.ok());
  for (const bool writer_gone : {false, true}) {
    LaneCursor cursor;
    const ReadBatch batch = ReadLaneFrom(**reader, kLane, &cursor, writer_gone);
    EXPECT_EQ(batch.damaged, 23u) << writer_gone;
    EXPECT_EQ(batch.lost, 0u) << writer_gone;
    EXPECT_EQ(batch.torn, 0u) << writer_gone;
    EXPECT_EQ(batch.records.size(), 27u) << writer_gone;
    EXPECT_EQ(cursor.next, 50u) << writer_gone;
  }
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
  std::optional<uint64_t> torn_at;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (!torn_at && std::chrono::steady_clock::now() < deadline) {
    ReadBatch batch;
    (*reader)->ReadLane(RingWriter::kSharedLane, &cursor, 32, false, &batch);
    for (const IndexedRecord& item : batch.records) {
      if (!MatchesPattern(item.record)) torn_at = item.index;
    }
    valid += batch.records.size();
    lost += batch.lost;
  }
  stop = true;
  for (auto& thread : writers) thread.join();
  EXPECT_FALSE(torn_at) << "torn record accepted at " << *torn_at;
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
  auto reader = RingReader::Open(OnlyRing());
  ASSERT_TRUE(reader.ok()) << reader.status();
  // Killed only once it is seen writing past its first 5,000 (a loaded machine, or a
  // sanitizer, can leave the child unscheduled for a fixed sleep's whole length).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((*reader)->write_index(kLane) <= 5000 && std::chrono::steady_clock::now() < give_up) usleep(1000);
  usleep(5000);
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));

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

}  // namespace
}  // namespace collwatch
