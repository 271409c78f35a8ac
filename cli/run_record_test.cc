// run.json: every key `collwatch analyze` reads back (trace_loader.cc) is there with its
// value, a rank process with its look and its state by name; what is written reads back
// whole; a hand-edited file reads leniently; a folder that cannot take the file is an
// error naming it.
#include "cli/run_record.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "files/json_contract.h"
#include "files/version.h"
#include "gtest/gtest.h"

namespace collwatch {
namespace {

RunRecord Record() {
  RunRecord record;
  record.job = "job-1";
  record.command = {"python", "train.py", "--steps", "3"};
  record.exit_status = 3;
  record.collector = "127.0.0.1:41234";
  record.token_file = "/out/.collwatch-token";
  record.collwatch_pid = 777;
  record.collwatch_host = "node-1";
  record.traces = "out/job-1";
  record.rings = 2;
  record.events = 1234;
  record.lost = 5;
  record.drained = true;
  record.stall_after_s = 12.5;
  record.kill_on_hang = true;
  record.one_gpu = false;
  record.stopped_hung_job = true;
  record.stopped_at_ns = 1'700'000'000'123'456'789;
  RankProcess rank;
  rank.info.host = "node-7";
  rank.info.pid = 4242;
  rank.info.global_rank = 1;
  rank.info.world_size = 2;
  rank.sample.state = ProcessState::kSleeping;
  rank.sample.wait_channel = "futex_wait_queue";
  rank.sample.cpu_ns = 987654321;
  rank.sample.cpu_advancing = true;
  rank.sample.sampled_ns = 1'700'000'000'000'000'000;
  record.rank_processes.emplace(rank.info.pid, rank);
  FlightRecorderDump dump;
  dump.rank = 1;
  dump.pid = 4242;
  dump.pipe = "/tmp/fr_pipe_1.pipe";
  dump.files = {"/tmp/fr_dump_1"};
  dump.file = "/tmp/fr_dump_1";
  record.flight_recorder_dumps.push_back(dump);
  return record;
}

TEST(RunRecordJson, HoldsEveryFieldUnderItsKey) {
  const nlohmann::json run = RunRecordJson(Record());
  EXPECT_EQ(run["job"], "job-1");
  EXPECT_EQ(run["command"], nlohmann::json({"python", "train.py", "--steps", "3"}));
  EXPECT_EQ(run["exit_status"], 3);
  EXPECT_EQ(run["collector"], "127.0.0.1:41234");
  EXPECT_EQ(run["state"], "ended");
  EXPECT_EQ(run["token_file"], "/out/.collwatch-token");
  EXPECT_EQ(run["tls_ca_file"], "");
  EXPECT_EQ(run["collwatch_pid"], 777);
  EXPECT_EQ(run["collwatch_host"], "node-1");
  EXPECT_EQ(run["traces"], "out/job-1");
  EXPECT_EQ(run["rings"], 2);
  EXPECT_EQ(run["events"], 1234);
  EXPECT_EQ(run["lost"], 5);
  EXPECT_EQ(run["drained"], true);
  EXPECT_EQ(run["stall_after_s"], 12.5);
  EXPECT_EQ(run["kill_on_hang"], true);
  EXPECT_EQ(run["one_gpu"], false);
  EXPECT_EQ(run["stopped_hung_job"], true);
  EXPECT_TRUE(run["stopped_at_ns"].is_number_integer());
  EXPECT_EQ(run["stopped_at_ns"].get<int64_t>(), 1'700'000'000'123'456'789);
  EXPECT_EQ(run["collwatch_version"], std::string(CollwatchVersionText()));
  EXPECT_EQ(run["schema_version"], kRunSchemaVersion);
  EXPECT_EQ(run.size(), 23u);
}

TEST(RunRecordJson, FlightRecorderDumpsAskedBeforeTheStop) {
  const nlohmann::json list = RunRecordJson(Record())["flight_recorder_dumps"];
  ASSERT_TRUE(list.is_array());
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["rank"], 1);
  EXPECT_EQ(list[0]["pipe"], "/tmp/fr_pipe_1.pipe");
  EXPECT_EQ(list[0]["asked"], true);
  EXPECT_EQ(list[0]["written"], true);
  EXPECT_EQ(list[0]["file"], "/tmp/fr_dump_1");
  EXPECT_EQ(list[0]["files"], nlohmann::json({"/tmp/fr_dump_1"}));
}

TEST(RunRecordJson, RankProcessesWithTheirLastLook) {
  const nlohmann::json list = RunRecordJson(Record())["rank_processes"];
  ASSERT_TRUE(list.is_array());
  ASSERT_EQ(list.size(), 1u);
  const nlohmann::json& rank = list[0];
  EXPECT_EQ(rank["pid"], 4242);
  EXPECT_EQ(rank["host"], "node-7");
  EXPECT_EQ(rank["global_rank"], 1);
  EXPECT_EQ(rank["world_size"], 2);
  EXPECT_EQ(rank["state"], "sleeping");
  EXPECT_EQ(ParseProcessState(rank["state"].get<std::string>()), ProcessState::kSleeping);  // as the loader reads it
  EXPECT_EQ(rank["wait_channel"], "futex_wait_queue");
  EXPECT_EQ(rank["cpu_ns"], 987654321);
  EXPECT_EQ(rank["cpu_advancing"], true);
  EXPECT_EQ(rank["sampled_ns"].get<int64_t>(), 1'700'000'000'000'000'000);
}

TEST(RunRecordJson, NoRankProcessesIsAnEmptyList) {
  RunRecord record;
  record.job = "j";
  const nlohmann::json run = RunRecordJson(record);
  EXPECT_TRUE(run["rank_processes"].is_array());
  EXPECT_TRUE(run["rank_processes"].empty());
  EXPECT_EQ(run["exit_status"], -1);  // never known
  EXPECT_EQ(run["stopped_at_ns"], 0);
}

TEST(WriteRunRecord, WritesRunJsonThatParsesBack) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("run-record-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(WriteRunRecord(dir.string(), Record()).ok());
  std::ifstream file(dir / "run.json");
  const nlohmann::json run = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  EXPECT_EQ(run, RunRecordJson(Record()));
  std::filesystem::remove_all(dir);
}

TEST(RunRecordFromJson, ReadsBackWhatWasWritten) {
  const nlohmann::json written = RunRecordJson(Record());
  const RunRecord read = RunRecordFromJson(written);
  EXPECT_EQ(RunRecordJson(read), written);
  ASSERT_EQ(read.rank_processes.size(), 1u);
  EXPECT_EQ(read.rank_processes.at(4242).sample.state, ProcessState::kSleeping);
}

// The record written when the command starts: `collwatch top DIR` reads where to connect.
TEST(RunRecordFromJson, ARunningRecordReadsBackRunning) {
  RunRecord record = Record();
  record.running = true;
  record.tls_ca_file = "/etc/ca.pem";
  const nlohmann::json written = RunRecordJson(record);
  EXPECT_EQ(written["state"], "running");
  const RunRecord read = RunRecordFromJson(written);
  EXPECT_TRUE(read.running);
  EXPECT_EQ(read.token_file, "/out/.collwatch-token");
  EXPECT_EQ(read.tls_ca_file, "/etc/ca.pem");
  EXPECT_EQ(read.collwatch_pid, 777);
  EXPECT_EQ(read.collwatch_host, "node-1");
}

TEST(RunRecordFromJson, WrongOrMissingKeysKeepTheirDefaults) {
  const RunRecord read = RunRecordFromJson(nlohmann::json::parse(R"({
      "job": "j", "exit_status": "three", "stall_after_s": 7, "drained": 1, "command": ["a", 2, "b"],
      "rank_processes": [{"pid": 5}, {"host": "h", "pid": 0}, {"host": "h", "pid": 6, "state": "asleep",
                          "cpu_ns": -4, "sampled_ns": -1}, 3]})"));
  EXPECT_EQ(read.job, "j");
  EXPECT_FALSE(read.running) << "a record without a state was written at the end";
  EXPECT_EQ(read.exit_status, -1);  // not known
  EXPECT_EQ(read.stall_after_s, 7.0);
  EXPECT_FALSE(read.drained);
  EXPECT_EQ(read.command, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(read.rank_processes.size(), 1u);
  const RankProcess& rank = read.rank_processes.at(6);
  EXPECT_EQ(rank.info.global_rank, ring::kUnset);
  EXPECT_EQ(rank.sample.state, ProcessSample{}.state);
  EXPECT_EQ(rank.sample.cpu_ns, 0u);
  EXPECT_EQ(rank.sample.sampled_ns, 0);
  EXPECT_EQ(RunRecordFromJson(nlohmann::json::array()).job, "");
}

TEST(ReadRunRecord, NeedsARunJsonThatNamesItsJob) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("read-run-record-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  EXPECT_FALSE(ReadRunRecord(dir.string()).has_value());
  std::ofstream(dir / "run.json") << R"({"events": 3})";
  EXPECT_FALSE(ReadRunRecord(dir.string()).has_value());
  std::ofstream(dir / "run.json") << "{not json";
  EXPECT_FALSE(ReadRunRecord(dir.string()).has_value());
  ASSERT_TRUE(WriteRunRecord(dir.string(), Record()).ok());
  ASSERT_TRUE(ReadRunRecord(dir.string()).has_value());
  EXPECT_EQ(ReadRunRecord(dir.string())->events, 1234u);
  std::filesystem::remove_all(dir);
}

TEST(WriteRunRecord, AFolderThatIsNotThereIsAnError) {
  const absl::Status status = WriteRunRecord("/nonexistent/collwatch-out", Record());
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(), "cannot write /nonexistent/collwatch-out/run.json: no such file or directory");
}

}  // namespace
}  // namespace collwatch
