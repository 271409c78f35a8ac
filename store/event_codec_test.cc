// The ring <-> wire conversion: what the agent sends always decodes at the collector;
// every field of every record kind, a ring's identity, a writer's status and a look at a
// process survive the trip to the wire and back (or land where they should), and what a
// batch or a stored trace says becomes the ProcessUpdate the model applies.
// Threading: single-threaded.
#include "store/event_codec.h"

#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "interposer/regions.h"
#include "interposer/ring_writer.h"
#include "store/trace_store.h"

namespace collwatch::event_codec_test {
namespace {

using namespace std::string_literals;

constexpr int64_t kNow = 1'700'000'000'000'000'000;

// A record of `kind` with a distinct value in every field (`base` varies them between
// records), so that a field copied into another one's place shows. `commit` is the
// ring's business: it stays 0.
ring::Record EveryFieldSet(ring::RecordKind kind, uint64_t base) {
  ring::Record record{};
  record.kind = static_cast<uint16_t>(kind);
  record.fn = static_cast<uint16_t>(ring::ApiFn::kReduceScatter);
  record.dtype = 9;
  record.flags = ring::kFlagCaptured | ring::kFlagUnknownComm;
  record.ref_lane = 3;
  record.redop = 4;
  record.root_or_peer = -1;
  record.comm_id = 0x3f2a9c0100000000ull + base;
  record.rank = 5;
  record.nranks = 8;
  record.seq = base + 11;
  record.count = base + 12;
  record.stream = 0x7f00'0000'0000ull + base;
  record.group_id = base + 13;
  record.t_ns = base + 14;
  record.ref_index = base + 15;
  record.region_id = 16;
  record.tid = 17;
  record.result = 6;
  record.call_path_id = 21;
  record.aux0 = base + 18;
  record.aux1 = base + 19;
  record.aux2 = base + 20;
  return record;
}

// The same with every field at the far end of its range.
ring::Record EveryFieldAtItsLimit(ring::RecordKind kind) {
  ring::Record record{};
  record.kind = static_cast<uint16_t>(kind);
  record.fn = std::numeric_limits<uint16_t>::max();
  record.dtype = ring::kNoDtype;
  record.flags = std::numeric_limits<uint8_t>::max();
  record.ref_lane = std::numeric_limits<uint16_t>::max();
  record.redop = std::numeric_limits<int32_t>::min();
  record.root_or_peer = std::numeric_limits<int32_t>::max();
  record.comm_id = std::numeric_limits<uint64_t>::max();
  record.rank = std::numeric_limits<int32_t>::min();
  record.nranks = std::numeric_limits<int32_t>::max();
  record.seq = std::numeric_limits<uint64_t>::max();
  record.count = std::numeric_limits<uint64_t>::max();
  record.stream = std::numeric_limits<uint64_t>::max();
  record.group_id = std::numeric_limits<uint64_t>::max();
  record.t_ns = std::numeric_limits<uint64_t>::max();
  record.ref_index = std::numeric_limits<uint64_t>::max();
  record.region_id = std::numeric_limits<uint32_t>::max();
  record.tid = std::numeric_limits<uint32_t>::max();
  record.result = std::numeric_limits<int32_t>::min();
  record.aux0 = std::numeric_limits<uint64_t>::max();
  record.aux1 = std::numeric_limits<uint64_t>::max() - 1;
  record.aux2 = std::numeric_limits<uint64_t>::max() - 2;
  return record;
}

void ExpectSameRecord(const ring::Record& back, const ring::Record& sent) {
  EXPECT_EQ(back.commit, 0u) << "the commit word is the ring's, never sent";
  EXPECT_EQ(back.kind, sent.kind);
  EXPECT_EQ(back.fn, sent.fn);
  EXPECT_EQ(back.dtype, sent.dtype);
  EXPECT_EQ(back.flags, sent.flags);
  EXPECT_EQ(back.ref_lane, sent.ref_lane);
  EXPECT_EQ(back.redop, sent.redop);
  EXPECT_EQ(back.root_or_peer, sent.root_or_peer);
  EXPECT_EQ(back.comm_id, sent.comm_id);
  EXPECT_EQ(back.rank, sent.rank);
  EXPECT_EQ(back.nranks, sent.nranks);
  EXPECT_EQ(back.seq, sent.seq);
  EXPECT_EQ(back.count, sent.count);
  EXPECT_EQ(back.stream, sent.stream);
  EXPECT_EQ(back.group_id, sent.group_id);
  EXPECT_EQ(back.t_ns, sent.t_ns);
  EXPECT_EQ(back.ref_index, sent.ref_index);  // return_ns of an enter returned in place
  EXPECT_EQ(back.region_id, sent.region_id);
  EXPECT_EQ(back.tid, sent.tid);
  EXPECT_EQ(back.result, sent.result);
  EXPECT_EQ(back.call_path_id, sent.call_path_id);
  EXPECT_EQ(back.aux0, sent.aux0);
  EXPECT_EQ(back.aux1, sent.aux1);
  EXPECT_EQ(back.aux2, sent.aux2);
  // Nothing the field list above misses: the bytes after the commit word are equal.
  EXPECT_EQ(std::memcmp(reinterpret_cast<const char*>(&back) + sizeof back.commit,
                        reinterpret_cast<const char*>(&sent) + sizeof sent.commit, sizeof back - sizeof back.commit),
            0);
}

// Record -> event -> bytes on the wire -> event -> record, as the agent sends it and the
// collector stores and reads it back.
ring::Record ThroughTheWire(const IndexedRecord& item, v1::Event* received) {
  v1::Event sent;
  EventFromRecord(item, &sent);
  EXPECT_TRUE(received->ParseFromString(sent.SerializeAsString()));
  return RecordFromEvent(*received);
}

TEST(EventCodecTest, EveryFieldOfEveryRecordKindSurvivesTheRoundTrip) {
  const ring::RecordKind kinds[] = {ring::RecordKind::kEnter, ring::RecordKind::kReturn, ring::RecordKind::kComplete,
                                    ring::RecordKind::kAsyncError};
  uint64_t base = 100;
  for (const ring::RecordKind kind : kinds) {
    for (const ring::Record& record : {EveryFieldSet(kind, base += 100), EveryFieldAtItsLimit(kind)}) {
      SCOPED_TRACE(::testing::Message() << "kind " << record.kind << ", seq " << record.seq);
      const IndexedRecord item{/*lane=*/2, /*index=*/base + 7, record};
      v1::Event event;
      ExpectSameRecord(ThroughTheWire(item, &event), record);
      EXPECT_EQ(event.lane(), item.lane);
      EXPECT_EQ(event.index(), item.index);
      EXPECT_EQ(static_cast<uint16_t>(event.kind()), record.kind);
      EXPECT_EQ(LanePosition(event), LanePosition(item.lane, item.index, record)) << "one position either side";
    }
  }
}

// An enter whose return was written in place carries the return time in the ref_index
// word, and sits at the even position of its index; its return half at the odd one.
TEST(EventCodecTest, AnEnterReturnedInPlaceKeepsItsReturnTimeAndPosition) {
  ring::Record enter = EveryFieldSet(ring::RecordKind::kEnter, 0);
  enter.flags = ring::kFlagReturnsInPlace;
  enter.return_ns = enter.t_ns + 2'500;
  ring::Record back_half = enter;
  back_half.kind = static_cast<uint16_t>(ring::RecordKind::kReturn);
  back_half.flags = ring::kFlagCompletesAtReturn;
  back_half.ref_lane = 1;
  back_half.ref_index = 40;
  for (const ring::Record& record : {enter, back_half}) {
    const IndexedRecord item{/*lane=*/1, /*index=*/40, record};
    v1::Event event;
    const ring::Record back = ThroughTheWire(item, &event);
    ExpectSameRecord(back, record);
    EXPECT_EQ(LanePosition(event), LanePosition(item.lane, item.index, record));
  }
  EXPECT_EQ(LanePosition(1, 40, enter), 80u);
  EXPECT_EQ(LanePosition(1, 40, back_half), 81u);
  v1::Event event;
  EXPECT_EQ(ThroughTheWire({1, 40, enter}, &event).return_ns, enter.t_ns + 2'500);
}

// What the agent says of a ring's process, and what the analyzer's model makes of it.
TEST(RankIdentityWireTest, EveryFieldOfTheRingLandsInTheIdentityAndTheModel) {
  RingIdentity ring;
  ring.path = "/dev/shm/collwatch/job1/rank3.ring";
  ring.host = "node7";
  ring.job = "job1";
  ring.pid = 4242;
  ring.rank = 3;
  ring.local_rank = 1;
  ring.world_size = 16;
  ring.lane_count = 4;
  ring.lane_capacity = 1u << 15;
  ring.start_realtime_ns = static_cast<uint64_t>(kNow);
  ring.start_monotonic_ns = 5'000'000'000;
  v1::RankIdentity identity;
  ASSERT_TRUE(identity.ParseFromString(RankIdentityFromRing(ring).SerializeAsString()));
  EXPECT_EQ(identity.job(), ring.job);
  EXPECT_EQ(identity.host(), ring.host);
  EXPECT_EQ(identity.pid(), ring.pid);
  EXPECT_EQ(identity.rank(), ring.rank);
  EXPECT_EQ(identity.local_rank(), ring.local_rank);
  EXPECT_EQ(identity.world_size(), ring.world_size);
  EXPECT_EQ(identity.ring_path(), ring.path);
  EXPECT_EQ(identity.ring_capacity(), ring.lane_capacity);
  EXPECT_EQ(identity.start_realtime_ns(), ring.start_realtime_ns);
  EXPECT_EQ(identity.start_monotonic_ns(), ring.start_monotonic_ns);
  EXPECT_EQ(identity.lane_count(), ring.lane_count);

  const ProcessInfo info = ProcessInfoFromIdentity(identity);
  EXPECT_EQ(info.host, ring.host);
  EXPECT_EQ(info.pid, ring.pid);
  EXPECT_EQ(info.global_rank, ring.rank);
  EXPECT_EQ(info.world_size, ring.world_size);
  EXPECT_EQ(info.realtime_offset_ns, kNow - 5'000'000'000);
}

TEST(RankIdentityWireTest, UnsetRanksStayUnsetAndNamesBecomeUtf8) {
  RingIdentity ring;
  ring.host = "node\xff";
  ring.job = "job\xfe";
  ring.path = "/dev/shm/\xc0.ring";
  const v1::RankIdentity identity = RankIdentityFromRing(ring);
  EXPECT_EQ(identity.rank(), ring::kUnset);
  EXPECT_EQ(identity.local_rank(), ring::kUnset);
  EXPECT_EQ(identity.world_size(), ring::kUnset);
  EXPECT_EQ(identity.host(), "node\xef\xbf\xbd");
  EXPECT_EQ(identity.job(), "job\xef\xbf\xbd");
  EXPECT_EQ(identity.ring_path(), "/dev/shm/\xef\xbf\xbd.ring");
  const ProcessInfo info = ProcessInfoFromIdentity(identity);
  EXPECT_EQ(info.global_rank, ring::kUnset);
  EXPECT_EQ(info.world_size, ring::kUnset);
}

TEST(WriterStatusWireTest, EachStatusLandsInItsProcessStatus) {
  EXPECT_EQ(ProcessStatusFromWire(v1::WRITER_STATUS_RUNNING), ProcessStatus::kRunning);
  EXPECT_EQ(ProcessStatusFromWire(v1::WRITER_STATUS_EXITED), ProcessStatus::kExited);
  EXPECT_EQ(ProcessStatusFromWire(v1::WRITER_STATUS_DISABLED), ProcessStatus::kDisabled);
  EXPECT_EQ(ProcessStatusFromWire(v1::WRITER_STATUS_DEAD), ProcessStatus::kDead);
  EXPECT_EQ(ProcessStatusFromWire(v1::WRITER_STATUS_SILENT), ProcessStatus::kSilent);
  // Not known yet, or from a newer agent: running until said otherwise.
  EXPECT_EQ(ProcessStatusFromWire(v1::WRITER_STATUS_UNSPECIFIED), ProcessStatus::kRunning);
  EXPECT_EQ(ProcessStatusFromWire(static_cast<v1::WriterStatus>(99)), ProcessStatus::kRunning);
}

// Every status the model knows crosses the wire as itself; only DEAD and SILENT (no
// look at the process to say more) are lost without exiting (process_info.h's rule).
TEST(WriterStatusWireTest, EveryStatusSurvivesTheRoundTrip) {
  const std::pair<ProcessStatus, v1::WriterStatus> statuses[] = {
      {ProcessStatus::kRunning, v1::WRITER_STATUS_RUNNING}, {ProcessStatus::kExited, v1::WRITER_STATUS_EXITED},
      {ProcessStatus::kDisabled, v1::WRITER_STATUS_DISABLED}, {ProcessStatus::kDead, v1::WRITER_STATUS_DEAD},
      {ProcessStatus::kSilent, v1::WRITER_STATUS_SILENT},
  };
  for (const auto& [status, wire] : statuses) {
    EXPECT_EQ(ProcessStatusToWire(status), wire) << ProcessStatusName(status);
    EXPECT_EQ(ProcessStatusFromWire(ProcessStatusToWire(status)), status) << ProcessStatusName(status);
  }
  EXPECT_TRUE(WireStatusLostWithoutExit(v1::WRITER_STATUS_DEAD));
  EXPECT_TRUE(WireStatusLostWithoutExit(v1::WRITER_STATUS_SILENT));
  EXPECT_FALSE(WireStatusLostWithoutExit(v1::WRITER_STATUS_EXITED));
  EXPECT_FALSE(WireStatusLostWithoutExit(v1::WRITER_STATUS_RUNNING));
  EXPECT_FALSE(WireStatusLostWithoutExit(v1::WRITER_STATUS_DISABLED));
  EXPECT_FALSE(WireStatusLostWithoutExit(v1::WRITER_STATUS_UNSPECIFIED));
}

// Three records of one lane as an agent sends them, with everything else a batch says.
v1::StreamEventsRequest FullBatch(const std::vector<IndexedRecord>& records) {
  v1::StreamEventsRequest batch;
  for (const IndexedRecord& item : records) EventFromRecord(item, batch.add_events());
  v1::RegionName* region = batch.add_regions();
  region->set_id(16);
  region->set_name("bwd/trunk.expert1");
  batch.set_lost(1);
  batch.set_torn(2);
  batch.set_dropped(4);
  batch.set_heartbeat_ns(5'000'000'123);
  batch.set_writer_status(v1::WRITER_STATUS_EXITED);
  ProcessSample sample;
  sample.state = ProcessState::kZombie;
  sample.sampled_ns = kNow;
  *batch.mutable_process() = ProcessSampleToWire(sample);
  batch.set_exit_recorded(true);
  batch.set_exit_code(3);
  return batch;
}

std::vector<IndexedRecord> ThreeRecords() {
  return {{2, 10, EveryFieldSet(ring::RecordKind::kEnter, 100)},
          {2, 11, EveryFieldSet(ring::RecordKind::kReturn, 200)},
          {2, 12, EveryFieldSet(ring::RecordKind::kComplete, 300)}};
}

// A batch as the collector's online analysis takes it: only the events the store took
// as new (the others were resends), every other thing the batch says as it said it.
TEST(ProcessUpdateTest, FromABatchTakesTheStoredEventsAndEverythingElse) {
  const std::vector<IndexedRecord> records = ThreeRecords();
  const ProcessUpdate update = ProcessUpdateFromBatch(FullBatch(records), /*stored_events=*/{0, 2});
  ASSERT_EQ(update.records.size(), 2u);
  for (const auto& [got, sent] : {std::pair{update.records[0], records[0]}, std::pair{update.records[1], records[2]}}) {
    EXPECT_EQ(got.lane, sent.lane);
    EXPECT_EQ(got.index, sent.index);
    ExpectSameRecord(got.record, sent.record);
  }
  EXPECT_EQ(update.regions, (std::vector<std::pair<uint32_t, std::string>>{{16, "bwd/trunk.expert1"}}));
  EXPECT_EQ(update.status, std::optional<ProcessStatus>(ProcessStatus::kExited));
  EXPECT_EQ(update.heartbeat_ns, 5'000'000'123u);
  EXPECT_EQ(update.lost_records, 7u) << "lost, torn and dropped together";
  EXPECT_EQ(update.sample.state, ProcessState::kZombie);
  EXPECT_EQ(update.sample.sampled_ns, kNow);
  EXPECT_EQ(update.exit_code, std::optional<int32_t>(3));

  EXPECT_TRUE(ProcessUpdateFromBatch(FullBatch(records), {}).records.empty()) << "a batch of resends only";
}

// A batch that says nothing of its writer's status, its process or an exit leaves them
// unsaid: nothing the model has from earlier batches is overwritten.
TEST(ProcessUpdateTest, WhatABatchDoesNotSayStaysUnsaid) {
  v1::StreamEventsRequest batch;
  EventFromRecord({0, 0, EveryFieldSet(ring::RecordKind::kEnter, 0)}, batch.add_events());
  const ProcessUpdate update = ProcessUpdateFromBatch(batch, {0});
  EXPECT_EQ(update.records.size(), 1u);
  EXPECT_EQ(update.status, std::nullopt);
  EXPECT_EQ(update.sample.sampled_ns, 0) << "no look";
  EXPECT_EQ(update.exit_code, std::nullopt);
  EXPECT_EQ(update.lost_records, 0u);
  EXPECT_TRUE(update.regions.empty());
}

// Ring records -> events -> the trace store's log -> read back -> records: a stored
// trace says what the batches said, each record once however often it was sent.
TEST(ProcessUpdateTest, RecordsSurviveTheTripThroughTheTraceStore) {
  char pattern[] = "/tmp/collwatch-codec-test-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string dir = std::string(pattern) + "/rank";
  const std::vector<IndexedRecord> records = ThreeRecords();
  const v1::StreamEventsRequest batch = FullBatch(records);
  v1::RankIdentity identity;
  identity.set_job("job1");
  identity.set_host("node0");
  identity.set_pid(4242);
  {
    absl::StatusOr<std::unique_ptr<RankTraceWriter>> writer = RankTraceWriter::Open(dir, identity);
    ASSERT_TRUE(writer.ok()) << writer.status();
    absl::StatusOr<AppendResult> first = (*writer)->Append(batch);
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ(first->stored_events, (std::vector<int>{0, 1, 2}));
    absl::StatusOr<AppendResult> resent = (*writer)->Append(batch);
    ASSERT_TRUE(resent.ok()) << resent.status();
    EXPECT_TRUE(resent->stored_events.empty());
    EXPECT_EQ(resent->duplicates, 3u);
  }
  absl::StatusOr<std::unique_ptr<RankTraceReader>> reader = RankTraceReader::Open(dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<std::vector<v1::Event>> events = (*reader)->ReadAll();
  ASSERT_TRUE(events.ok()) << events.status();
  absl::StatusOr<std::vector<IndexedRecord>> stored = (*reader)->ReadAllRecords();
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->size(), events->size()) << "the same events either way";
  const ProcessUpdate update =
      ProcessUpdateFromStore(*std::move(stored), (*reader)->regions(), (*reader)->call_paths(), (*reader)->status());
  ASSERT_EQ(update.records.size(), records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(update.records[i].lane, records[i].lane);
    EXPECT_EQ(update.records[i].index, records[i].index);
    ExpectSameRecord(update.records[i].record, records[i].record);
  }
  EXPECT_EQ(update.regions, (std::vector<std::pair<uint32_t, std::string>>{{16, "bwd/trunk.expert1"}}));
  EXPECT_EQ(update.status, std::optional<ProcessStatus>(ProcessStatus::kExited));
  EXPECT_EQ(update.heartbeat_ns, 5'000'000'123u);
  EXPECT_EQ(update.lost_records, 7u);
  EXPECT_EQ(update.sample.state, ProcessState::kZombie);
  EXPECT_EQ(update.sample.sampled_ns, kNow);
  EXPECT_EQ(update.exit_code, std::optional<int32_t>(3));
  std::filesystem::remove_all(pattern);
}

TEST(ProcessSampleWireTest, RoundTripAndBoundsOnWhatAnAgentClaims) {
  ProcessSample sample;
  sample.state = ProcessState::kDiskWait;
  sample.wait_channel = "io_schedule";
  sample.cpu_ns = 123'000'000;
  sample.cpu_advancing = true;
  sample.sampled_ns = kNow;
  const ProcessSample back = ProcessSampleFromWire(ProcessSampleToWire(sample));
  EXPECT_EQ(back.state, sample.state);
  EXPECT_EQ(back.wait_channel, sample.wait_channel);
  EXPECT_EQ(back.cpu_ns, sample.cpu_ns);
  EXPECT_EQ(back.cpu_advancing, sample.cpu_advancing);
  EXPECT_EQ(back.sampled_ns, sample.sampled_ns);

  v1::ProcessSample hostile;
  hostile.set_state(static_cast<v1::ProcessState>(99));
  hostile.set_wait_channel(std::string(1000, 'w'));
  hostile.set_sampled_ns(-5);
  const ProcessSample bounded = ProcessSampleFromWire(hostile);
  EXPECT_EQ(bounded.state, ProcessState::kUnknown);
  EXPECT_EQ(bounded.wait_channel.size(), 64u);
  EXPECT_EQ(bounded.sampled_ns, 0);
}

// Every state the kernel can show crosses the wire as itself (the enums' values agree).
TEST(ProcessSampleWireTest, EveryStateCrossesAsTheProtoStateOfTheSameName) {
  const std::pair<ProcessState, v1::ProcessState> states[] = {
      {ProcessState::kUnknown, v1::PROCESS_STATE_UNKNOWN},     {ProcessState::kRunning, v1::PROCESS_STATE_RUNNING},
      {ProcessState::kSleeping, v1::PROCESS_STATE_SLEEPING},   {ProcessState::kDiskWait, v1::PROCESS_STATE_DISK_WAIT},
      {ProcessState::kStopped, v1::PROCESS_STATE_STOPPED},     {ProcessState::kZombie, v1::PROCESS_STATE_ZOMBIE},
      {ProcessState::kGone, v1::PROCESS_STATE_GONE},
  };
  for (const auto& [state, wire_state] : states) {
    ProcessSample sample;
    sample.state = state;
    const v1::ProcessSample wire = ProcessSampleToWire(sample);
    EXPECT_EQ(wire.state(), wire_state) << ProcessStateName(state);
    EXPECT_EQ(ProcessSampleFromWire(wire).state, state) << ProcessStateName(state);
  }
}

// A wait channel that is not UTF-8 crosses as valid UTF-8; one that is stays as it was.
TEST(ProcessSampleWireTest, WaitChannelsAreSentAsUtf8) {
  ProcessSample sample;
  sample.wait_channel = "futex_wait_queue";
  EXPECT_EQ(ProcessSampleFromWire(ProcessSampleToWire(sample)).wait_channel, "futex_wait_queue");
  sample.wait_channel = "do_\xffpoll";
  EXPECT_EQ(ProcessSampleToWire(sample).wait_channel(), "do_\xef\xbf\xbdpoll");
}

// An NVTX name as the agent sends it: read from the ring its writer interned it in, valid
// UTF-8 whatever bytes it held, and as a batch's region in what the collector applies.
TEST(RegionNameWireTest, ARingsRegionNamesCrossAsUtf8) {
  char pattern[] = "/tmp/collwatch-codec-region-test-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  Config config;
  config.ring_records = 64;
  std::snprintf(config.ring_dir, sizeof config.ring_dir, "%s", pattern);
  std::snprintf(config.job, sizeof config.job, "job1");
  std::unique_ptr<RingWriter> writer = RingWriter::Create(config);
  ASSERT_NE(writer, nullptr);
  MirrorRegionsInto(writer->strings(), writer->string_capacity());
  const std::string plain = "fwd/vision.patch", damaged = "bwd/\xff" "expert";
  const uint32_t plain_id = InternRegion(plain.data(), plain.size());
  const uint32_t damaged_id = InternRegion(damaged.data(), damaged.size());
  ASSERT_NE(plain_id, 0u);
  ASSERT_NE(damaged_id, 0u);
  {
    absl::StatusOr<std::unique_ptr<RingReader>> reader = RingReader::Open(writer->path());
    ASSERT_TRUE(reader.ok()) << reader.status();
    v1::StreamEventsRequest batch;
    *batch.add_regions() = RegionNameFromRing(**reader, plain_id);
    *batch.add_regions() = RegionNameFromRing(**reader, damaged_id);
    const v1::RegionName unknown = RegionNameFromRing(**reader, damaged_id + 7);
    EXPECT_EQ(unknown.id(), damaged_id + 7);
    EXPECT_EQ(unknown.name(), "") << "not written yet";
    v1::StreamEventsRequest received;
    ASSERT_TRUE(received.ParseFromString(batch.SerializeAsString()));
    EXPECT_EQ(ProcessUpdateFromBatch(received, {}).regions,
              (std::vector<std::pair<uint32_t, std::string>>{{plain_id, plain},
                                                             {damaged_id, "bwd/\xef\xbf\xbd" "expert"}}));
  }
  MirrorRegionsInto(nullptr, 0);  // the ring is unmapped next
  writer.reset();
  std::filesystem::remove_all(pattern);
}

// The ring fuzzer's first find: an NVTX name (or job id) that is not UTF-8 made the
// agent send a batch the collector could not parse, every time it reconnected.
TEST(WireTextTest, AnyBytesBecomeAStringTheCollectorParses) {
  const std::string names[] = {
      "fwd/\xff\xfe"s,
      "cut mid-sequence \xe2\x82"s,  // a truncated euro sign
      "overlong \xc0\xaf and surrogate \xed\xa0\x80"s,
      "above U+10FFFF \xf4\x90\x80\x80"s,
      "\0 inside"s,
  };
  for (const std::string& name : names) {
    v1::StreamEventsRequest batch;
    v1::RegionName* region = batch.add_regions();
    region->set_id(1);
    region->set_name(WireText(name));
    v1::StreamEventsRequest received;
    EXPECT_TRUE(received.ParseFromString(batch.SerializeAsString())) << name;
  }
}

TEST(WireTextTest, KeepsValidUtf8AndReplacesEachBadByte) {
  EXPECT_EQ(WireText("fwd/vision.block0"), "fwd/vision.block0");
  EXPECT_EQ(WireText("\xe2\x82\xac \xf0\x9f\x98\x80 \xc3\xa9"), "\xe2\x82\xac \xf0\x9f\x98\x80 \xc3\xa9");
  EXPECT_EQ(WireText("a\xff" "b"), "a\xef\xbf\xbd" "b");
  EXPECT_EQ(WireText("\xe2\x82"), "\xef\xbf\xbd\xef\xbf\xbd");
}

}  // namespace
}  // namespace collwatch::event_codec_test
