// Dumps as PyTorch 2.11 wrote them on 2 x H100 (tests/data/flight_recorder), and the
// fields of the older format versions, written here in the JSON form.
#include "flight_recorder/dump.h"

#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace collwatch::flight_recorder::dump_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(COLLWATCH_FR_FIXTURES "/") + name, std::ios::binary);
  std::stringstream whole;
  whole << in.rdbuf();
  return whole.str();
}

TEST(DumpTest, ReadsAPyTorchDumpWithItsGroupsEntriesAndFrames) {
  absl::StatusOr<FlightRecorderDump> dump = ParseDump(Fixture("fsdp-divergent-path/nccl_trace_rank_0"));
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_EQ(dump->version, "2.10");
  EXPECT_EQ(dump->comm_lib_version, "2.28.9");
  ASSERT_EQ(dump->groups.count("0"), 1u);
  EXPECT_EQ(dump->groups.at("0").desc, "default_pg");
  EXPECT_THAT(dump->groups.at("0").ranks, ElementsAre(0, 1));
  ASSERT_EQ(dump->entries.size(), 19u);
  const DumpEntry& first = dump->entries.front();
  EXPECT_EQ(first.record_id, 0);
  EXPECT_EQ(first.group_name, "0");
  EXPECT_EQ(first.group_desc, "default_pg");
  EXPECT_EQ(first.collective_seq_id, 1);
  EXPECT_EQ(first.profiling_name, "nccl:_all_gather_base");
  EXPECT_THAT(first.input_sizes, ElementsAre(ElementsAre(8393729)));
  EXPECT_THAT(first.output_sizes, ElementsAre(ElementsAre(16787458)));
  EXPECT_THAT(first.input_dtypes, ElementsAre("Float"));
  EXPECT_TRUE(first.completed());
  EXPECT_GT(first.time_completed_ns, first.time_created_ns);
  EXPECT_EQ(first.time_started_ns, 0);  // None: timing was off
  EXPECT_EQ(first.timeout_ms, 20000);
  ASSERT_FALSE(first.frames.empty());
  EXPECT_EQ(first.frames.front().function, "all_gather_into_tensor");  // innermost first
  EXPECT_EQ(first.frames.back().function, "<module>");
  EXPECT_THAT(first.frames.back().file, HasSubstr("torch_job.py"));
  EXPECT_EQ(dump->entries.back().state, "scheduled");
}

TEST(DumpTest, TheJsonFormGivesWhatThePickleGivesButFrames) {
  absl::StatusOr<FlightRecorderDump> pickled = ParseDump(Fixture("ddp-clean-json/nccl_trace_rank_1"));
  absl::StatusOr<FlightRecorderDump> json = ParseDump(Fixture("ddp-clean-json/nccl_trace_rank_1.json"));
  ASSERT_TRUE(pickled.ok()) << pickled.status();
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->version, pickled->version);
  EXPECT_EQ(json->groups.at("0").ranks, pickled->groups.at("0").ranks);
  ASSERT_EQ(json->entries.size(), pickled->entries.size());
  ASSERT_FALSE(json->entries.empty());
  for (size_t i = 0; i < json->entries.size(); ++i) {
    const DumpEntry& a = json->entries[i];
    const DumpEntry& b = pickled->entries[i];
    EXPECT_EQ(a.collective_seq_id, b.collective_seq_id) << i;
    EXPECT_EQ(a.profiling_name, b.profiling_name) << i;
    EXPECT_EQ(a.input_sizes, b.input_sizes) << i;
    EXPECT_EQ(a.output_dtypes, b.output_dtypes) << i;
    EXPECT_EQ(a.state, b.state) << i;
    EXPECT_EQ(a.time_created_ns, b.time_created_ns) << i;
    EXPECT_EQ(a.time_started_ns, 0) << i;  // JSON writes 0 for "never"
  }
}

TEST(DumpTest, OlderFormatsKeepTheirDefaults) {
  // Format 2.0 (PyTorch 2.4): C++ dtype names, no timeout, no thread, no comm lib version.
  absl::StatusOr<FlightRecorderDump> dump = ParseDump(R"({
    "version": "2.0",
    "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}},
    "entries": [{"record_id": 4, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": 5,
                 "p2p_seq_id": 0, "op_id": 5, "profiling_name": "nccl:all_reduce", "time_created_ns": 100,
                 "input_sizes": [[4, 8]], "input_dtypes": ["float"], "output_sizes": [[4, 8]],
                 "output_dtypes": ["float"], "state": "scheduled", "time_discovered_started_ns": null,
                 "time_discovered_completed_ns": null, "retired": false, "is_p2p": false, "frames": []}]})");
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_THAT(dump->groups.at("0").ranks, ElementsAre(0, 1, 2, 3));
  ASSERT_EQ(dump->entries.size(), 1u);
  EXPECT_EQ(dump->entries[0].timeout_ms, 0);
  EXPECT_EQ(dump->entries[0].input_dtypes.front(), "float");
  EXPECT_EQ(dump->comm_lib_version, "");
  // Format 2.6 named the NCCL version nccl_version; pg_status values are strings in JSON.
  dump = ParseDump(R"({"version": "2.6", "nccl_version": "2.21.5",
    "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0]"}},
    "pg_status": {"0": {"last_enqueued_collective": "3"}}})");
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_EQ(dump->comm_lib_version, "2.21.5");
  EXPECT_TRUE(dump->entries.empty());  // JSON leaves `entries` out when there are none
  // Format 1.x: groups by id, each a list of ranks; a collective's number is seq_id.
  dump = ParseDump(R"({"version": "1.5", "pg_config": {"0": [0, 1]},
    "entries": [{"pg_id": 0, "seq_id": 7, "profiling_name": "nccl:broadcast", "state": "completed"}]})");
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_THAT(dump->groups.at("0").ranks, ElementsAre(0, 1));
  EXPECT_EQ(dump->entries[0].collective_seq_id, 7);
  EXPECT_EQ(dump->entries[0].group_name, "0");
}

TEST(DumpTest, WhatIsNoDumpSaysSo) {
  EXPECT_THAT(ParseDump("").status().message(), HasSubstr("empty"));
  EXPECT_THAT(ParseDump("GIF89a").status().message(), HasSubstr("not a Flight Recorder dump"));
  EXPECT_THAT(ParseDump("[1, 2]").status().message(), HasSubstr("not a Flight Recorder dump"));
  EXPECT_THAT(ParseDump(R"({"entries": []})").status().message(), HasSubstr("no `version`"));
  EXPECT_THAT(ParseDump(R"({"version": "2.10", "entries": [{"profiling_name": 3}]})").status().message(),
              HasSubstr("entries[0]: `profiling_name` is not a string"));
  EXPECT_THAT(ParseDump(R"({"version": "2.10", "pg_config": {"0": {"ranks": "[0, x]"}}})").status().message(),
              HasSubstr("ranks unreadable"));
  EXPECT_THAT(ParseDump(R"({"version": "2.10", "entries": [)").status().message(), HasSubstr("truncated"));
  EXPECT_THAT(ParseDump(std::string(100000, '[')).status().message(), HasSubstr("not a Flight Recorder dump"));
  const std::string deep = "{\"version\": \"2.10\", \"x\": " + std::string(1000, '[') + std::string(1000, ']') + "}";
  EXPECT_THAT(ParseDump(deep).status().message(), HasSubstr("deeper"));
  // A pickle of something else: a list.
  EXPECT_THAT(ParseDump(std::string("\x80\x02]q\x00.", 6)).status().message(), HasSubstr("not a dict"));
}

TEST(DumpTest, TheRankComesFromTheFileName) {
  EXPECT_EQ(RankFromFileName("nccl_trace_rank_12"), 12);
  EXPECT_EQ(RankFromFileName("comm_lib_trace_rank_3.json"), 3);
  EXPECT_EQ(RankFromFileName("trace7.pkl"), 7);
  EXPECT_EQ(RankFromFileName("fr_trace.txt"), std::nullopt);
  EXPECT_EQ(RankFromFileName("nccl_trace_rank_"), std::nullopt);
  EXPECT_EQ(RankFromFileName("rank_99999999999"), std::nullopt);
}

}  // namespace
}  // namespace collwatch::flight_recorder::dump_test
