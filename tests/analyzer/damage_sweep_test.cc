// The damage sweep (issue #38 item 2): a clean two-rank job's trace store and rings,
// spoilt one place at a time (a byte flipped in each region-name and call-path frame of
// the store; each label field of the rings' records, string slots and call path slots
// overwritten with what no writer leaves), each judged by `analyze`, `check` against the
// clean run's baseline and `diff` with the clean run. Damaged labels are unknown, never a
// finding or a schedule change, and always said. In-process; single-threaded.
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/analyze_command.h"
#include "cli/schedule_commands.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "store/trace_store_format.h"
#include "tests/analyzer/damage_sweep_job.h"

namespace collwatch::damage_sweep_test {
namespace {

using namespace damage_sweep;  // NOLINT: the job's constants throughout

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <typename T>
void Put(std::string* bytes, uint64_t offset, T value) {
  std::memcpy(bytes->data() + offset, &value, sizeof value);
}

class DamageSweepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/collwatch-damage-sweep-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    rings_ = dir_ + "/rings";
    std::filesystem::create_directories(rings_);
    for (int32_t rank = 0; rank < 2; ++rank) {
      WriteRing(RingPath(rings_, rank), rank);
      StoreRing(RingPath(rings_, rank), dir_ + "/store");
    }
    store_ = JobTracesDir(dir_ + "/store", kJob);
    traces_ = ListRankTraces(dir_ + "/store", kJob);
    ASSERT_EQ(traces_.size(), 2u);
    // The clean copies the damaged ones are compared with (diff), and the baseline.
    std::filesystem::copy(rings_, dir_ + "/clean-rings");
    std::filesystem::copy(store_, dir_ + "/clean-store", std::filesystem::copy_options::recursive);
    baseline_ = dir_ + "/clean.baseline";
    std::ostringstream out, err;
    ASSERT_EQ(RunBaselineCommand({store_, baseline_}, out, err), kExitSame) << err.str();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // `path` (the rings or the store), spoilt as `what` says: no made-up finding, no
  // schedule change, and the damage said by each command.
  void ExpectDamageSaid(const std::string& path, const std::string& clean, const std::string& what) {
    ++judged_;
    std::ostringstream out, err;
    const int analyzed = RunAnalyzeCommand({path, /*json=*/true}, out, err);
    EXPECT_EQ(analyzed, kExitFindings) << what << ": a damaged run is never healthy\n" << out.str();
    const nlohmann::json report = nlohmann::json::parse(out.str(), nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(report.is_object()) << what << "\n" << out.str() << err.str();
    for (const nlohmann::json& finding : report["findings"]) {
      const std::string kind = finding.value("kind", "");
      EXPECT_TRUE(kind != "PATH_DIVERGENCE" && kind != "SIGNATURE_MISMATCH" && kind != "OP_MISMATCH" &&
                  kind != "SKIPPED_REDUCE_SCATTER")
          << what << ": a finding made of damage: " << finding.dump(1);
    }
    EXPECT_FALSE(report["data_gaps"].empty()) << what << ": the damage is not said\n" << out.str();

    std::ostringstream check_out, check_err;
    const int checked = RunCheckCommand({baseline_, path}, check_out, check_err);
    EXPECT_EQ(checked, kExitBadInput) << what << ": check\n" << check_out.str() << check_err.str();
    EXPECT_EQ(check_out.str().find("changes the collective schedule"), std::string::npos) << what;

    std::ostringstream diff_out, diff_err;
    const int diffed = RunDiffCommand({clean, path}, diff_out, diff_err);
    EXPECT_EQ(diffed, kExitBadInput) << what << ": diff\n" << diff_out.str() << diff_err.str();
  }

  // Each edit of `file` in turn (the file restored after each), judged on `path`.
  void Sweep(const std::string& file, const std::string& path, const std::string& clean,
             const std::vector<std::pair<std::string, std::function<void(std::string*)>>>& edits) {
    const std::string original = ReadBytes(file);
    for (const auto& [what, edit] : edits) {
      std::string bytes = original;
      edit(&bytes);
      ASSERT_NE(bytes, original) << what;
      WriteBytes(file, bytes);
      ExpectDamageSaid(path, clean, what);
      WriteBytes(file, original);
      if (HasFailure()) return;  // one position's story is enough to read
    }
  }

  std::string dir_, rings_, store_, baseline_;
  std::vector<std::string> traces_;
  int judged_ = 0;
};

TEST_F(DamageSweepTest, TheCleanJobIsHealthyAndKeepsItsSchedule) {
  for (const std::string& path : {rings_, store_}) {
    std::ostringstream out, err;
    EXPECT_EQ(RunAnalyzeCommand({path}, out, err), kExitOk) << out.str() << err.str();
    EXPECT_EQ(RunCheckCommand({baseline_, path}, out, err), kExitSame) << out.str() << err.str();
  }
  std::ostringstream out, err;
  EXPECT_EQ(RunDiffCommand({rings_, store_}, out, err), kExitSame) << out.str() << err.str();
}

TEST_F(DamageSweepTest, AByteFlippedInAnyRegionOrCallPathFrameOfTheStore) {
  for (const std::string& trace : traces_) {
    const std::string log = trace + "/" + store::kLogFileName;
    std::string bytes;
    absl::StatusOr<LogScan> scan = ScanFramedFile(log, store::kLogMagic, &bytes);
    ASSERT_TRUE(scan.ok()) << scan.status();
    std::vector<std::pair<std::string, std::function<void(std::string*)>>> edits;
    int frames = 0;
    for (const FrameInfo& frame : scan->frames) {
      if (frame.tag != store::kTagRegion && frame.tag != store::kTagCallPath) continue;
      ++frames;
      // The length, the checksum, the tag, the middle and the last byte of the frame.
      for (const uint64_t at : {uint64_t{0}, uint64_t{4}, uint64_t{8}, frame.length / 2, frame.length - 1}) {
        edits.emplace_back(absl::StrCat(log, ": frame at ", frame.offset, " (tag ", frame.tag, "), byte ", at, " flipped"),
                           [offset = frame.offset + at](std::string* b) { (*b)[offset] = static_cast<char>(~(*b)[offset]); });
      }
    }
    EXPECT_EQ(frames, 8) << "six region names and two call paths per rank";
    Sweep(log, store_, dir_ + "/clean-store", edits);
  }
  EXPECT_EQ(judged_, 2 * 8 * 5);
}

TEST_F(DamageSweepTest, RingRecordsWithImpossibleRegionOrCallPathIds) {
  for (int32_t rank = 0; rank < 2; ++rank) {
    std::vector<std::pair<std::string, std::function<void(std::string*)>>> edits;
    for (uint64_t index = 2; index < RecordCount(); ++index) {
      if (!IsCollectiveEnter(index)) continue;
      const uint64_t record = RecordOffset(index);
      for (const uint32_t id : {UINT32_MAX, kEmptyStringId, static_cast<uint32_t>(kStringCapacity + 1)}) {
        edits.emplace_back(absl::StrCat("rank ", rank, " record ", index, " region_id ", id),
                           [=](std::string* b) { Put(b, record + offsetof(ring::Record, region_id), id); });
      }
      for (const uint32_t id : {UINT32_MAX, kEmptyCallPathId}) {
        edits.emplace_back(absl::StrCat("rank ", rank, " record ", index, " call_path_id ", id),
                           [=](std::string* b) { Put(b, record + offsetof(ring::Record, call_path_id), id); });
      }
    }
    Sweep(RingPath(rings_, rank), rings_, dir_ + "/clean-rings", edits);
  }
  EXPECT_EQ(judged_, 2 * 16 * 5);
}

TEST_F(DamageSweepTest, RingStringSlotsWithImpossibleLengthsOrOverwrittenText) {
  for (int32_t rank = 0; rank < 2; ++rank) {
    std::vector<std::pair<std::string, std::function<void(std::string*)>>> edits;
    for (uint32_t id = 1; id <= Names().size(); ++id) {
      const uint64_t slot = StringSlotOffset(id);
      const auto length = static_cast<uint32_t>(Names()[id - 1].size());
      for (const uint32_t bad : {5000u, UINT32_MAX, ring::kMaxStringBytes + 1, length - 1}) {
        edits.emplace_back(absl::StrCat("rank ", rank, " string ", id, " length ", bad),
                           [=](std::string* b) { Put(b, slot + offsetof(ring::StringSlot, length), bad); });
      }
      for (const uint64_t at : {uint64_t{0}, uint64_t{length - 1}}) {
        edits.emplace_back(absl::StrCat("rank ", rank, " string ", id, " text byte ", at, " overwritten"),
                           [=](std::string* b) { (*b)[slot + offsetof(ring::StringSlot, text) + at] ^= 0x20; });
      }
    }
    Sweep(RingPath(rings_, rank), rings_, dir_ + "/clean-rings", edits);
  }
  EXPECT_EQ(judged_, 2 * 10 * 6);
}

TEST_F(DamageSweepTest, RingCallPathSlotsWithImpossibleFrameCountsOrFrameNames) {
  for (int32_t rank = 0; rank < 2; ++rank) {
    std::vector<std::pair<std::string, std::function<void(std::string*)>>> edits;
    for (uint32_t id = 1; id <= Paths().size(); ++id) {
      const uint64_t slot = CallPathSlotOffset(id);
      for (const uint16_t count : {uint16_t{65535}, static_cast<uint16_t>(ring::kMaxCallPathFrames + 1)}) {
        edits.emplace_back(absl::StrCat("rank ", rank, " call path ", id, " frame_count ", count),
                           [=](std::string* b) { Put(b, slot + offsetof(ring::CallPathSlot, frame_count), count); });
      }
      for (size_t frame = 0; frame < Paths()[id - 1].size(); ++frame) {
        const uint64_t at = slot + offsetof(ring::CallPathSlot, frames) + frame * sizeof(ring::CallPathFrame);
        for (const size_t field : {offsetof(ring::CallPathFrame, file_id), offsetof(ring::CallPathFrame, function_id)}) {
          for (const uint32_t bad : {UINT32_MAX, kEmptyStringId}) {
            edits.emplace_back(absl::StrCat("rank ", rank, " call path ", id, " frame ", frame, " name field ", field,
                                            " = ", bad),
                               [=](std::string* b) { Put(b, at + field, bad); });
          }
        }
      }
    }
    Sweep(RingPath(rings_, rank), rings_, dir_ + "/clean-rings", edits);
  }
  EXPECT_EQ(judged_, 2 * 2 * 10);
}

}  // namespace
}  // namespace collwatch::damage_sweep_test
