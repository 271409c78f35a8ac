// The plugin alone (this test links no NCCL wrappers), driven event by event as NCCL
// drives it: a collective's return waits for the end of its group and says whether NCCL
// launched it; completion waits for every channel; a send is recorded with its peer; a
// call captured into a CUDA graph is left alone.
#include "interposer/profiler_plugin.h"

#include <stdlib.h>

#include <filesystem>
#include <string>
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

std::vector<IndexedRecord> ReadRing(const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> paths = ListRingFiles(dir);
  EXPECT_TRUE(paths.ok() && paths->size() == 1u);
  if (!paths.ok() || paths->empty()) return {};
  absl::StatusOr<std::unique_ptr<RingReader>> reader = RingReader::Open(paths->front());
  EXPECT_TRUE(reader.ok()) << reader.status();
  return reader.ok() ? (*reader)->ReadAll(/*writer_gone=*/false).records : std::vector<IndexedRecord>{};
}

size_t Count(const std::vector<IndexedRecord>& records, RecordKind kind) {
  size_t n = 0;
  for (const IndexedRecord& item : records) n += item.record.kind == static_cast<uint16_t>(kind);
  return n;
}

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/collwatch-plugin-test-XXXXXX";
    path_ = mkdtemp(pattern);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(ProfilerPluginAloneTest, EventsBecomeRecordsAsNcclReportsThem) {
  TempDir dir;
  setenv("COLLWATCH_RING_DIR", dir.path().c_str(), 1);
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
  std::vector<IndexedRecord> records = ReadRing(dir.path());
  EXPECT_EQ(Count(records, RecordKind::kEnter), 1u);
  EXPECT_EQ(Count(records, RecordKind::kReturn), 0u) << "the return waits for the group's end";
  plugin.stop_event(group_handle);
  records = ReadRing(dir.path());
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
  EXPECT_EQ(Count(ReadRing(dir.path()), RecordKind::kComplete), 0u);
  plugin.stop_event(channels[1]);
  records = ReadRing(dir.path());
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
  records = ReadRing(dir.path());
  std::vector<uint64_t> send_seqs;
  for (const IndexedRecord& item : records) {
    if (item.record.kind == static_cast<uint16_t>(RecordKind::kEnter) &&
        item.record.fn == static_cast<uint16_t>(ApiFn::kSend)) {
      EXPECT_EQ(item.record.root_or_peer, 3);
      send_seqs.push_back(item.record.seq);
    }
  }
  EXPECT_EQ(send_seqs, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(Count(records, RecordKind::kComplete), 3u);

  // Captured into a CUDA graph: not recorded here (replays are not followed yet).
  api.coll_api.graph_captured = true;
  plugin.start_event(context, &api_handle, &api);
  EXPECT_EQ(api_handle, nullptr);
  EXPECT_EQ(Count(ReadRing(dir.path()), RecordKind::kEnter), 4u);
  EXPECT_EQ(plugin.finalize(context), 0);
  unsetenv("COLLWATCH_RING_DIR");
}

}  // namespace
}  // namespace collwatch
