// Dumps into trace events: the rules of trace_import.cc on real PyTorch 2.11 dumps and on
// small written ones (coalesced groups, point-to-point, cut histories), and the import's
// refusals, which leave nothing behind.
#include "flight_recorder/trace_import.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ring/ring_format.h"
#include "store/trace_store.h"

namespace collwatch::flight_recorder::trace_import_test {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kFixtures = COLLWATCH_FR_FIXTURES;

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/collwatch-fr-test-XXXXXX";
    path_ = ::mkdtemp(pattern);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string Write(const std::string& name, const std::string& text) const {
    const std::string path = path_ + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

RankDump Written(int32_t rank, const std::string& json) {
  absl::StatusOr<FlightRecorderDump> dump = ParseDump(json);
  EXPECT_TRUE(dump.ok()) << dump.status();
  return RankDump{"dir/nccl_trace_rank_" + std::to_string(rank), rank, dump.ok() ? *dump : FlightRecorderDump{}};
}

std::vector<v1::Event> Enters(const v1::StreamEventsRequest& batch) {
  std::vector<v1::Event> enters;
  for (const v1::Event& event : batch.events()) {
    if (event.kind() == v1::EVENT_KIND_ENTER) enters.push_back(event);
  }
  return enters;
}

TEST(TraceImportTest, EachEntryBecomesACallOfItsGroupsCommunicator) {
  absl::StatusOr<std::vector<RankDump>> dumps = ReadDumps({kFixtures + "/fsdp-divergent-path"});
  ASSERT_TRUE(dumps.ok()) << dumps.status();
  ASSERT_EQ(dumps->size(), 2u);
  const Conversion conversion = ConvertDumps(*dumps, "job-a");
  ASSERT_EQ(conversion.ranks.size(), 2u);
  const v1::StreamEventsRequest& rank0 = conversion.ranks[0];
  EXPECT_EQ(rank0.rank().job(), "job-a");
  EXPECT_EQ(rank0.rank().rank(), 0);
  EXPECT_EQ(rank0.rank().world_size(), 2);
  EXPECT_EQ(rank0.rank().host(), "nccl_trace_rank_0");
  const std::vector<v1::Event> enters = Enters(rank0);
  ASSERT_EQ(enters.size(), 19u);
  const v1::Event& first = enters.front();
  EXPECT_EQ(first.fn(), static_cast<uint32_t>(ring::ApiFn::kAllGather));
  EXPECT_EQ(first.seq(), 1u);
  EXPECT_EQ(first.count(), 8393729u);  // an all-gather's count is what each rank sends
  EXPECT_EQ(first.dtype(), 7u);        // ncclFloat32
  EXPECT_EQ(first.nranks(), 2);
  EXPECT_NE(first.call_path_id(), 0u);
  EXPECT_EQ(first.comm_id(), Enters(conversion.ranks[1]).front().comm_id());
  // A reduce-scatter's count is what each rank receives.
  const v1::Event& last = enters.back();
  EXPECT_EQ(last.fn(), static_cast<uint32_t>(ring::ApiFn::kReduceScatter));
  EXPECT_EQ(last.count(), 6297088u);
  // Completed entries complete; the unfinished last one does not.
  int completions = 0;
  for (const v1::Event& event : rank0.events()) completions += event.kind() == v1::EVENT_KIND_COMPLETE;
  EXPECT_EQ(completions, 17);
  ASSERT_GT(rank0.call_paths_size(), 0);
  EXPECT_EQ(rank0.call_paths(0).frames(0).function(), "all_gather_into_tensor");
  // As of rank 1's watchdog: its oldest unfinished entry + its 20 s timeout.
  const DumpEntry* oldest_open = nullptr;
  for (const DumpEntry& entry : (*dumps)[1].dump.entries) {
    if (!entry.completed()) {
      oldest_open = &entry;
      break;
    }
  }
  ASSERT_NE(oldest_open, nullptr);
  EXPECT_EQ(conversion.record.as_of_ns, oldest_open->time_created_ns + 20'000'000'000);
  EXPECT_DOUBLE_EQ(conversion.record.stall_after_s, 20.0);
  EXPECT_THAT(conversion.record.as_of_basis, HasSubstr("watchdog timeout"));
  EXPECT_TRUE(conversion.record.missing_ranks.empty());
  EXPECT_EQ(rank0.heartbeat_ns(), static_cast<uint64_t>(conversion.record.as_of_ns));
}

constexpr char kGroup[] = R"("version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}})";

std::string Entry(int record_id, int seq, int p2p_seq, const std::string& name, const std::string& sizes,
                  bool p2p = false) {
  return "{\"record_id\": " + std::to_string(record_id) + ", \"process_group\": [\"0\", \"default_pg\"], " +
         "\"collective_seq_id\": " + std::to_string(seq) + ", \"p2p_seq_id\": " + std::to_string(p2p_seq) +
         ", \"profiling_name\": \"" + name + "\", \"time_created_ns\": " + std::to_string(1000 + record_id) +
         ", \"input_sizes\": " + sizes + ", \"output_sizes\": " + sizes +
         ", \"input_dtypes\": [\"BFloat16\"], \"output_dtypes\": [\"BFloat16\"], \"state\": \"completed\"" +
         ", \"time_discovered_completed_ns\": " + std::to_string(2000 + record_id) +
         ", \"timeout_ms\": 600000, \"is_p2p\": " + (p2p ? "true" : "false") + "}";
}

TEST(TraceImportTest, CoalescedGroupsAreOneCallAndSendsCountPerPeer) {
  const std::string json = std::string("{") + kGroup + ", \"entries\": [" +
                           // An uneven all-gather (format 2.7 on): its members, then its closing entry.
                           Entry(0, 1, 0, "nccl:_broadcast_oop", "[[3]]") + ", " +
                           Entry(1, 1, 0, "nccl:_broadcast_oop", "[[5]]") + ", " +
                           Entry(2, 1, 0, "nccl:ALLGATHER_coalesced", "[]") + ", " +
                           // Before 2.7 only the closing entry was recorded: no call to compare.
                           Entry(3, 2, 0, "nccl:coalesced", "[]") + ", " +
                           Entry(4, 3, 0, "nccl:all_reduce_barrier", "[[1]]") + ", " +
                           Entry(5, 3, 1, "nccl:send 0->1", "[[4]]", true) + ", " +
                           Entry(6, 3, 2, "nccl:recv 0<-1", "[[4]]", true) + ", " +
                           Entry(7, 3, 3, "nccl:send 0->1", "[[4]]", true) + ", " +
                           Entry(8, 3, 3, "nccl:coalesced", "[]", true) + ", " +
                           Entry(9, 4, 3, "nccl:frobnicate", "[[1]]") + "]}";
  const Conversion conversion = ConvertDumps({Written(0, json)}, "job");
  const std::vector<v1::Event> enters = Enters(conversion.ranks[0]);
  ASSERT_EQ(enters.size(), 5u);
  EXPECT_EQ(enters[0].fn(), static_cast<uint32_t>(ring::ApiFn::kAllGather));
  EXPECT_EQ(enters[0].seq(), 1u);
  EXPECT_EQ(enters[0].count(), 8u);
  EXPECT_EQ(enters[0].dtype(), 9u);  // ncclBfloat16
  EXPECT_EQ(enters[1].fn(), static_cast<uint32_t>(ring::ApiFn::kAllReduce));
  EXPECT_EQ(enters[1].seq(), 3u);
  EXPECT_EQ(enters[1].count(), 1u);
  EXPECT_EQ(enters[1].redop(), ring::kUnset);  // not recorded by the Flight Recorder
  EXPECT_EQ(enters[2].fn(), static_cast<uint32_t>(ring::ApiFn::kSend));
  EXPECT_EQ(enters[2].root_or_peer(), 1);
  EXPECT_EQ(enters[2].seq(), 1u);
  EXPECT_EQ(enters[3].fn(), static_cast<uint32_t>(ring::ApiFn::kRecv));
  EXPECT_EQ(enters[3].root_or_peer(), 1);
  EXPECT_EQ(enters[3].seq(), 1u);
  EXPECT_EQ(enters[4].seq(), 2u);  // the second send to 1
  EXPECT_THAT(conversion.record.notes, ElementsAre(HasSubstr("1 entries of an unknown operation"),
                                                   HasSubstr("1 coalesced groups whose operations"),
                                                   HasSubstr("rank 1 wrote no dump")));
  EXPECT_THAT(conversion.record.missing_ranks, ElementsAre(1));
}

TEST(TraceImportTest, EachProcessGroupIsItsOwnCommunicatorWithItsOwnRanks) {
  // Four ranks; group "1" holds global ranks 0 and 2 (a data-parallel pair of a 2-D mesh).
  constexpr char kGroups[] = R"("version": "2.10", "pg_config": {
      "0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"},
      "1": {"name": "1", "desc": "dp", "ranks": "[0, 2]"}})";
  auto dump = [&](int rank) {
    const std::string entry = std::string("{\"record_id\": 0, \"process_group\": [\"1\", \"dp\"], ") +
                              "\"collective_seq_id\": 1, \"profiling_name\": \"nccl:all_reduce\", " +
                              "\"input_sizes\": [[8]], \"input_dtypes\": [\"Float\"], \"state\": \"scheduled\", " +
                              "\"time_created_ns\": 5}";
    return Written(rank, std::string("{") + kGroups + ", \"entries\": [" + entry + "]}");
  };
  const Conversion conversion = ConvertDumps({dump(0), dump(2)}, "job");
  const v1::Event on_rank0 = Enters(conversion.ranks[0]).at(0);
  const v1::Event on_rank2 = Enters(conversion.ranks[1]).at(0);
  EXPECT_EQ(on_rank0.comm_id(), on_rank2.comm_id());
  EXPECT_EQ(on_rank0.nranks(), 2);
  EXPECT_EQ(on_rank0.rank(), 0);
  EXPECT_EQ(on_rank2.rank(), 1);  // global rank 2 is the group's second
  EXPECT_EQ(conversion.ranks[1].rank().world_size(), 4);
  EXPECT_EQ(conversion.record.missing_ranks, (std::vector<int32_t>{1, 3}));
}

TEST(TraceImportTest, CutHistoriesSayWhereTheyStartAndLeaveSendsOut) {
  const std::string rank0 = std::string("{") + kGroup + ", \"entries\": [" + Entry(40, 41, 0, "nccl:all_reduce", "[[2]]") +
                            ", " + Entry(41, 41, 1, "nccl:send 0->1", "[[4]]", true) + "]}";
  const std::string rank1 = std::string("{") + kGroup + ", \"entries\": [" + Entry(9, 38, 0, "nccl:all_reduce", "[[2]]") +
                            ", " + Entry(10, 39, 0, "nccl:all_reduce", "[[2]]") + "]}";
  const Conversion conversion = ConvertDumps({Written(0, rank0), Written(1, rank1)}, "job");
  ASSERT_EQ(conversion.record.cut_groups.size(), 1u);
  EXPECT_EQ(conversion.record.cut_groups[0].group, "0 (default_pg)");
  EXPECT_EQ(conversion.record.cut_groups[0].compared_from_seq, 41u);
  EXPECT_EQ(conversion.record.cut_groups[0].comm_id, Enters(conversion.ranks[0])[0].comm_id());
  EXPECT_EQ(Enters(conversion.ranks[0]).size(), 1u);  // the send is left out
  EXPECT_THAT(conversion.record.notes, ::testing::Contains(HasSubstr("1 sends and receives left out")));
  EXPECT_THAT(conversion.record.notes, ::testing::Contains(HasSubstr("starts at collective #38")));
}

TEST(TraceImportTest, DumpsThatAreNotOneJobAreRefusedByName) {
  TempDir dir;
  // The pickle and the JSON form of rank 0 both in one folder: two dumps of one rank.
  absl::StatusOr<std::vector<RankDump>> dumps = ReadDumps({kFixtures + "/ddp-clean-json"});
  ASSERT_FALSE(dumps.ok());
  EXPECT_THAT(dumps.status().message(), HasSubstr("are both rank 0"));
  // Another job's rank 1: its default group has other ranks.
  const std::string other = dir.Write(
      "other_rank_1", R"({"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}}})");
  dumps = ReadDumps({kFixtures + "/fsdp-stopped-rank/nccl_trace_rank_0", other});
  ASSERT_FALSE(dumps.ok());
  EXPECT_THAT(dumps.status().message(), HasSubstr("other_rank_1: its process group 0 holds ranks [0, 1, 2, 3]"));
  // Garbage, a truncated pickle, a FIFO, a name without a rank: each named.
  const std::string garbage = dir.Write("garbage_1", "\x7f" "ELF not a dump");
  dumps = ReadDumps({garbage});
  ASSERT_FALSE(dumps.ok());
  EXPECT_THAT(dumps.status().message(), HasSubstr("garbage_1: neither a pickle"));
  std::ifstream in(kFixtures + "/fsdp-stopped-rank/nccl_trace_rank_0", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = dir.Write("cut_rank_0", bytes.substr(0, bytes.size() / 2));
  dumps = ReadDumps({cut});
  ASSERT_FALSE(dumps.ok());
  EXPECT_THAT(dumps.status().message(), HasSubstr("cut_rank_0: pickle: "));
  const std::string fifo = dir.path() + "/fifo_rank_2";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  dumps = ReadDumps({fifo});
  ASSERT_FALSE(dumps.ok());
  EXPECT_THAT(dumps.status().message(), HasSubstr("is a FIFO, not a regular file"));
  dumps = ReadDumps({dir.Write("norank.pkl", "x")});
  ASSERT_FALSE(dumps.ok());
  EXPECT_THAT(dumps.status().message(), HasSubstr("ends in no rank number"));
}

TEST(TraceImportTest, TheImportAppearsWholeOrNotAtAll) {
  TempDir dir;
  ImportOptions options;
  options.inputs = {kFixtures + "/fsdp-late-rank"};
  options.out_dir = dir.path() + "/out";
  absl::StatusOr<ImportRecord> record = ImportFlightRecorder(options);
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(ListRankTraces(options.out_dir, "flight-recorder").size(), 2u);
  std::optional<ImportRecord> read = ReadImportRecord(options.out_dir);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->as_of_ns, record->as_of_ns);
  EXPECT_EQ(read->dumps.size(), 2u);
  EXPECT_EQ(read->dumps[1].rank, 1);
  // Again into the same folder: refused, the first import untouched.
  absl::StatusOr<ImportRecord> again = ImportFlightRecorder(options);
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(again.status().message(), HasSubstr("already exists"));
  EXPECT_EQ(ListRankTraces(options.out_dir, "flight-recorder").size(), 2u);
  // A bad dump among good ones: nothing written, no partial folder left.
  options.out_dir = dir.path() + "/out2";
  options.inputs = {kFixtures + "/fsdp-late-rank/nccl_trace_rank_0", dir.Write("bad_rank_1", "{")};
  ASSERT_FALSE(ImportFlightRecorder(options).ok());
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(dir.path())) left.push_back(entry.path().filename().string());
  EXPECT_THAT(left, ::testing::UnorderedElementsAre("out", "bad_rank_1"));
}

TEST(TraceImportTest, AFolderOfDumpsMayHoldOtherFiles) {
  TempDir dir;
  for (const char* name : {"nccl_trace_rank_0", "nccl_trace_rank_1"}) {
    fs::copy_file(kFixtures + "/fsdp-late-rank/" + name, dir.path() + "/" + name);
  }
  dir.Write("kernel_cache_3", "some other tool's file");
  ImportOptions options;
  options.inputs = {dir.path()};
  options.out_dir = dir.path() + "/out";
  absl::StatusOr<ImportRecord> record = ImportFlightRecorder(options);
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->dumps.size(), 2u);
  EXPECT_THAT(record->notes, ::testing::Contains(HasSubstr("kernel_cache_3: not a dump, skipped")));
  // Named by the user, the same file is an error.
  options.inputs = {dir.path() + "/kernel_cache_3"};
  options.out_dir = dir.path() + "/out2";
  EXPECT_FALSE(ImportFlightRecorder(options).ok());
}

}  // namespace
}  // namespace collwatch::flight_recorder::trace_import_test
