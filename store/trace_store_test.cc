// Unit tests of the trace store: append, reopen, dedup, torn tail, damage, index seek.
#include "store/trace_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "store/crc32c.h"
#include "store/event_codec.h"
#include "store/trace_frames.h"
#include "store/trace_store_format.h"

namespace collwatch::trace_store_test {
namespace {

class TraceStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/collwatch-store-XXXXXX";
    root_ = mkdtemp(pattern);
    dir_ = root_ + "/rank";
    identity_.set_job("job1");
    identity_.set_host("host");
    identity_.set_pid(42);
    identity_.set_rank(3);
    identity_.set_start_realtime_ns(1000);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // Events `first`..`last` (indices) of `lane`, collectives of comm 7 with seq = index.
  static v1::StreamEventsRequest Batch(uint32_t lane, uint64_t first, uint64_t last) {
    v1::StreamEventsRequest batch;
    for (uint64_t index = first; index <= last; ++index) {
      v1::Event* event = batch.add_events();
      event->set_lane(lane);
      event->set_index(index);
      event->set_kind(v1::EVENT_KIND_ENTER);
      event->set_fn(1);
      event->set_comm_id(7);
      event->set_seq(index);
      event->set_t_ns(index * 10);
    }
    batch.set_writer_status(v1::WRITER_STATUS_RUNNING);
    return batch;
  }

  std::string LogPath() const { return dir_ + "/" + store::kLogFileName; }
  uint64_t LogSize() const { return std::filesystem::file_size(LogPath()); }

  std::string root_;
  std::string dir_;
  v1::RankIdentity identity_;
};

TEST(Crc32cTest, KnownValue) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
  // Continuation equals one pass.
  EXPECT_EQ(Crc32c("6789", 4, Crc32c("12345", 5)), 0xE3069283u);
}

TEST_F(TraceStoreTest, AppendReopenAndRead) {
  {
    auto writer = RankTraceWriter::Open(dir_, identity_);
    ASSERT_TRUE(writer.ok()) << writer.status();
    v1::StreamEventsRequest batch = Batch(1, 0, 9);
    v1::RegionName* region = batch.add_regions();
    region->set_id(1);
    region->set_name("forward");
    auto result = (*writer)->Append(batch);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->stored, 10u);
    EXPECT_EQ(result->duplicates, 0u);
  }
  auto writer = RankTraceWriter::Open(dir_, identity_);
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ((*writer)->events_stored(), 10u);
  ASSERT_EQ((*writer)->Resume().size(), 1u);
  EXPECT_EQ((*writer)->Resume()[0].next_position(), 2u * 9 + 2);
  ASSERT_TRUE((*writer)->Append(Batch(1, 10, 11)).ok());

  auto reader = RankTraceReader::Open(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->identity().pid(), 42);
  EXPECT_EQ((*reader)->regions().at(1), "forward");
  EXPECT_EQ((*reader)->status().writer_status(), v1::WRITER_STATUS_RUNNING);
  auto events = (*reader)->ReadAll();
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 12u);
  for (uint64_t i = 0; i < events->size(); ++i) EXPECT_EQ((*events)[i].index(), i);
}

// Looks at the process go to the store when what they saw changes, else once a second;
// the exit status with the status that says the process exited.
TEST_F(TraceStoreTest, ProcessSamplesAreStoredWhenTheyChangeAndOnceASecond) {
  auto writer = RankTraceWriter::Open(dir_, identity_);
  ASSERT_TRUE(writer.ok()) << writer.status();
  constexpr int64_t kSecond = 1'000'000'000;
  auto append_sample = [&](v1::ProcessState state, int64_t at_ns) {
    v1::StreamEventsRequest batch;
    batch.set_writer_status(v1::WRITER_STATUS_RUNNING);
    batch.mutable_process()->set_state(state);
    batch.mutable_process()->set_sampled_ns(at_ns);
    const uint64_t before = LogSize();
    EXPECT_TRUE((*writer)->Append(batch).ok());
    return LogSize() > before;
  };
  EXPECT_TRUE(append_sample(v1::PROCESS_STATE_SLEEPING, kSecond));
  EXPECT_FALSE(append_sample(v1::PROCESS_STATE_SLEEPING, kSecond + kSecond / 4)) << "nothing new yet";
  EXPECT_TRUE(append_sample(v1::PROCESS_STATE_STOPPED, kSecond + kSecond / 2)) << "a change is stored at once";
  EXPECT_FALSE(append_sample(v1::PROCESS_STATE_STOPPED, 2 * kSecond));
  EXPECT_TRUE(append_sample(v1::PROCESS_STATE_STOPPED, 2 * kSecond + kSecond / 2)) << "a second later";
  v1::StreamEventsRequest other_host;  // no look at the process: the stored one stays
  other_host.set_writer_status(v1::WRITER_STATUS_RUNNING);
  ASSERT_TRUE((*writer)->Append(other_host).ok());
  auto reader = RankTraceReader::Open(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->status().process().state(), v1::PROCESS_STATE_STOPPED);
  EXPECT_EQ((*reader)->status().process().sampled_ns(), 2 * kSecond + kSecond / 2);

  v1::StreamEventsRequest exited;
  exited.set_writer_status(v1::WRITER_STATUS_EXITED);
  exited.mutable_process()->set_state(v1::PROCESS_STATE_GONE);
  exited.mutable_process()->set_sampled_ns(3 * kSecond);
  exited.set_exit_recorded(true);
  exited.set_exit_code(3);
  ASSERT_TRUE((*writer)->Append(exited).ok());
  reader = RankTraceReader::Open(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->status().writer_status(), v1::WRITER_STATUS_EXITED);
  EXPECT_TRUE((*reader)->status().exit_recorded());
  EXPECT_EQ((*reader)->status().exit_code(), 3);
  EXPECT_EQ((*reader)->status().process().state(), v1::PROCESS_STATE_GONE);
}

TEST_F(TraceStoreTest, ResentEventsAreStoredOnce) {
  auto writer = RankTraceWriter::Open(dir_, identity_);
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Append(Batch(0, 0, 4)).ok());
  // A resend overlapping what is stored, and another lane.
  v1::StreamEventsRequest resend = Batch(0, 2, 7);
  resend.MergeFrom(Batch(2, 0, 1));
  auto result = (*writer)->Append(resend);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->stored, 3u + 2u);
  EXPECT_EQ(result->duplicates, 3u);
  writer->reset();
  // And after a restart: dedup state comes back from the index.
  writer = RankTraceWriter::Open(dir_, identity_);
  ASSERT_TRUE(writer.ok());
  result = (*writer)->Append(Batch(0, 0, 8));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->stored, 1u);
  EXPECT_EQ(result->duplicates, 8u);
  auto events = (*RankTraceReader::Open(dir_))->ReadAll();
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->size(), 9u + 2u);
}

TEST_F(TraceStoreTest, InPlaceEnterAndReturnHalvesAreDistinctRecords) {
  auto writer = RankTraceWriter::Open(dir_, identity_);
  ASSERT_TRUE(writer.ok());
  v1::StreamEventsRequest enter = Batch(1, 5, 5);
  enter.mutable_events(0)->set_flags(ring::kFlagReturnsInPlace);
  ASSERT_EQ((*writer)->Append(enter)->stored, 1u);
  EXPECT_EQ((*writer)->Resume()[0].next_position(), 11u);  // enter half of 5 stored
  v1::StreamEventsRequest both = enter;
  v1::Event* ret = both.add_events();
  *ret = enter.events(0);
  ret->set_kind(v1::EVENT_KIND_RETURN);
  ret->set_ref_index(5);
  ret->set_ref_lane(1);
  auto result = (*writer)->Append(both);
  EXPECT_EQ(result->stored, 1u);
  EXPECT_EQ(result->duplicates, 1u);
  LaneCursor cursor = CursorAt((*writer)->Resume()[0].next_position());
  EXPECT_EQ(cursor.next, 6u);
  EXPECT_FALSE(cursor.enter_emitted);
  EXPECT_TRUE(CursorAt(11).enter_emitted);
}

TEST_F(TraceStoreTest, TornTailIsCutOnOpen) {
  uint64_t good_size = 0;
  {
    auto writer = RankTraceWriter::Open(dir_, identity_);
    ASSERT_TRUE((*writer)->Append(Batch(0, 0, 9)).ok());
    good_size = LogSize();
    ASSERT_TRUE((*writer)->Append(Batch(0, 10, 19)).ok());
  }
  // A crash in the middle of the second frame's write.
  std::filesystem::resize_file(LogPath(), good_size + 30);
  auto reader = RankTraceReader::Open(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->torn_tail_bytes(), 30u);
  EXPECT_EQ((*reader)->ReadAll()->size(), 10u);
  EXPECT_EQ(LogSize(), good_size + 30) << "readers never change the file";

  auto writer = RankTraceWriter::Open(dir_, identity_);
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ((*writer)->torn_bytes_cut(), 30u);
  EXPECT_EQ(LogSize(), good_size);
  // The resend of the torn batch is stored, not taken for a duplicate.
  EXPECT_EQ((*writer)->Append(Batch(0, 10, 19))->stored, 10u);
  EXPECT_EQ((*RankTraceReader::Open(dir_))->ReadAll()->size(), 20u);
}

TEST_F(TraceStoreTest, ZeroFilledTailIsCut) {
  uint64_t good_size = 0;
  {
    auto writer = RankTraceWriter::Open(dir_, identity_);
    ASSERT_TRUE((*writer)->Append(Batch(0, 0, 3)).ok());
    good_size = LogSize();
  }
  std::filesystem::resize_file(LogPath(), good_size + 4096);  // zeros, as after a crash
  auto writer = RankTraceWriter::Open(dir_, identity_);
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ(LogSize(), good_size);
}

// Damage inside the log is told apart from a torn tail: readers skip it, count it and read
// on from the next good frame; the writer appends to no damaged file and leaves it as it is.
TEST_F(TraceStoreTest, DamageInsideTheLogIsSkippedByReadersAndRefusedByTheWriter) {
  uint64_t first_frame_end = 0;
  {
    auto writer = RankTraceWriter::Open(dir_, identity_);
    ASSERT_TRUE((*writer)->Append(Batch(0, 0, 9)).ok());
    first_frame_end = LogSize();
    ASSERT_TRUE((*writer)->Append(Batch(0, 10, 19)).ok());
  }
  const uint64_t size = LogSize();
  {
    // Flip a payload byte of the first append's last frame (not the last of the file).
    std::fstream file(LogPath(), std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(first_frame_end - 5));
    file.put('\x5a');
  }
  auto reader = RankTraceReader::Open(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_GT((*reader)->damaged_bytes(), 0u);
  EXPECT_EQ((*reader)->damaged_regions(), 1u);
  EXPECT_EQ((*reader)->torn_tail_bytes(), 0u);
  // The flipped byte is in the first append's last frame, its status: both batches' events
  // are read around it.
  EXPECT_EQ((*reader)->ReadAll()->size(), 20u);
  auto writer = RankTraceWriter::Open(dir_, identity_);
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(writer.status().message().find("damaged bytes from offset"), std::string::npos) << writer.status();
  EXPECT_EQ(LogSize(), size);
}

// A log several times the reader's window, damaged past its first window: the reader
// holds one window and one frame, never the file, and reads frame by frame what ReadAll
// reads, around the damage.
TEST_F(TraceStoreTest, ALogLargerThanTheReadersWindowIsReadInPlaceFrameByFrame) {
  constexpr uint64_t kBatches = 60;
  constexpr uint64_t kPerBatch = 2000;  // about 40 KB a frame: 2.4 MB in all
  uint64_t damaged_frame_end = 0;
  {
    auto writer = RankTraceWriter::Open(dir_, identity_);
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (uint64_t b = 0; b < kBatches; ++b) {
      ASSERT_TRUE((*writer)->Append(Batch(0, b * kPerBatch, (b + 1) * kPerBatch - 1)).ok());
      if (b == kBatches / 2) damaged_frame_end = LogSize();
    }
  }
  ASSERT_GT(LogSize(), 2 * store::FramedFileReader::kWindowBytes);
  ASSERT_GT(damaged_frame_end, store::FramedFileReader::kWindowBytes);
  {
    // One byte of the events frame that ends there, past the first window.
    std::fstream file(LogPath(), std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(damaged_frame_end - 100));
    file.put('\x5a');
  }
  auto reader = RankTraceReader::Open(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->damaged_regions(), 1u);
  absl::StatusOr<std::vector<v1::Event>> all = (*reader)->ReadAll();
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), (kBatches - 1) * kPerBatch);  // the damaged frame's batch is lost
  std::vector<uint64_t> indexes;
  size_t frames = 0;
  const absl::Status read = (*reader)->ForEachEventsFrame([&](std::vector<v1::Event>& events) {
    ++frames;
    EXPECT_EQ(events.size(), kPerBatch);
    for (const v1::Event& event : events) indexes.push_back(event.index());
    return absl::OkStatus();
  });
  ASSERT_TRUE(read.ok()) << read;
  EXPECT_EQ(frames, kBatches - 1);
  ASSERT_EQ(indexes.size(), all->size());
  for (size_t i = 0; i < indexes.size(); ++i) ASSERT_EQ(indexes[i], (*all)[i].index()) << i;
  // A callback's error ends the reading there.
  size_t calls = 0;
  const absl::Status stopped = (*reader)->ForEachEventsFrame([&](std::vector<v1::Event>&) {
    ++calls;
    return absl::CancelledError("enough");
  });
  EXPECT_EQ(stopped.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, 1u);
}

// A middle frame's length field overwritten: read as a torn tail before, it dropped
// every frame after it. Now only that frame is lost.
TEST_F(TraceStoreTest, AnOverwrittenLengthFieldLosesOneFrameNotTheRest) {
  std::vector<uint64_t> frame_ends;
  {
    auto writer = RankTraceWriter::Open(dir_, identity_);
    for (int batch = 0; batch < 6; ++batch) {
      ASSERT_TRUE((*writer)->Append(Batch(0, batch * 10, batch * 10 + 9)).ok());
      frame_ends.push_back(LogSize());
    }
  }
  {
    // The second events frame's length: far past the end of the file.
    std::fstream file(LogPath(), std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(frame_ends[0]));
    file.write("\xff\xff\xff\x0f", 4);
  }
  auto reader = RankTraceReader::Open(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->ReadAll()->size(), 50u) << "five of the six batches";
  EXPECT_EQ((*reader)->damaged_regions(), 1u);
  EXPECT_GT((*reader)->damaged_bytes(), 0u);
  EXPECT_LE((*reader)->damaged_bytes(), frame_ends[1] - frame_ends[0]);
  EXPECT_EQ((*reader)->torn_tail_bytes(), 0u);
}

TEST_F(TraceStoreTest, WrongMagicIsRejected) {
  std::filesystem::create_directories(dir_);
  std::ofstream(LogPath()) << "this is not a trace file at all";
  auto reader = RankTraceReader::Open(dir_);
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TraceStoreTest, AnotherProcessTraceIsNotAppendedTo) {
  ASSERT_TRUE(RankTraceWriter::Open(dir_, identity_).ok());
  v1::RankIdentity other = identity_;
  other.set_pid(43);
  auto writer = RankTraceWriter::Open(dir_, other);
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(TraceStoreTest, IndexSeeksByCommunicatorAndSequence) {
  {
    auto writer = RankTraceWriter::Open(dir_, identity_);
    for (uint64_t first = 0; first < 100; first += 10) ASSERT_TRUE((*writer)->Append(Batch(0, first, first + 9)).ok());
  }
  auto reader = RankTraceReader::Open(dir_);
  ASSERT_TRUE(reader.ok());
  auto events = (*reader)->ReadComm(7, 95);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 5u);
  EXPECT_EQ((*events)[0].seq(), 95u);
  EXPECT_EQ((*reader)->frames_decoded(), 1u) << "only the frame holding seq 90..99 is decoded";
  EXPECT_TRUE((*reader)->ReadComm(8, 0)->empty());

  // Without its index file, the index is rebuilt from the log.
  std::filesystem::remove(dir_ + "/" + store::kIndexFileName);
  reader = RankTraceReader::Open(dir_);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->ReadComm(7, 50)->size(), 50u);
  auto writer = RankTraceWriter::Open(dir_, identity_);
  ASSERT_TRUE(writer.ok());
  EXPECT_EQ((*writer)->events_stored(), 100u);
  EXPECT_TRUE(std::filesystem::file_size(dir_ + "/" + store::kIndexFileName) > store::kFileHeaderBytes);
}

}  // namespace
}  // namespace collwatch::trace_store_test
