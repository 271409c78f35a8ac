// `collwatch dump`: text and JSON-lines rendering of real ring files, and its errors.
#include "cli/ring_dump.h"

#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "interposer/ring_writer.h"

namespace collwatch {
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
  ASSERT_TRUE(DumpRings(dir_, DumpFormat::kText, out, err).ok());
  const std::string text = out.str();
  EXPECT_NE(text.find("job=dumptest"), std::string::npos) << text;
  EXPECT_NE(text.find("records=2 lost=0 torn=0"), std::string::npos) << text;
  EXPECT_NE(text.find("ReduceScatter"), std::string::npos);
  EXPECT_NE(text.find("0000000000abcdef"), std::string::npos);
  EXPECT_NE(text.find("bfloat16"), std::string::npos);
  EXPECT_NE(text.find("completes_at_return"), std::string::npos);
  EXPECT_TRUE(err.str().empty());
}

TEST_F(RingDumpTest, JsonLinesParseAndCarryTheRecord) {
  std::ostringstream out, err;
  ASSERT_TRUE(DumpRings(dir_, DumpFormat::kJsonLines, out, err).ok());
  std::istringstream lines(out.str());
  std::string line;
  std::vector<nlohmann::json> objects;
  while (std::getline(lines, line)) objects.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(objects.size(), 3u);
  EXPECT_EQ(objects[0]["type"], "ring");
  EXPECT_EQ(objects[0]["records"], 2);
  EXPECT_EQ(objects[1]["type"], "record");
  EXPECT_EQ(objects[1]["kind"], "enter");
  EXPECT_EQ(objects[1]["fn"], "ReduceScatter");
  EXPECT_EQ(objects[1]["seq"], 7);
  EXPECT_EQ(objects[1]["count"], 1024);
  EXPECT_EQ(objects[1]["dtype"], "bfloat16");
  EXPECT_EQ(objects[1]["redop"], "sum");
  EXPECT_EQ(objects[2]["kind"], "return");
  EXPECT_EQ(objects[2]["ref"], 0);
}

TEST_F(RingDumpTest, ExitCodeIsShownOnceTheWriterExited) {
  std::ostringstream running, running_err;
  ASSERT_TRUE(DumpRings(dir_, DumpFormat::kJsonLines, running, running_err).ok());
  EXPECT_TRUE(nlohmann::json::parse(running.str().substr(0, running.str().find('\n')))["exit_code"].is_null());
  writer_->RecordExitCode(3);
  writer_->SetState(ring::WriterState::kExited);
  std::ostringstream text, json, err;
  ASSERT_TRUE(DumpRings(dir_, DumpFormat::kText, text, err).ok());
  EXPECT_NE(text.str().find("state=exited exit_code=3"), std::string::npos) << text.str();
  ASSERT_TRUE(DumpRings(dir_, DumpFormat::kJsonLines, json, err).ok());
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
  ASSERT_TRUE(DumpRings(dir_, DumpFormat::kText, text, err).ok());
  EXPECT_NE(text.str().find(" ranks=2-3 "), std::string::npos) << text.str();
  ASSERT_TRUE(DumpRings(dir_, DumpFormat::kJsonLines, json, err).ok());
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
  slot.state.store(ring::kStringReady, std::memory_order_release);
  ring::Record record{};
  record.kind = static_cast<uint16_t>(ring::RecordKind::kEnter);
  record.fn = static_cast<uint16_t>(ring::ApiFn::kGroupStart);
  record.region_id = 1;
  writer_->Append(RingWriter::kSharedLane, record);
  std::ostringstream out, err;
  ASSERT_TRUE(DumpRings(dir_, DumpFormat::kJsonLines, out, err).ok());
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
  ASSERT_TRUE(DumpRings(dir_, DumpFormat::kText, out, err).ok());
  EXPECT_NE(err.str().find("broken.ring"), std::string::npos);
  EXPECT_NE(out.str().find("ReduceScatter"), std::string::npos);
}

TEST_F(RingDumpTest, UnusablePathsAreErrors) {
  std::ostringstream out, err;
  EXPECT_FALSE(DumpRings(dir_ + "/missing", DumpFormat::kText, out, err).ok());
  const std::string empty = dir_ + "/empty";
  std::filesystem::create_directory(empty);
  EXPECT_FALSE(DumpRings(empty, DumpFormat::kText, out, err).ok());
}

}  // namespace
}  // namespace collwatch
