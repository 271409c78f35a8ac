// The dump-text reader: a ring written here, dumped by `collwatch dump`'s own code and read
// back, gives the records the ring reader gives; damaged text is an error naming its line.
#include "tests/support/ring_dump_text.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "cli/dump_command.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "interposer/regions.h"
#include "interposer/ring_writer.h"
#include "ring/ring_reader.h"

namespace collwatch::testing::ring_dump_text_test {
namespace {

using ::testing::HasSubstr;
using ring::ApiFn;
using ring::Record;
using ring::RecordKind;

// What the dump carries of a record (t_ns as an offset from the ring's start), one line.
std::string Carried(uint32_t lane, uint64_t index, const Record& r, uint64_t t_offset_ns, const std::string& region) {
  return absl::StrFormat(
      "%d:%d +%dns kind=%d fn=%d comm=%x rank=%d/%d seq=%d count=%d dtype=%d redop=%d peer=%d group=%d "
      "region='%s' result=%d flags=%#x ref=%d:%d",
      lane, index, t_offset_ns, r.kind, r.fn, r.comm_id, r.rank, r.nranks, r.seq, r.count, r.dtype, r.redop,
      r.root_or_peer, r.group_id, region, r.result, r.flags, r.ref_lane, r.ref_index);
}

class RingDumpTextRoundTrip : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/collwatch-dump-text-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    Config config;
    config.ring_records = 64;
    std::snprintf(config.ring_dir, sizeof config.ring_dir, "%s", dir_.c_str());
    std::snprintf(config.job, sizeof config.job, "roundtrip");
    writer_ = RingWriter::Create(config);
    ASSERT_NE(writer_, nullptr);
    auto reader = RingReader::Open(writer_->path());
    ASSERT_TRUE(reader.ok()) << reader.status();
    start_ns_ = (*reader)->identity().start_monotonic_ns;
  }
  void TearDown() override {
    MirrorRegionsInto(nullptr, 0);  // the ring is unmapped next
    writer_.reset();
    std::filesystem::remove_all(dir_);
  }

  Record At(RecordKind kind, ApiFn fn, uint64_t t_us) const {
    Record record{};
    record.kind = static_cast<uint16_t>(kind);
    record.fn = static_cast<uint16_t>(fn);
    record.dtype = ring::kNoDtype;
    record.redop = ring::kUnset;
    record.root_or_peer = ring::kUnset;
    record.rank = ring::kUnset;
    record.nranks = ring::kUnset;
    record.t_ns = start_ns_ + t_us * 1000;
    return record;
  }

  std::string dir_;
  std::unique_ptr<RingWriter> writer_;
  uint64_t start_ns_ = 0;
};

TEST_F(RingDumpTextRoundTrip, ReadsBackWhatTheRingReaderGives) {
  // Names go to the ring mirrored last: this one, before any is interned.
  MirrorRegionsInto(writer_->strings(), writer_->string_capacity());
  const std::string vision = "fwd/vision.patch";
  const uint32_t region = InternRegion(vision.data(), vision.size());
  ASSERT_NE(region, 0u);
  const uint32_t owned = writer_->ClaimLane(static_cast<uint32_t>(gettid()));
  ASSERT_NE(owned, RingWriter::kSharedLane);

  // A query on the shared lane, with a separate return.
  writer_->Append(RingWriter::kSharedLane, At(RecordKind::kEnter, ApiFn::kGetUniqueId, 10));
  Record returned = At(RecordKind::kReturn, ApiFn::kGetUniqueId, 20);
  writer_->Append(RingWriter::kSharedLane, returned);
  // A GPU all-gather in a region, returned in place within a tick, then completed.
  Record gather = At(RecordKind::kEnter, ApiFn::kAllGather, 30);
  gather.comm_id = 0x08536bcc54b5a54a;
  gather.rank = 0;
  gather.nranks = 2;
  gather.seq = 1;
  gather.count = 263168;
  gather.dtype = 7;  // float32
  gather.region_id = region;
  gather.flags = ring::kFlagReturnsInPlace | ring::kFlagCaptured;
  const uint64_t gather_index = writer_->Append(owned, gather);
  writer_->ReturnInPlace(owned, gather_index, gather.t_ns, 0, gather.flags | ring::kFlagReturnedWithinTick);
  Record complete = At(RecordKind::kComplete, ApiFn::kAllGather, 50);
  complete.comm_id = gather.comm_id;
  complete.seq = 1;
  complete.ref_lane = static_cast<uint16_t>(owned);
  complete.ref_index = gather_index;
  writer_->Append(RingWriter::kSharedLane, complete);
  // An all-reduce with a pre-multiplied sum in a group, failing, with a separate return.
  Record reduce = At(RecordKind::kEnter, ApiFn::kAllReduce, 60);
  reduce.comm_id = gather.comm_id;
  reduce.rank = 1;
  reduce.nranks = 2;
  reduce.seq = 2;
  reduce.count = 12;
  reduce.dtype = 9;  // bfloat16
  reduce.redop = 7;
  reduce.group_id = 3;
  const uint64_t reduce_index = writer_->Append(owned, reduce);
  Record reduce_return = reduce;
  reduce_return.kind = static_cast<uint16_t>(RecordKind::kReturn);
  reduce_return.t_ns = start_ns_ + 70'000;
  reduce_return.result = 3;
  reduce_return.flags = ring::kFlagCompletesAtReturn;
  reduce_return.ref_lane = static_cast<uint16_t>(owned);
  reduce_return.ref_index = reduce_index;
  writer_->Append(owned, reduce_return);
  // A send to peer 1, entered in place and never returned (the writer is gone).
  Record send = At(RecordKind::kEnter, ApiFn::kSend, 80);
  send.comm_id = gather.comm_id;
  send.rank = 0;
  send.nranks = 2;
  send.seq = 1;
  send.count = 8;
  send.dtype = 0;  // int8
  send.root_or_peer = 1;
  send.flags = ring::kFlagReturnsInPlace;
  writer_->Append(owned, send);
  writer_->RecordExitCode(3);
  writer_->SetState(ring::WriterState::kExited);

  std::ostringstream text, errors;
  ASSERT_TRUE(DumpTraces(writer_->path(), /*job=*/"", DumpFormat::kText, text, errors).ok()) << errors.str();
  absl::StatusOr<DumpedJob> job = ParseRingDumpText(text.str(), DumpRegions::kKeep);
  ASSERT_TRUE(job.ok()) << job.status() << "\n" << text.str();
  ASSERT_EQ(job->rings.size(), 1u);
  const DumpedRing& dumped = job->rings[0];

  auto reader = RingReader::Open(writer_->path());
  ASSERT_TRUE(reader.ok()) << reader.status();
  const RingIdentity& identity = (*reader)->identity();
  EXPECT_EQ(dumped.path, writer_->path());
  EXPECT_EQ(dumped.info.host, identity.host);
  EXPECT_EQ(dumped.info.pid, identity.pid);
  EXPECT_EQ(dumped.info.global_rank, identity.rank);
  EXPECT_EQ(dumped.info.world_size, identity.world_size);
  EXPECT_EQ(dumped.job, identity.job);
  EXPECT_EQ(dumped.local_rank, identity.local_rank);
  EXPECT_EQ(dumped.lanes, identity.lane_count);
  EXPECT_EQ(dumped.status, ProcessStatus::kExited);
  EXPECT_EQ(dumped.exit_code, std::optional<int32_t>(3));
  EXPECT_EQ(dumped.lost_records, 0u);

  const ReadBatch batch = (*reader)->ReadAll(/*writer_gone=*/true);
  std::vector<std::string> expected, read_back;
  for (const IndexedRecord& item : batch.records) {
    expected.push_back(Carried(item.lane, item.index, item.record, item.record.t_ns - start_ns_,
                               (*reader)->Name(item.record.region_id)));
  }
  for (const DumpedRecord& item : dumped.records) {
    const auto name = dumped.region_names.find(item.record.region_id);
    read_back.push_back(Carried(item.lane, item.index, item.record, item.record.t_ns - kDumpMonotonicOriginNs,
                                name == dumped.region_names.end() ? std::string() : name->second));
  }
  EXPECT_EQ(read_back, expected) << text.str();
  EXPECT_EQ(expected.size(), 8u);
}

TEST_F(RingDumpTextRoundTrip, DropsEveryRegionOnRequest) {
  MirrorRegionsInto(writer_->strings(), writer_->string_capacity());
  const std::string embed = "fwd/embed";
  Record gather = At(RecordKind::kEnter, ApiFn::kAllGather, 5);
  gather.region_id = InternRegion(embed.data(), embed.size());
  writer_->Append(RingWriter::kSharedLane, gather);
  std::ostringstream text, errors;
  ASSERT_TRUE(DumpTraces(writer_->path(), /*job=*/"", DumpFormat::kText, text, errors).ok());

  absl::StatusOr<DumpedJob> kept = ParseRingDumpText(text.str(), DumpRegions::kKeep);
  absl::StatusOr<DumpedJob> dropped = ParseRingDumpText(text.str(), DumpRegions::kDrop);
  ASSERT_TRUE(kept.ok() && dropped.ok());
  ASSERT_EQ(kept->rings[0].records.size(), 1u);
  EXPECT_NE(kept->rings[0].records[0].record.region_id, 0u);
  EXPECT_EQ(kept->rings[0].region_names.at(kept->rings[0].records[0].record.region_id), embed);
  EXPECT_EQ(dropped->rings[0].records[0].record.region_id, 0u);
  EXPECT_TRUE(dropped->rings[0].region_names.empty());
}

// Two ranks' rings as `collwatch dump` printed them on the GPU machine (abridged).
constexpr std::string_view kTwoRings =
    "ring /tmp/rings/local.vm.1762.ring\n"
    "  host=vm job=local pid=1762 rank=0 local_rank=0 world_size=2 state=running (writer gone)\n"
    "  records=3 lost=0 torn=1 dropped=2 lanes=4 x 32768 records\n"
    "  lane:index         t_ms kind     fn                      comm                rank    seq      count dtype      op        peer group region                       result/flags\n"
    "         1:2      208.783 enter    comm-init-rank          08536bcc54b5a54a     0/2      0          0 none       none         -     0                              r=0\n"
    "         1:4     6367.965 enter    all-gather              08536bcc54b5a54a     0/2      1     263168 float32    none         -     0 fwd/vision.patch             r=0 \n"
    "         1:4     6505.123 return   all-gather              08536bcc54b5a54a     0/2      1     263168 float32    none         -     0 fwd/vision.patch             r=0 ref=1:4 \n"
    "ring /tmp/rings/local.vm.1763.ring\n"
    "  host=vm job=local pid=1763 rank=1 ranks=1 local_rank=1 world_size=2 state=exited exit_code=1\n"
    "  records=1 lost=0 torn=0 dropped=0 lanes=4 x 32768 records\n"
    "  lane:index         t_ms kind     fn                      comm                rank    seq      count dtype      op        peer group region                       result/flags\n"
    "         2:0     6504.000 complete reduce-scatter          08536bcc54b5a54a       -      3          0 none       none         -     0                              r=0 ref=1:7 returned_within_tick\n";

TEST(RingDumpText, ReadsTheGpuMachinesDump) {
  absl::StatusOr<DumpedJob> job = ParseRingDumpText(kTwoRings, DumpRegions::kKeep);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->rings.size(), 2u);
  const DumpedRing& first = job->rings[0];
  EXPECT_EQ(first.path, "/tmp/rings/local.vm.1762.ring");
  EXPECT_EQ(first.info.host, "vm");
  EXPECT_EQ(first.info.pid, 1762);
  EXPECT_EQ(first.info.global_rank, 0);
  EXPECT_EQ(first.info.world_size, 2);
  EXPECT_EQ(first.job, "local");
  EXPECT_EQ(first.local_rank, 0);
  EXPECT_EQ(first.lanes, 4u);
  EXPECT_EQ(job->rings[1].local_rank, 1);
  EXPECT_EQ(first.status, ProcessStatus::kDead);  // running, writer gone: as `analyze` reads it
  EXPECT_EQ(first.lost_records, 3u);
  ASSERT_EQ(first.records.size(), 3u);
  const Record& gather = first.records[1].record;
  EXPECT_EQ(gather.fn, static_cast<uint16_t>(ApiFn::kAllGather));
  EXPECT_EQ(gather.comm_id, 0x08536bcc54b5a54aull);
  EXPECT_EQ(gather.count, 263168u);
  EXPECT_EQ(gather.dtype, 7);
  EXPECT_EQ(gather.flags, ring::kFlagReturnsInPlace);
  EXPECT_EQ(gather.t_ns, kDumpMonotonicOriginNs + 6'367'965'000);
  EXPECT_EQ(first.region_names.at(gather.region_id), "fwd/vision.patch");
  EXPECT_EQ(first.records[0].record.flags, 0);  // no flags field at all
  EXPECT_EQ(first.records[2].record.kind, static_cast<uint16_t>(RecordKind::kReturn));
  EXPECT_EQ(first.records[2].record.flags, ring::kFlagReturnsInPlace);
  EXPECT_EQ(first.records[2].line, 7);
  const DumpedRing& second = job->rings[1];
  EXPECT_EQ(second.status, ProcessStatus::kExited);
  EXPECT_EQ(second.exit_code, std::optional<int32_t>(1));
  EXPECT_FALSE(first.exit_code.has_value());  // a dump from before ranks= and exit_code= were printed
  ASSERT_EQ(second.records.size(), 1u);
  const Record& complete = second.records[0].record;
  EXPECT_EQ(complete.rank, ring::kUnset);
  EXPECT_EQ(complete.nranks, ring::kUnset);
  EXPECT_EQ(complete.redop, ring::kUnset);
  EXPECT_EQ(complete.dtype, ring::kNoDtype);
  EXPECT_EQ(complete.ref_lane, 1);
  EXPECT_EQ(complete.ref_index, 7u);
  EXPECT_EQ(complete.flags, ring::kFlagReturnedWithinTick);
  EXPECT_EQ(FirstRecordNs(*job), RecordRealtimeNs(first, first.records[0]));
  EXPECT_EQ(LastRecordNs(*job), RecordRealtimeNs(first, first.records[2]));
  EXPECT_EQ(RecordRealtimeNs(first, first.records[0]), kDumpRealtimeOriginNs + 208'783'000);
}

TEST(RingDumpText, FeedsTheModelAsOfATimeThenWhole) {
  absl::StatusOr<DumpedJob> job = ParseRingDumpText(kTwoRings, DumpRegions::kKeep);
  ASSERT_TRUE(job.ok()) << job.status();
  analyzer::JobModel model;
  DumpedJobFeeder feeder(*job, &model);
  ASSERT_EQ(model.process_count(), 2u);
  feeder.FeedUntil(kDumpRealtimeOriginNs + 6'400'000'000);
  ASSERT_EQ(model.process(0).calls.size(), 2u);
  EXPECT_FALSE(model.process(0).calls[1].returned());
  EXPECT_EQ(model.process(0).status, ProcessStatus::kRunning);
  feeder.FeedRest();
  EXPECT_TRUE(model.process(0).calls[1].returned());
  EXPECT_EQ(model.RegionName(model.process(0).calls[1].region), "fwd/vision.patch");
  EXPECT_EQ(model.process(0).status, ProcessStatus::kDead);
  EXPECT_EQ(model.process(1).status, ProcessStatus::kExited);
}

TEST(RingDumpText, DamageIsAnErrorNamingItsLine) {
  const std::string good(kTwoRings);
  const std::string gather_line =
      "         1:4     6367.965 enter    all-gather              08536bcc54b5a54a     0/2      1     263168 float32    none         -     0 fwd/vision.patch             r=0 ";
  const std::string return_line =
      "         1:4     6505.123 return   all-gather              08536bcc54b5a54a     0/2      1     263168 float32    none         -     0 fwd/vision.patch             r=0 ref=1:4 ";
  ASSERT_NE(good.find(gather_line), std::string::npos);
  ASSERT_NE(good.find(return_line), std::string::npos);
  auto replaced = [&](const std::string& from, const std::string& to) {
    return absl::StrReplaceAll(good, {{from, to}});
  };
  struct Damage {
    std::string text;
    std::string error;
  };
  const std::vector<Damage> damages = {
      {replaced("263168 float32    none         -     0 fwd/vision.patch             r=0 \n",
                "26316x float32    none         -     0 fwd/vision.patch             r=0 \n"),
       "line 6: count"},
      {replaced("enter    all-gather  ", "enter    all-gathr   "), "line 6: unknown fn 'all-gathr'"},
      {replaced("float32   ", "float31   "), "line 6: unknown dtype 'float31'"},
      {replaced(gather_line, gather_line.substr(0, 60)), "line 6:"},
      {replaced(gather_line, gather_line.substr(1)), "line 6:"},
      {replaced("6367.965", "63a7.965"), "line 6: t_ms"},
      {replaced("    6367.965", "1e19.000000"), "line 6: t_ms"},
      {replaced(" 0/2      1 ", " 0+2      1 "), "line 6: rank"},
      {replaced("08536bcc54b5a54a     0/2      1     263168 float32    none         -     0 fwd/vision.patch             r=0 \n",
                "08536bcc54b5a5zz     0/2      1     263168 float32    none         -     0 fwd/vision.patch             r=0 \n"),
       "line 6: comm"},
      {replaced("r=0 ref=1:4 ", "r=0 "), "line 7: expected ref="},
      {replaced("r=0 ref=1:4 ", "r=0 ref=1:4 returned_by_magic"), "line 7: unknown flag 'returned_by_magic'"},
      {replaced("r=0 ref=1:4 ", "r=0 ref=1:5 "), "line 7: position 1:4 appears twice"},
      {replaced(return_line, absl::StrReplaceAll(return_line, {{"1:4 ", "1:9 "}})),
       "line 7: a return in place without its enter"},
      {replaced("         1:4     6367.965", "         9:4     6367.965"), "line 6: lane 9"},
      {replaced("records=3 lost=0", "records=4 lost=0"), "line 1: the ring announces 4 records; 3 follow"},
      {replaced("state=exited", "state=asleep"), "line 9: unknown writer state 'asleep'"},
      {replaced("exit_code=1", "exit_code=one"), "line 9: exit_code must be an integer"},
      {replaced("exit_code=1", "exit_code=1 spare=2"), "line 9: expected pid="},
      {replaced("  host=vm job=local pid=1762", "  host=vm job=local pid=17x2"), "line 2:"},
      {replaced("lanes=4 x 32768 records\n  lane:index", "lanes=4 x 32768 records\n  lane:idx"),
       "line 4: expected the column names line"},
      {good.substr(good.find("  host=")), "line 1: expected a 'ring PATH' line"},
      {good.substr(0, good.find("  lane:index")), "line 1: the ring's header is cut short"},
      {"", "no 'ring' line"},
  };
  for (const Damage& damage : damages) {
    SCOPED_TRACE(damage.text);
    ASSERT_NE(damage.text, good);
    absl::StatusOr<DumpedJob> job = ParseRingDumpText(damage.text, DumpRegions::kKeep);
    ASSERT_FALSE(job.ok());
    EXPECT_THAT(std::string(job.status().message()), HasSubstr(damage.error));
  }
}

TEST(RingDumpText, AMissingFileIsNotFound) {
  absl::StatusOr<DumpedJob> job = ReadRingDumpText("/nonexistent/rings.txt", DumpRegions::kKeep);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace collwatch::testing::ring_dump_text_test
