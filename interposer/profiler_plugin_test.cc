// The plugin alone (this test links no NCCL wrappers), driven event by event as NCCL
// drives it: a collective's return waits for the end of its group and says whether NCCL
// launched it; completion waits for every channel; a send is recorded with its peer; a
// collective captured into a CUDA graph is recorded at capture and at each replay. Older
// interface versions: v4 records a launch and completes it after its channels; v1..v3
// record launches without completion, with the communicator their descriptors name. The
// process has one ring: every test writes to one folder and reads the records of its own
// communicator.
#include "interposer/profiler_plugin.h"

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "ring/nccl_profiler_abi.h"
#include "ring/ring_reader.h"

namespace collwatch {
namespace {

namespace abi = nccl_profiler;
using ring::ApiFn;
using ring::RecordKind;

const abi::NcclProfilerV5& Plugin() { return ncclProfiler_v5; }

// The records of communicator `comm_id` (kComplete records name it too).
std::vector<IndexedRecord> ReadRing(const std::string& dir, uint64_t comm_id) {
  absl::StatusOr<std::vector<std::string>> paths = ListRingFiles(dir);
  EXPECT_TRUE(paths.ok() && paths->size() == 1u);
  if (!paths.ok() || paths->empty()) return {};
  absl::StatusOr<std::unique_ptr<RingReader>> reader = RingReader::Open(paths->front());
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return {};
  std::vector<IndexedRecord> records;
  for (IndexedRecord& item : (*reader)->ReadAll(/*writer_gone=*/false).records) {
    if (item.record.comm_id == comm_id) records.push_back(item);
  }
  return records;
}

// The sequence numbers of the sends recorded, each of which must go to `peer`.
std::vector<uint64_t> SendSeqsTo(const std::vector<IndexedRecord>& records, int peer) {
  std::vector<uint64_t> seqs;
  for (const IndexedRecord& item : records) {
    if (item.record.kind == static_cast<uint16_t>(RecordKind::kEnter) &&
        item.record.fn == static_cast<uint16_t>(ApiFn::kSend)) {
      EXPECT_EQ(item.record.root_or_peer, peer);
      seqs.push_back(item.record.seq);
    }
  }
  return seqs;
}

size_t Count(const std::vector<IndexedRecord>& records, RecordKind kind) {
  size_t n = 0;
  for (const IndexedRecord& item : records) n += item.record.kind == static_cast<uint16_t>(kind);
  return n;
}

// The process's ring folder, set before the first record and removed at exit.
class RingDir : public ::testing::Environment {
 public:
  void SetUp() override {
    char pattern[] = "/tmp/collwatch-plugin-test-XXXXXX";
    path_ = mkdtemp(pattern);
    setenv("COLLWATCH_RING_DIR", path_.c_str(), 1);
  }
  void TearDown() override {
    unsetenv("COLLWATCH_RING_DIR");
    std::filesystem::remove_all(path_);
  }
  static const std::string& path() { return path_; }

 private:
  static inline std::string path_;
};
const auto* const kRingDir = ::testing::AddGlobalTestEnvironment(new RingDir);

// Each test's communicator, so that it reads only its own records.
struct Dir {
  uint64_t comm_id;
  std::vector<IndexedRecord> Read() const { return collwatch::ReadRing(RingDir::path(), comm_id); }
};
std::vector<IndexedRecord> ReadRing(const Dir& dir) { return dir.Read(); }

TEST(ProfilerPluginAloneTest, EventsBecomeRecordsAsNcclReportsThem) {
  const Dir dir{0x1234};
  const abi::NcclProfilerV5& plugin = Plugin();
  int mask = 0;
  void* context = nullptr;
  ASSERT_EQ(plugin.init(&context, 0x1234, &mask, nullptr, 1, 4, 2, nullptr), 0);
  EXPECT_NE(mask & abi::kKernelCh, 0);
  EXPECT_NE(mask & abi::kCollApi, 0);

  // A collective NCCL never launches (a symmetric-memory kernel: an API event only).
  abi::EventDescr group{};
  group.type = abi::kGroupApi;
  void* group_handle = nullptr;
  plugin.start_event(context, &group_handle, &group);
  abi::EventDescr api{};
  api.type = abi::kCollApi;
  api.parent = group_handle;
  api.coll_api = {"AllReduce", 16, "ncclBfloat16", -1, nullptr, false};
  void* api_handle = nullptr;
  plugin.start_event(context, &api_handle, &api);
  ASSERT_NE(api_handle, nullptr);
  plugin.stop_event(api_handle);
  std::vector<IndexedRecord> records = ReadRing(dir);
  EXPECT_EQ(Count(records, RecordKind::kEnter), 1u);
  EXPECT_EQ(Count(records, RecordKind::kReturn), 0u) << "the return waits for the group's end";
  plugin.stop_event(group_handle);
  records = ReadRing(dir);
  ASSERT_EQ(Count(records, RecordKind::kReturn), 1u);
  for (const IndexedRecord& item : records) {
    if (item.record.kind == static_cast<uint16_t>(RecordKind::kEnter)) {
      EXPECT_EQ(item.record.fn, static_cast<uint16_t>(ApiFn::kAllReduce));
      EXPECT_EQ(item.record.seq, 1u);
      EXPECT_EQ(item.record.count, 16u);
      EXPECT_EQ(item.record.dtype, 9u);
      EXPECT_EQ(item.record.rank, 2);
      EXPECT_EQ(item.record.nranks, 4);
      EXPECT_EQ(item.record.comm_id, 0x1234u);
    }
    if (item.record.kind == static_cast<uint16_t>(RecordKind::kReturn)) {
      EXPECT_NE(item.record.flags & ring::kFlagNoCompletion, 0) << "nothing launched: no completion to wait for";
    }
  }

  // A launched collective on two channels: complete when both have stopped.
  plugin.start_event(context, &group_handle, &group);
  api.coll_api.func = "ReduceScatter";
  plugin.start_event(context, &api_handle, &api);
  plugin.stop_event(api_handle);
  abi::EventDescr coll{};
  coll.type = abi::kColl;
  coll.parent = api_handle;
  coll.coll.channels = 2;
  void* coll_handle = nullptr;
  plugin.start_event(context, &coll_handle, &coll);
  ASSERT_NE(coll_handle, nullptr);
  plugin.stop_event(coll_handle);
  plugin.stop_event(group_handle);
  abi::EventDescr channel{};
  channel.type = abi::kKernelCh;
  channel.parent = coll_handle;
  void* channels[2] = {nullptr, nullptr};
  for (void*& handle : channels) plugin.start_event(context, &handle, &channel);
  plugin.stop_event(channels[0]);
  EXPECT_EQ(Count(ReadRing(dir), RecordKind::kComplete), 0u);
  plugin.stop_event(channels[1]);
  records = ReadRing(dir);
  EXPECT_EQ(Count(records, RecordKind::kComplete), 1u);
  EXPECT_EQ(Count(records, RecordKind::kEnter), 2u);

  // A send: recorded when NCCL launches it and names the peer; per-peer numbering.
  for (int i = 0; i < 2; ++i) {
    abi::EventDescr p2p_api{};
    p2p_api.type = abi::kP2pApi;
    p2p_api.p2p_api = {"Send", 4, "ncclInt32", nullptr, false};
    plugin.start_event(context, &api_handle, &p2p_api);
    plugin.stop_event(api_handle);
    abi::EventDescr p2p{};
    p2p.type = abi::kP2p;
    p2p.parent = api_handle;
    p2p.p2p.peer = 3;
    p2p.p2p.channels = 0;  // nothing on a channel: complete at launch
    void* p2p_handle = nullptr;
    plugin.start_event(context, &p2p_handle, &p2p);
  }
  records = ReadRing(dir);
  EXPECT_EQ(SendSeqsTo(records, 3), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(Count(records, RecordKind::kComplete), 3u);

  EXPECT_EQ(plugin.finalize(context), 0);
}

// A collective captured into a CUDA graph: recorded once at capture, flagged captured and
// numbered among the host calls; each replay (NCCL's Coll event, from a host callback on
// another thread, its parent the capture's API handle) recorded again, flagged a replay,
// numbered among the communicator's replays, complete after its channels.
TEST(ProfilerPluginAloneTest, ACapturedCollectiveIsRecordedAtCaptureAndAtEveryReplay) {
  const Dir dir{0x6a6a};
  const abi::NcclProfilerV5& plugin = Plugin();
  int mask = 0;
  void* context = nullptr;
  ASSERT_EQ(plugin.init(&context, 0x6a6a, &mask, nullptr, 1, 2, 1, nullptr), 0);
  EXPECT_NE(mask & abi::kKernelCh, 0) << "what makes NCCL report replays";

  // A call as NCCL reports it: its API event inside the group of the user's call.
  const auto issue = [&](bool captured) {
    abi::EventDescr group{};
    group.type = abi::kGroupApi;
    group.group_api.graph_captured = captured;
    void* group_handle = nullptr;
    plugin.start_event(context, &group_handle, &group);
    abi::EventDescr api{};
    api.type = abi::kCollApi;
    api.parent = group_handle;
    api.coll_api = {"AllReduce", 32, "ncclFloat32", -1, nullptr, captured};
    void* handle = nullptr;
    plugin.start_event(context, &handle, &api);
    if (handle != nullptr) plugin.stop_event(handle);
    plugin.stop_event(group_handle);
    return handle;
  };
  void* captured = issue(true);
  ASSERT_NE(captured, nullptr) << "kept for the replays";
  void* before_replays = issue(false);
  ASSERT_NE(before_replays, nullptr);
  std::vector<IndexedRecord> records = ReadRing(dir);
  ASSERT_EQ(Count(records, RecordKind::kEnter), 2u);
  EXPECT_NE(records[0].record.flags & ring::kFlagCaptured, 0);
  EXPECT_EQ(records[0].record.seq, 1u) << "captured in host order";
  EXPECT_EQ(Count(records, RecordKind::kReturn), 2u);

  const auto replay = [&](int channels) {
    abi::EventDescr coll{};
    coll.type = abi::kColl;
    coll.parent = captured;
    coll.coll.func = "AllReduce";
    coll.coll.count = 32;
    coll.coll.datatype = "ncclFloat32";
    coll.coll.channels = channels;
    void* op = nullptr;
    plugin.start_event(context, &op, &coll);
    plugin.stop_event(op);
    std::vector<void*> ends(static_cast<size_t>(channels));
    abi::EventDescr channel{};
    channel.type = abi::kKernelCh;
    channel.parent = op;
    for (void*& end : ends) plugin.start_event(context, &end, &channel);
    return ends;
  };
  // Replays come from a thread of the CUDA driver's, not the capturing one.
  std::vector<void*> first;
  std::thread([&] { first = replay(2); }).join();
  records = ReadRing(dir);
  std::vector<ring::Record> replays;
  for (const IndexedRecord& item : records) {
    if (item.record.kind == static_cast<uint16_t>(RecordKind::kEnter) && (item.record.flags & ring::kFlagReplay)) {
      replays.push_back(item.record);
    }
  }
  ASSERT_EQ(replays.size(), 1u);
  EXPECT_EQ(replays[0].fn, static_cast<uint16_t>(ApiFn::kAllReduce));
  EXPECT_EQ(replays[0].seq, 1u) << "the first replay";
  EXPECT_EQ(replays[0].aux0, 1u) << "of the call captured as seq 1";
  EXPECT_EQ(replays[0].count, 32u);
  EXPECT_EQ(replays[0].dtype, 7u);
  EXPECT_EQ(replays[0].rank, 1);
  EXPECT_EQ(replays[0].nranks, 2);
  EXPECT_EQ(replays[0].flags & ring::kFlagCaptured, 0);
  EXPECT_EQ(Count(records, RecordKind::kComplete), 0u);
  for (void* end : first) plugin.stop_event(end);
  EXPECT_EQ(Count(ReadRing(dir), RecordKind::kComplete), 1u);

  std::thread([&] { replay(0); }).join();  // nothing on a channel: complete at once
  records = ReadRing(dir);
  EXPECT_EQ(Count(records, RecordKind::kComplete), 2u);
  uint64_t last_replay = 0;
  uint64_t last_host_seq = 0;
  for (const IndexedRecord& item : records) {
    if (item.record.kind != static_cast<uint16_t>(RecordKind::kEnter)) continue;
    ((item.record.flags & ring::kFlagReplay) ? last_replay : last_host_seq) = item.record.seq;
  }
  EXPECT_EQ(last_replay, 2u);
  EXPECT_EQ(last_host_seq, 2u) << "replays do not advance the host calls' numbering";
  EXPECT_EQ(plugin.finalize(context), 0);
}

// Version 4 (NCCL 2.27): no API events. A launch is the call: kEnter at its start, kReturn
// at its stop, kComplete once every channel it announced has stopped.
TEST(ProfilerPluginAloneTest, Version4RecordsALaunchAndCompletesItAfterItsChannels) {
  const Dir dir{0x4444};
  const abi::NcclProfilerV4& plugin = ncclProfiler_v4;
  int mask = 0;
  void* context = nullptr;
  ASSERT_EQ(plugin.init(&context, &mask, nullptr, 0x4444, 1, 4, 1, nullptr), 0);
  EXPECT_NE(mask & abi::kColl, 0);
  EXPECT_NE(mask & abi::kKernelCh, 0);

  abi::EventDescrV4 coll{};
  coll.type = abi::kColl;
  coll.rank = 1;
  coll.coll.func = "AllGather";
  coll.coll.count = 64;  // bytes, as NCCL gives all-gathers
  coll.coll.datatype = "ncclInt8";
  coll.coll.channels = 2;
  void* coll_handle = nullptr;
  plugin.start_event(context, &coll_handle, &coll);
  ASSERT_NE(coll_handle, nullptr);
  std::vector<IndexedRecord> records = ReadRing(dir);
  ASSERT_EQ(Count(records, RecordKind::kEnter), 1u);
  const ring::Record& enter = records.front().record;
  EXPECT_EQ(enter.fn, static_cast<uint16_t>(ApiFn::kAllGather));
  EXPECT_EQ(enter.seq, 1u);
  EXPECT_EQ(enter.count, 64u);
  EXPECT_EQ(enter.dtype, 0u);
  EXPECT_EQ(enter.rank, 1);
  EXPECT_EQ(enter.nranks, 4);
  EXPECT_EQ(Count(records, RecordKind::kReturn), 0u);
  plugin.stop_event(coll_handle);
  records = ReadRing(dir);
  ASSERT_EQ(Count(records, RecordKind::kReturn), 1u);
  for (const IndexedRecord& item : records) {
    if (item.record.kind == static_cast<uint16_t>(RecordKind::kReturn)) {
      EXPECT_EQ(item.record.flags & ring::kFlagNoCompletion, 0) << "v4 sees the channels end";
    }
  }
  abi::EventDescrV4 channel{};
  channel.type = abi::kKernelCh;
  channel.parent = coll_handle;
  void* channels[2] = {nullptr, nullptr};
  for (void*& handle : channels) plugin.start_event(context, &handle, &channel);
  ASSERT_NE(channels[1], nullptr);
  plugin.stop_event(channels[0]);
  EXPECT_EQ(Count(ReadRing(dir), RecordKind::kComplete), 0u);
  plugin.stop_event(channels[1]);
  EXPECT_EQ(Count(ReadRing(dir), RecordKind::kComplete), 1u);

  // Sends numbered per peer; one on no channel is complete at its launch.
  for (int i = 0; i < 2; ++i) {
    abi::EventDescrV4 p2p{};
    p2p.type = abi::kP2p;
    p2p.p2p = {"Send", nullptr, "ncclInt8", 4, 3, 0};
    void* p2p_handle = nullptr;
    plugin.start_event(context, &p2p_handle, &p2p);
    ASSERT_NE(p2p_handle, nullptr);
    plugin.stop_event(p2p_handle);
  }
  records = ReadRing(dir);
  EXPECT_EQ(SendSeqsTo(records, 3), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(Count(records, RecordKind::kReturn), 3u);
  EXPECT_EQ(Count(records, RecordKind::kComplete), 3u);
  EXPECT_EQ(plugin.finalize(context), 0);
}

// Versions 1 to 3 (NCCL 2.23 to 2.26): init names no communicator; the launch's descriptor
// names its hash and the rank. No version says when a launch ends (v3's channel events
// come without a count): the return says no completion will come, and channel events are
// not waited for.
TEST(ProfilerPluginAloneTest, Versions1To3RecordLaunchesWithoutCompletion) {
  int mask = 0;
  void* context = nullptr;
  const Dir v3_dir{0x3333};
  ASSERT_EQ(ncclProfiler_v3.init(&context, &mask), 0);
  EXPECT_NE(mask & abi::kColl, 0);
  EXPECT_NE(mask & abi::kP2p, 0);
  EXPECT_EQ(mask & abi::kKernelCh, 0) << "nothing to learn from channels without a count";
  abi::EventDescrV3 coll{};
  coll.type = abi::kColl;
  coll.rank = 2;
  coll.coll.comm_hash = v3_dir.comm_id;
  coll.coll.func = "ReduceScatter";
  coll.coll.count = 8;
  coll.coll.datatype = "ncclFloat32";
  coll.coll.max_channels = 1;
  void* handle = nullptr;
  ncclProfiler_v3.start_event(context, &handle, &coll);
  ASSERT_NE(handle, nullptr);
  abi::EventDescrV3 channel{};
  channel.type = abi::kKernelCh;
  channel.parent = handle;
  void* channel_handle = nullptr;
  ncclProfiler_v3.start_event(context, &channel_handle, &channel);
  EXPECT_EQ(channel_handle, nullptr);
  ncclProfiler_v3.stop_event(handle);
  std::vector<IndexedRecord> records = ReadRing(v3_dir);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].record.fn, static_cast<uint16_t>(ApiFn::kReduceScatter));
  EXPECT_EQ(records[0].record.rank, 2);
  EXPECT_EQ(records[0].record.nranks, ring::kUnset) << "no version before 4 gives the size";
  EXPECT_EQ(records[0].record.dtype, 7u);
  EXPECT_EQ(records[0].record.seq, 1u);
  EXPECT_EQ(records[1].record.kind, static_cast<uint16_t>(RecordKind::kReturn));
  EXPECT_NE(records[1].record.flags & ring::kFlagNoCompletion, 0);
  EXPECT_EQ(ncclProfiler_v3.finalize(context), 0);

  // v1: function and datatype as NCCL's enum numbers.
  const Dir v1_dir{0x1111};
  ASSERT_EQ(ncclProfiler_v1.init(&context, &mask), 0);
  for (const uint8_t func : {abi::kFuncAllReduce, abi::kFuncRecv, abi::kFuncAllReduce}) {
    abi::EventDescrV1 launch{};
    launch.rank = 0;
    if (func == abi::kFuncRecv) {
      launch.type = abi::kP2p;
      launch.p2p.comm_hash = v1_dir.comm_id;
      launch.p2p.func = func;
      launch.p2p.datatype = 9;  // ncclBfloat16
      launch.p2p.count = 2;
      launch.p2p.peer = 1;
    } else {
      launch.type = abi::kColl;
      launch.coll.comm_hash = v1_dir.comm_id;
      launch.coll.func = func;
      launch.coll.datatype = 9;
      launch.coll.count = 2;
      launch.coll.root = -1;
    }
    ncclProfiler_v1.start_event(context, &handle, &launch);
    ASSERT_NE(handle, nullptr);
    ncclProfiler_v1.stop_event(handle);
  }
  records = ReadRing(v1_dir);
  std::vector<std::pair<uint16_t, uint64_t>> calls;
  for (const IndexedRecord& item : records) {
    if (item.record.kind != static_cast<uint16_t>(RecordKind::kEnter)) continue;
    EXPECT_EQ(item.record.dtype, 9u);
    calls.emplace_back(item.record.fn, item.record.seq);
  }
  EXPECT_EQ(calls, (std::vector<std::pair<uint16_t, uint64_t>>{{static_cast<uint16_t>(ApiFn::kAllReduce), 1},
                                                                {static_cast<uint16_t>(ApiFn::kRecv), 1},
                                                                {static_cast<uint16_t>(ApiFn::kAllReduce), 2}}));
  EXPECT_EQ(Count(records, RecordKind::kReturn), 3u);
  EXPECT_EQ(Count(records, RecordKind::kComplete), 0u);
  EXPECT_EQ(ncclProfiler_v1.finalize(context), 0);
}

}  // namespace
}  // namespace collwatch
