// A ring read post-mortem as a ProcessUpdate (ProcessUpdateFromRing, ProcessInfoOfRing), on
// rings written by the interposer's own writer in this process: the records as the ring
// reader gives them, each region used named once, the writer's status by the one liveness
// rule, what was lost, the exit status. Threading: single-threaded.
#include "process/process_update.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "interposer/regions.h"
#include "interposer/ring_writer.h"
#include "ring/ring_reader.h"

namespace collwatch::process_update_test {
namespace {

using ring::ApiFn;
using ring::Record;
using ring::RecordKind;

constexpr uint64_t kSecondNs = 1'000'000'000;

class ProcessUpdateFromRingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/collwatch-process-update-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    Config config;
    config.ring_records = 64;
    std::snprintf(config.ring_dir, sizeof config.ring_dir, "%s", dir_.c_str());
    std::snprintf(config.job, sizeof config.job, "job1");
    ASSERT_EQ(setenv("RANK", "5", 1), 0);
    ASSERT_EQ(setenv("WORLD_SIZE", "8", 1), 0);
    writer_ = RingWriter::Create(config);
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    ASSERT_NE(writer_, nullptr);
    MirrorRegionsInto(writer_->strings(), writer_->string_capacity());
  }
  void TearDown() override {
    MirrorRegionsInto(nullptr, 0);  // the ring is unmapped next
    writer_.reset();
    std::filesystem::remove_all(dir_);
  }

  // An all-reduce of this rank's communicator: its enter and return (complete at return).
  void AllReduce(uint64_t seq, uint32_t region_id, uint64_t t_ns) {
    Record enter{};
    enter.kind = static_cast<uint16_t>(RecordKind::kEnter);
    enter.fn = static_cast<uint16_t>(ApiFn::kAllReduce);
    enter.comm_id = 0x3f2a9c0100000001ull;
    enter.rank = 5;
    enter.nranks = 8;
    enter.seq = seq;
    enter.count = 1024;
    enter.dtype = 7;
    enter.region_id = region_id;
    enter.t_ns = t_ns;
    const uint64_t index = writer_->Append(RingWriter::kSharedLane, enter);
    Record back = enter;
    back.kind = static_cast<uint16_t>(RecordKind::kReturn);
    back.ref_lane = 0;
    back.ref_index = index;
    back.t_ns = t_ns + 1000;
    back.flags = ring::kFlagCompletesAtReturn;
    writer_->Append(RingWriter::kSharedLane, back);
  }

  std::unique_ptr<RingReader> Reader() {
    absl::StatusOr<std::unique_ptr<RingReader>> reader = RingReader::Open(writer_->path());
    EXPECT_TRUE(reader.ok()) << reader.status();
    return reader.ok() ? *std::move(reader) : nullptr;
  }

  std::string dir_;
  std::unique_ptr<RingWriter> writer_;
};

TEST_F(ProcessUpdateFromRingTest, ARunningRingSaysItsRecordsRegionsAndLosses) {
  const std::string forward = "fwd/trunk.block0", backward = "bwd/trunk.block0";
  const uint32_t fwd = InternRegion(forward.data(), forward.size());
  const uint32_t bwd = InternRegion(backward.data(), backward.size());
  ASSERT_NE(fwd, 0u);
  ASSERT_NE(bwd, 0u);
  AllReduce(1, fwd, 1000);
  AllReduce(2, fwd, 5000);
  AllReduce(3, bwd, 9000);
  AllReduce(4, /*region_id=*/0, 13000);
  writer_->CountDropped();
  writer_->Heartbeat(50 * kSecondNs);

  const std::unique_ptr<RingReader> reader = Reader();
  ASSERT_NE(reader, nullptr);
  const ReadBatch expected = reader->ReadAll(/*writer_gone=*/false);
  ASSERT_EQ(expected.records.size(), 8u);
  const ProcessUpdate update = ProcessUpdateFromRing(*reader, reader->ReadAll(false), 50 * kSecondNs);
  ASSERT_EQ(update.records.size(), expected.records.size());
  for (size_t i = 0; i < expected.records.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(update.records[i].lane, expected.records[i].lane);
    EXPECT_EQ(update.records[i].index, expected.records[i].index);
    EXPECT_EQ(update.records[i].record.seq, expected.records[i].record.seq);
    EXPECT_EQ(update.records[i].record.kind, expected.records[i].record.kind);
    EXPECT_EQ(update.records[i].record.t_ns, expected.records[i].record.t_ns);
    EXPECT_EQ(update.records[i].record.region_id, expected.records[i].record.region_id);
  }
  EXPECT_EQ(update.regions, (std::vector<std::pair<uint32_t, std::string>>{{fwd, forward}, {bwd, backward}}))
      << "each region its records use, once, in order of first use; region 0 is none";
  EXPECT_EQ(update.status, std::optional<ProcessStatus>(ProcessStatus::kRunning));
  EXPECT_EQ(update.heartbeat_ns, 50 * kSecondNs);
  EXPECT_EQ(update.lost_records, 1u) << "one record the writer dropped";
  EXPECT_EQ(update.exit_code, std::nullopt);
  EXPECT_EQ(update.sample.sampled_ns, 0) << "a ring holds no look at its process";
}

// The status is StatusOfRing's: a live writer whose beat is old is silent.
TEST_F(ProcessUpdateFromRingTest, ALiveWriterWithAnOldBeatIsSilent) {
  AllReduce(1, 0, 1000);
  writer_->Heartbeat(50 * kSecondNs);
  const std::unique_ptr<RingReader> reader = Reader();
  ASSERT_NE(reader, nullptr);
  const uint64_t later = 50 * kSecondNs + static_cast<uint64_t>(kSilentAfterS * 1e9) + 1;
  EXPECT_EQ(ProcessUpdateFromRing(*reader, reader->ReadAll(false), later).status,
            std::optional<ProcessStatus>(ProcessStatus::kSilent));
}

TEST_F(ProcessUpdateFromRingTest, AnExitedRingSaysSoAndItsStatus) {
  AllReduce(1, 0, 1000);
  writer_->RecordExitCode(3);
  writer_->SetState(ring::WriterState::kExited);
  const std::unique_ptr<RingReader> reader = Reader();
  ASSERT_NE(reader, nullptr);
  const ProcessUpdate update = ProcessUpdateFromRing(*reader, reader->ReadAll(true), 0);
  EXPECT_EQ(update.records.size(), 2u);
  EXPECT_TRUE(update.regions.empty());
  EXPECT_EQ(update.status, std::optional<ProcessStatus>(ProcessStatus::kExited));
  EXPECT_EQ(update.exit_code, std::optional<int32_t>(3));
}

TEST_F(ProcessUpdateFromRingTest, TheRingsHeaderNamesItsProcess) {
  const std::unique_ptr<RingReader> reader = Reader();
  ASSERT_NE(reader, nullptr);
  const RingIdentity& identity = reader->identity();
  const ProcessInfo info = ProcessInfoOfRing(identity);
  EXPECT_EQ(info.host, identity.host);
  EXPECT_FALSE(info.host.empty());
  EXPECT_EQ(info.pid, getpid());
  EXPECT_EQ(info.global_rank, 5);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.realtime_offset_ns, RealtimeOffsetNs(identity.start_realtime_ns, identity.start_monotonic_ns));
}

}  // namespace
}  // namespace collwatch::process_update_test
