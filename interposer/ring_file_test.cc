// Ring files and folders: a ring and its folder private to their user whatever the umask,
// files that are not rings refused with clear errors (and offsets that would wrap), and a
// folder that is unwritable, open to others, another user's, a symlink, in a shared parent
// without the sticky bit, or a ring over the file size limit: no ring, and the job runs on.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "interposer/ring_test_support.h"
#include "interposer/ring_writer.h"
#include "ring/ring_leftovers.h"
#include "ring/ring_directory.h"
#include "ring/ring_reader.h"

namespace collwatch {
namespace {


TEST_F(RingTest, RingFileIsPrivateToItsUser) {
  std::unique_ptr<RingWriter> writer = RingWriter::Create(ConfigWith(64));
  ASSERT_NE(writer, nullptr);
  struct stat dir_info {};
  struct stat file_info {};
  ASSERT_EQ(stat((dir_ + "/rings").c_str(), &dir_info), 0);
  ASSERT_EQ(stat(OnlyRing().c_str(), &file_info), 0);
  EXPECT_EQ(dir_info.st_mode & 0777, 0700u);
  EXPECT_EQ(file_info.st_mode & 0777, 0600u);
}

TEST_F(RingTest, FilesThatAreNotRingsGetClearErrors) {
  // Empty, or sized but without its header yet: a writer still creating it (retry).
  const std::string empty = dir_ + "/empty.ring";
  std::ofstream(empty).close();
  auto opened = RingReader::Open(empty);
  ASSERT_FALSE(opened.ok());
  EXPECT_TRUE(absl::IsUnavailable(opened.status())) << opened.status();
  EXPECT_NE(opened.status().message().find("not ready"), std::string::npos);
  const std::string zeros = dir_ + "/zeros.ring";
  std::ofstream(zeros) << std::string(8192, '\0');
  opened = RingReader::Open(zeros);
  EXPECT_TRUE(absl::IsUnavailable(opened.status())) << opened.status();

  const std::string short_file = dir_ + "/short.ring";
  std::ofstream(short_file) << std::string(100, 'x');
  opened = RingReader::Open(short_file);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("less than a header"), std::string::npos);

  const std::string garbage = dir_ + "/garbage.ring";
  std::ofstream(garbage) << std::string(8192, 'x');
  opened = RingReader::Open(garbage);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("wrong magic"), std::string::npos);

  std::unique_ptr<RingWriter> writer = RingWriter::Create(ConfigWith(64));
  ASSERT_NE(writer, nullptr);
  const std::string good = OnlyRing();
  const std::string truncated = dir_ + "/truncated.ring";
  std::filesystem::copy_file(good, truncated);
  std::filesystem::resize_file(truncated, 4096 + 100);
  opened = RingReader::Open(truncated);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("truncated"), std::string::npos);

  EXPECT_FALSE(RingReader::Open(dir_ + "/missing.ring").ok());
}

// Found writing the ring fuzzer: an offset near 2^64 made `offset + size` wrap below the
// file's size, and the reader then read outside its mapping.
TEST_F(RingTest, OffsetsThatWrapAroundAreRefused) {
  std::unique_ptr<RingWriter> writer = RingWriter::Create(ConfigWith(64));
  ASSERT_NE(writer, nullptr);
  const std::string good = OnlyRing();
  for (const size_t field : {offsetof(ring::Header, lanes_offset), offsetof(ring::Header, strings_offset)}) {
    const std::string damaged = dir_ + "/wrapped.ring";
    std::filesystem::copy_file(good, damaged, std::filesystem::copy_options::overwrite_existing);
    std::fstream file(damaged, std::ios::in | std::ios::out | std::ios::binary);
    const uint64_t offset = UINT64_MAX - 127;  // a multiple of 64 that wraps past the end
    file.seekp(static_cast<std::streamoff>(field));
    file.write(reinterpret_cast<const char*>(&offset), sizeof offset);
    file.close();
    auto opened = RingReader::Open(damaged);
    ASSERT_FALSE(opened.ok()) << field;
    EXPECT_NE(opened.status().message().find("inconsistent header: its 4 lanes of"), std::string::npos)
        << opened.status();
  }
}

// A lane count made larger in a ring of the right size: the error names the lanes that do
// not fit (it said "header says 17305856 bytes, file has 17305856").
TEST_F(RingTest, ALaneCountThatDoesNotFitIsNamed) {
  std::unique_ptr<RingWriter> writer = RingWriter::Create(ConfigWith(64));
  ASSERT_NE(writer, nullptr);
  const std::string damaged = dir_ + "/lanes.ring";
  std::filesystem::copy_file(OnlyRing(), damaged);
  std::fstream file(damaged, std::ios::in | std::ios::out | std::ios::binary);
  const uint32_t lanes = 17;
  file.seekp(static_cast<std::streamoff>(offsetof(ring::Header, lane_count)));
  file.write(reinterpret_cast<const char*>(&lanes), sizeof lanes);
  file.close();
  const auto opened = RingReader::Open(damaged);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("inconsistent header: its 17 lanes of"), std::string::npos)
      << opened.status();
  EXPECT_EQ(opened.status().message().find("header says"), std::string::npos) << opened.status();
}

TEST_F(RingTest, UnwritableFolderDisablesInsteadOfFailing) {
  Config config = ConfigWith(64);
  std::snprintf(config.ring_dir, sizeof config.ring_dir, "/proc/collwatch-cannot-exist");
  EXPECT_EQ(RingWriter::Create(config), nullptr);
}


// A folder's safety verdict, and that RingWriter::Create then writes nothing anywhere.
class RingFolderSafetyTest : public RingTest {
 protected:
  std::string Rings() const { return dir_ + "/rings"; }
  RingDirVerdict Verdict(const std::string& path) const {
    const RingDirCheck check = OpenPrivateRingDir(path.c_str(), /*create=*/false);
    if (check.fd >= 0) close(check.fd);
    return check.verdict;
  }
  // Create refuses, and leaves `watched` (a folder) as empty as it found it.
  void ExpectRefusedAndNothingWritten(const std::string& watched) {
    EXPECT_EQ(RingWriter::Create(ConfigWith(64)), nullptr);
    EXPECT_TRUE(std::filesystem::is_empty(watched)) << watched << " was written into";
  }
};

TEST_F(RingFolderSafetyTest, FreshFolderIsPrivateAndRingIsPrivateWhateverTheUmask) {
  const mode_t previous = umask(0);  // the job's umask must not widen our modes
  std::unique_ptr<RingWriter> writer = RingWriter::Create(ConfigWith(64));
  umask(previous);
  ASSERT_NE(writer, nullptr);
  struct stat dir_info {};
  struct stat file_info {};
  ASSERT_EQ(lstat(Rings().c_str(), &dir_info), 0);
  ASSERT_EQ(lstat(OnlyRing().c_str(), &file_info), 0);
  EXPECT_TRUE(S_ISDIR(dir_info.st_mode));
  EXPECT_EQ(dir_info.st_mode & 07777, 0700u);
  EXPECT_EQ(dir_info.st_uid, geteuid());
  EXPECT_TRUE(S_ISREG(file_info.st_mode));
  EXPECT_EQ(file_info.st_mode & 07777, 0600u);
  EXPECT_EQ(file_info.st_uid, geteuid());
  EXPECT_EQ(Verdict(Rings()), RingDirVerdict::kPrivate);
}

// Someone created the folder first, with modes that let others read or plant rings.
TEST_F(RingFolderSafetyTest, FolderOpenToOthersIsRefused) {
  for (mode_t mode : {0755, 0750, 0770, 0777, 01777, 0701}) {
    std::filesystem::remove_all(Rings());
    ASSERT_EQ(mkdir(Rings().c_str(), 0700), 0);
    ASSERT_EQ(chmod(Rings().c_str(), mode), 0);
    EXPECT_EQ(Verdict(Rings()), RingDirVerdict::kTooOpen) << std::oct << mode;
    ExpectRefusedAndNothingWritten(Rings());
  }
}

// Another user's folder at our path. Root can make one (a folder given to nobody);
// anyone else finds one in "/", which root owns.
TEST_F(RingFolderSafetyTest, FolderOwnedByAnotherUserIsRefused) {
  if (geteuid() == 0) {
    ASSERT_EQ(mkdir(Rings().c_str(), 0700), 0);
    ASSERT_EQ(chown(Rings().c_str(), 65534, 65534), 0);
    EXPECT_EQ(Verdict(Rings()), RingDirVerdict::kForeignOwner);
    ExpectRefusedAndNothingWritten(Rings());
  } else {
    EXPECT_EQ(Verdict("/"), RingDirVerdict::kForeignOwner);
    Config config = ConfigWith(64);
    std::snprintf(config.ring_dir, sizeof config.ring_dir, "/");
    EXPECT_EQ(RingWriter::Create(config), nullptr);
  }
}

// A symlink planted where the folder should be (as another user could in /dev/shm) is
// never followed, even when it points at a private folder of ours.
TEST_F(RingFolderSafetyTest, SymlinkAtTheFolderPathIsNotFollowed) {
  const std::string target = dir_ + "/target";
  ASSERT_EQ(mkdir(target.c_str(), 0700), 0);
  ASSERT_EQ(symlink(target.c_str(), Rings().c_str()), 0);
  EXPECT_EQ(Verdict(Rings()), RingDirVerdict::kNotADirectory);
  ExpectRefusedAndNothingWritten(target);
  // A plain file there is refused the same way.
  std::filesystem::remove(Rings());
  std::ofstream(Rings()) << "not a folder";
  EXPECT_EQ(Verdict(Rings()), RingDirVerdict::kNotADirectory);
  EXPECT_EQ(RingWriter::Create(ConfigWith(64)), nullptr);
}

// In a parent others may write without the sticky bit, our folder could be swapped for
// theirs after the check; a sticky one (like /dev/shm and /tmp) is fine.
TEST_F(RingFolderSafetyTest, SharedParentMustBeSticky) {
  ASSERT_EQ(chmod(dir_.c_str(), 0777), 0);
  EXPECT_EQ(Verdict(Rings()), RingDirVerdict::kUnsafeParent);
  EXPECT_EQ(RingWriter::Create(ConfigWith(64)), nullptr);
  EXPECT_FALSE(std::filesystem::exists(Rings()));
  ASSERT_EQ(chmod(dir_.c_str(), 01777), 0);
  EXPECT_NE(RingWriter::Create(ConfigWith(64)), nullptr);
  EXPECT_EQ(Verdict(Rings()), RingDirVerdict::kPrivate);
  ASSERT_EQ(chmod(dir_.c_str(), 0700), 0);
}

// A ring larger than the file size limit (ulimit -f) would earn the job a SIGXFSZ,
// which kills it: no ring instead. The test process itself would die if it were made.
TEST_F(RingFolderSafetyTest, RingOverTheFileSizeLimitIsNotCreated) {
  rlimit previous{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &previous), 0);
  rlimit low = previous;
  low.rlim_cur = 1 << 20;  // the ring below needs 4 lanes x 32768 x 128 bytes
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &low), 0);
  std::unique_ptr<RingWriter> writer = RingWriter::Create(ConfigWith(1u << 15));
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &previous), 0);
  EXPECT_EQ(writer, nullptr);
  EXPECT_TRUE(ListRingFiles(Rings())->empty());
  // The note the report reads instead: who had no ring, and why.
  const std::vector<NoRingNoteRead> notes = ListNoRingNotes(Rings());
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].pid, getpid());
  EXPECT_NE(notes[0].why.find("ulimit -f"), std::string::npos) << notes[0].why;
}

}  // namespace
}  // namespace collwatch

// Ring sizing from the folder's free space (SizeRing).
namespace collwatch {
namespace {

TEST(RingSizeTest, PlentyOfSpaceKeepsTheDefault) {
  const Config config;
  const RingGeometry geometry = SizeRing(config, 64ull << 30);
  EXPECT_TRUE(geometry.fits);
  EXPECT_EQ(geometry.lane_capacity, config.ring_records);
  EXPECT_EQ(geometry.string_capacity, ring::kDefaultStringCapacity);
  EXPECT_EQ(geometry.bytes, ring::RingFileBytes(config.ring_lanes, config.ring_records, ring::kDefaultStringCapacity,
                                                ring::kDefaultCallPathCapacity));
}

TEST(RingSizeTest, LittleSpaceShrinksTheRingToAShareOfItDownToTheFloor) {
  const Config config;
  const uint64_t free_bytes = 30ull << 20;  // a 30 MiB /dev/shm: 4 default rings would not fit
  const RingGeometry geometry = SizeRing(config, free_bytes);
  EXPECT_TRUE(geometry.fits);
  EXPECT_LE(geometry.bytes, free_bytes / kFreeSpaceShare);
  EXPECT_GE(geometry.lane_capacity, kFloorLaneRecords);
  EXPECT_EQ(geometry.lane_capacity & (geometry.lane_capacity - 1), 0u) << "a power of two";

  // Under the floor's share, the floor itself while it fits.
  const RingGeometry floor = SizeRing(config, 2ull << 20);
  EXPECT_TRUE(floor.fits);
  EXPECT_EQ(floor.lane_capacity, kFloorLaneRecords);
  EXPECT_EQ(floor.bytes, floor.floor_bytes);

  const RingGeometry none = SizeRing(config, floor.floor_bytes - 1);
  EXPECT_FALSE(none.fits);
  EXPECT_EQ(none.floor_bytes, floor.floor_bytes);
}

TEST(RingSizeTest, RecordsTheUserSetAreKept) {
  Config config;
  config.ring_records = 1u << 14;
  config.ring_records_set = true;
  const RingGeometry geometry = SizeRing(config, 30ull << 20);
  EXPECT_EQ(geometry.lane_capacity, 1u << 14);
  EXPECT_EQ(geometry.string_capacity, ring::kDefaultStringCapacity);
  EXPECT_FALSE(SizeRing(config, 1u << 20).fits);
}

}  // namespace
}  // namespace collwatch
