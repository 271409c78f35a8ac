// `collwatch dump`: text and JSON-lines rendering of real ring files and of the trace
// store, and its errors.
#include "cli/dump_command.h"

#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "interposer/ring_writer.h"
#include "nlohmann/json.hpp"
#include "ring/hash.h"
#include "ring/ring_reader.h"
#include "store/event_codec.h"
#include "store/trace_store.h"

namespace collwatch::dump_command_test {
namespace {

class RingDumpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/collwatch-dump-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    Config config;
    config.ring_records = 64;
    std::snprintf(config.ring_dir, sizeof config.ring_dir, "%s", dir_.c_str());
    std::snprintf(config.job, sizeof config.job, "dumptest");
    writer_ = RingWriter::Create(config);
    ASSERT_NE(writer_, nullptr);
    ring::Record record{};
    record.kind = static_cast<uint16_t>(ring::RecordKind::kEnter);
    record.fn = static_cast<uint16_t>(ring::ApiFn::kReduceScatter);
    record.comm_id = 0xabcdef;
    record.rank = 1;
    record.nranks = 4;
    record.seq = 7;
    record.count = 1024;
    record.dtype = 9;  // bfloat16
    record.redop = 0;
    record.root_or_peer = ring::kUnset;
    writer_->Append(RingWriter::kSharedLane, record);
    record.kind = static_cast<uint16_t>(ring::RecordKind::kReturn);
    record.ref_index = 0;
    record.flags = ring::kFlagCompletesAtReturn;
    writer_->Append(RingWriter::kSharedLane, record);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
  std::unique_ptr<RingWriter> writer_;
};

TEST_F(RingDumpTest, TextNamesEveryField) {
  std::ostringstream out, err;
  ASSERT_TRUE(DumpTraces(dir_, "", DumpFormat::kText, out, err).ok());
  const std::string text = out.str();
  EXPECT_NE(text.find("job=dumptest"), std::string::npos) << text;
  EXPECT_NE(text.find("records=2 lost=0 torn=0"), std::string::npos) << text;
  EXPECT_NE(text.find("reduce-scatter"), std::string::npos);
  EXPECT_NE(text.find("0000000000abcdef"), std::string::npos);
  EXPECT_NE(text.find("bfloat16"), std::string::npos);
  EXPECT_NE(text.find("completes_at_return"), std::string::npos);
  EXPECT_TRUE(err.str().empty());
}

TEST_F(RingDumpTest, JsonLinesParseAndCarryTheRecord) {
  std::ostringstream out, err;
  ASSERT_TRUE(DumpTraces(dir_, "", DumpFormat::kJsonLines, out, err).ok());
  std::istringstream lines(out.str());
  std::string line;
  std::vector<nlohmann::json> objects;
  while (std::getline(lines, line)) objects.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(objects.size(), 3u);
  EXPECT_EQ(objects[0]["type"], "ring");
  EXPECT_EQ(objects[0]["records"], 2);
  EXPECT_EQ(objects[1]["type"], "record");
  EXPECT_EQ(objects[1]["kind"], "enter");
  EXPECT_EQ(objects[1]["fn"], "reduce-scatter");
  EXPECT_EQ(objects[1]["seq"], 7);
  EXPECT_EQ(objects[1]["count"], 1024);
  EXPECT_EQ(objects[1]["dtype"], "bfloat16");
  EXPECT_EQ(objects[1]["redop"], "sum");
  EXPECT_EQ(objects[2]["kind"], "return");
  EXPECT_EQ(objects[2]["ref"], 0);
}

TEST_F(RingDumpTest, ExitCodeIsShownOnceTheWriterExited) {
  std::ostringstream running, running_err;
  ASSERT_TRUE(DumpTraces(dir_, "", DumpFormat::kJsonLines, running, running_err).ok());
  EXPECT_TRUE(nlohmann::json::parse(running.str().substr(0, running.str().find('\n')))["exit_code"].is_null());
  writer_->RecordExitCode(3);
  writer_->SetState(ring::WriterState::kExited);
  std::ostringstream text, json, err;
  ASSERT_TRUE(DumpTraces(dir_, "", DumpFormat::kText, text, err).ok());
  EXPECT_NE(text.str().find("state=exited exit_code=3"), std::string::npos) << text.str();
  ASSERT_TRUE(DumpTraces(dir_, "", DumpFormat::kJsonLines, json, err).ok());
  EXPECT_EQ(nlohmann::json::parse(json.str().substr(0, json.str().find('\n')))["exit_code"], 3);
}

// A process holding two ranks of its largest communicator shows as those ranks.
TEST_F(RingDumpTest, ProcessOfSeveralRanksShowsThem) {
  for (int32_t rank = 2; rank < 4; ++rank) {
    ring::Record record{};
    record.kind = static_cast<uint16_t>(ring::RecordKind::kEnter);
    record.fn = static_cast<uint16_t>(ring::ApiFn::kAllReduce);
    record.comm_id = 0x99;
    record.rank = rank;
    record.nranks = 8;
    record.seq = 1;
    writer_->Append(RingWriter::kSharedLane, record);
  }
  std::ostringstream text, json, err;
  ASSERT_TRUE(DumpTraces(dir_, "", DumpFormat::kText, text, err).ok());
  EXPECT_NE(text.str().find(" ranks=2-3 "), std::string::npos) << text.str();
  ASSERT_TRUE(DumpTraces(dir_, "", DumpFormat::kJsonLines, json, err).ok());
  std::istringstream lines(json.str());
  std::string first;
  ASSERT_TRUE(std::getline(lines, first));
  EXPECT_EQ(nlohmann::json::parse(first)["ranks"], nlohmann::json::array({2, 3}));
}

// The ring fuzzer's find: a region name that is not UTF-8 (NVTX names are any bytes)
// made `collwatch dump --json` throw and abort.
TEST_F(RingDumpTest, JsonLinesStayJsonWhenANameIsNotUtf8) {
  ring::StringSlot& slot = writer_->strings()[0];
  std::memcpy(slot.text, "fwd/\xff\xfe", 6);
  slot.length = 6;
  slot.hash = Hash64(slot.text, 6);  // as the writer does: readers check a whole name against it
  slot.state.store(ring::kStringReady, std::memory_order_release);
  ring::Record record{};
  record.kind = static_cast<uint16_t>(ring::RecordKind::kEnter);
  record.fn = static_cast<uint16_t>(ring::ApiFn::kGroupStart);
  record.region_id = 1;
  writer_->Append(RingWriter::kSharedLane, record);
  std::ostringstream out, err;
  ASSERT_TRUE(DumpTraces(dir_, "", DumpFormat::kJsonLines, out, err).ok());
  std::istringstream lines(out.str());
  std::string line;
  std::string last_region;
  while (std::getline(lines, line)) {
    const nlohmann::json object = nlohmann::json::parse(line);
    if (object.contains("region")) last_region = object["region"];
  }
  EXPECT_EQ(last_region, "fwd/\xef\xbf\xbd\xef\xbf\xbd");
}

TEST_F(RingDumpTest, BadRingIsReportedAndTheOthersStillDumped) {
  std::ofstream(dir_ + "/broken.ring") << "not a ring";
  std::ostringstream out, err;
  ASSERT_TRUE(DumpTraces(dir_, "", DumpFormat::kText, out, err).ok());
  EXPECT_NE(err.str().find("broken.ring"), std::string::npos);
  EXPECT_NE(out.str().find("reduce-scatter"), std::string::npos);
}

// The record lines of a text dump: everything after each column-names line.
std::vector<std::string> RecordLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  bool in_records = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("  lane:index")) {
      in_records = true;
    } else if (!line.starts_with("  ")) {
      in_records = false;
    } else if (in_records) {
      lines.push_back(line);
    }
  }
  return lines;
}

// A rank's trace, as the collector stores what the agent sent of a ring, dumps as that ring
// does: the same record lines in the same words, under a header of the stored status.
TEST_F(RingDumpTest, TraceStoreDumpsTheRecordsOfItsRing) {
  absl::StatusOr<std::unique_ptr<RingReader>> reader = RingReader::Open(writer_->path());
  ASSERT_TRUE(reader.ok()) << reader.status();
  const ReadBatch batch = (*reader)->ReadAll(/*writer_gone=*/false);
  ASSERT_EQ(batch.records.size(), 2u);
  v1::StreamEventsRequest request;
  *request.mutable_rank() = RankIdentityFromRing((*reader)->identity());
  for (const IndexedRecord& item : batch.records) EventFromRecord(item, request.add_events());
  request.set_writer_status(v1::WRITER_STATUS_EXITED);
  request.set_exit_recorded(true);
  request.set_exit_code(3);
  const std::string store = dir_ + "/store";
  {
    absl::StatusOr<std::unique_ptr<RankTraceWriter>> trace =
        RankTraceWriter::Open(store + "/" + RankTraceDirName(request.rank()), request.rank());
    ASSERT_TRUE(trace.ok()) << trace.status();
    ASSERT_TRUE((*trace)->Append(request).ok());
  }

  std::ostringstream ring_text, store_text, err;
  ASSERT_TRUE(DumpTraces(writer_->path(), "", DumpFormat::kText, ring_text, err).ok()) << err.str();
  ASSERT_TRUE(DumpTraces(store, "", DumpFormat::kText, store_text, err).ok()) << err.str();
  EXPECT_TRUE(err.str().empty()) << err.str();
  EXPECT_TRUE(store_text.str().starts_with("trace " + store + "/")) << store_text.str();
  EXPECT_NE(store_text.str().find(" job=dumptest "), std::string::npos) << store_text.str();
  EXPECT_NE(store_text.str().find("state=exited exit_code=3"), std::string::npos) << store_text.str();
  EXPECT_NE(store_text.str().find("records=2 lost=0 torn=0 dropped=0"), std::string::npos) << store_text.str();
  ASSERT_EQ(RecordLines(store_text.str()).size(), 2u) << store_text.str();
  EXPECT_EQ(RecordLines(store_text.str()), RecordLines(ring_text.str()));

  std::ostringstream json;
  ASSERT_TRUE(DumpTraces(store, "", DumpFormat::kJsonLines, json, err).ok());
  std::istringstream lines(json.str());
  std::vector<nlohmann::json> objects;
  for (std::string line; std::getline(lines, line);) objects.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(objects.size(), 3u);
  EXPECT_EQ(objects[0]["type"], "trace");
  EXPECT_EQ(objects[0]["writer_state"], "exited");
  EXPECT_EQ(objects[0]["exit_code"], 3);
  EXPECT_EQ(objects[1]["fn"], "reduce-scatter");
  EXPECT_EQ(objects[1]["dtype"], "bfloat16");
  EXPECT_EQ(objects[2]["kind"], "return");
}

TEST_F(RingDumpTest, DamagedRankTraceIsReportedAndNothingElseToDumpIsAnError) {
  const std::string trace = dir_ + "/store/job/rank";
  std::filesystem::create_directories(trace);
  std::ofstream(trace + "/trace.cwlog") << "not a trace";
  std::ostringstream out, err;
  EXPECT_FALSE(DumpTraces(dir_ + "/store", "", DumpFormat::kText, out, err).ok());
  EXPECT_NE(err.str().find("trace.cwlog"), std::string::npos) << err.str();
  EXPECT_TRUE(out.str().empty());
}

TEST_F(RingDumpTest, UnusablePathsAreErrors) {
  std::ostringstream out, err;
  EXPECT_FALSE(DumpTraces(dir_ + "/missing", "", DumpFormat::kText, out, err).ok());
  const std::string empty = dir_ + "/empty";
  std::filesystem::create_directory(empty);
  EXPECT_FALSE(DumpTraces(empty, "", DumpFormat::kText, out, err).ok());
}

}  // namespace
}  // namespace collwatch::dump_command_test
