// Safe reads and writes against what may stand at a path: FIFOs, devices, folders, links
// planted by another user, a full disk and a file-size limit.
#include "files/safe_files.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "gtest/gtest.h"
#include "tests/support/test_time.h"

namespace collwatch {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

class SafeFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/collwatch-safe-files-XXXXXX";
    dir_ = mkdtemp(pattern);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  // The folder's entries: a failed write leaves no temporary behind.
  size_t Entries() const { return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), {})); }

  std::string dir_;
};

TEST_F(SafeFilesTest, ReadsARegularFileWithinItsBound) {
  std::ofstream(Path("a")) << "hello";
  EXPECT_EQ(ReadRegularFile(Path("a"), 5).value_or("?"), "hello");
  const absl::StatusOr<std::string> long_file = ReadRegularFile(Path("a"), 4);
  ASSERT_FALSE(long_file.ok());
  EXPECT_NE(long_file.status().message().find("5 bytes, more than the 4"), std::string::npos) << long_file.status();
  const absl::StatusOr<std::string> missing = ReadRegularFile(Path("none"), 10);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("no such file"), std::string::npos) << missing.status();
}

// A FIFO nobody writes, /dev/zero and a folder are errors at once: no wait, no endless read.
TEST_F(SafeFilesTest, AFifoADeviceOrAFolderIsRefusedAtOnce) {
  ASSERT_EQ(mkfifo(Path("fifo").c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  const absl::StatusOr<std::string> fifo = ReadRegularFile(Path("fifo"), 1 << 20);
  const absl::StatusOr<std::string> zero = ReadRegularFile("/dev/zero", 1 << 20);
  const absl::StatusOr<std::string> folder = ReadRegularFile(dir_, 1 << 20);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::duration<double>(testing::Scaled(5)));
  EXPECT_NE(fifo.status().message().find("is a FIFO, not a regular file"), std::string::npos) << fifo.status();
  EXPECT_NE(zero.status().message().find("is a character device, not a regular file"), std::string::npos)
      << zero.status();
  EXPECT_NE(folder.status().message().find("is a folder"), std::string::npos) << folder.status();
}

TEST_F(SafeFilesTest, PermissionDeniedIsSaidSo) {
  if (geteuid() == 0) GTEST_SKIP() << "root reads every file";
  std::ofstream(Path("secret")) << "x";
  chmod(Path("secret").c_str(), 0);
  const absl::StatusOr<std::string> read = ReadRegularFile(Path("secret"), 10);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(read.status().message().find("permission denied"), std::string::npos) << read.status();
}

TEST_F(SafeFilesTest, WritesAndReplacesWholeKeepingTheMode) {
  ASSERT_TRUE(WriteFileReplacing(Path("out.json"), "first").ok());
  EXPECT_EQ(Slurp(Path("out.json")), "first");
  chmod(Path("out.json").c_str(), 0600);
  ASSERT_TRUE(WriteFileReplacing(Path("out.json"), "second").ok());
  EXPECT_EQ(Slurp(Path("out.json")), "second");
  EXPECT_EQ(fs::status(Path("out.json")).permissions(), fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(Entries(), 1u) << "no temporary left";
}

// Another user's links in a shared folder: one under the old temporary's name, one at the
// target itself. Neither's target is touched.
TEST_F(SafeFilesTest, PlantedLinksRedirectNothing) {
  std::ofstream(Path("victim")) << "precious";
  fs::create_symlink(Path("victim"), Path("x.json.tmp"));
  ASSERT_TRUE(WriteFileReplacing(Path("x.json"), "report").ok());
  EXPECT_EQ(Slurp(Path("x.json")), "report");
  EXPECT_EQ(Slurp(Path("victim")), "precious");

  fs::create_symlink(Path("victim"), Path("y.json"));
  const absl::Status through_link = WriteFileReplacing(Path("y.json"), "report");
  EXPECT_FALSE(through_link.ok());
  EXPECT_NE(through_link.message().find("is a symbolic link"), std::string::npos) << through_link;
  EXPECT_EQ(Slurp(Path("victim")), "precious");
  EXPECT_TRUE(fs::is_symlink(Path("y.json")));
}

TEST_F(SafeFilesTest, DevicesAreWrittenAsDevicesNeverReplaced) {
  EXPECT_TRUE(WriteFileReplacing("/dev/null", "discarded").ok());
  const absl::Status full = WriteFileReplacing("/dev/full", "no room");
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("cannot write /dev/full: no space left on device"), std::string::npos) << full;
  EXPECT_TRUE(fs::is_character_file("/dev/full"));

  fs::create_directory(Path("folder"));
  EXPECT_NE(WriteFileReplacing(Path("folder"), "x").message().find("is a folder; not replaced"), std::string::npos);
}

TEST_F(SafeFilesTest, AFifoIsWrittenToItsReaderAndRefusedWithoutOne) {
  ASSERT_EQ(mkfifo(Path("fifo").c_str(), 0600), 0);
  const absl::Status nobody = WriteFileReplacing(Path("fifo"), "x");
  EXPECT_NE(nobody.message().find("is a FIFO nobody reads"), std::string::npos) << nobody;
  EXPECT_TRUE(fs::is_fifo(Path("fifo")));

  std::string received;
  std::thread reader([&] { received = Slurp(Path("fifo")); });
  absl::Status written = absl::UnknownError("reader never opened");
  for (int attempt = 0; attempt < 500 && !written.ok(); ++attempt) {  // until the reader has it open
    written = WriteFileReplacing(Path("fifo"), "to the reader");
    if (!written.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  reader.join();
  EXPECT_TRUE(written.ok()) << written;
  EXPECT_EQ(received, "to the reader");
}

// Written as it is made: several times the buffer, in pieces, through the same temporary;
// dropped without a Commit, the old file stays and no temporary is left.
TEST_F(SafeFilesTest, AReplacingFileIsWrittenInPiecesAndPutInPlaceOnlyByCommit) {
  ASSERT_TRUE(WriteFileReplacing(Path("trace.json"), "old").ok());
  {
    absl::StatusOr<std::unique_ptr<ReplacingFile>> dropped = ReplacingFile::Open(Path("trace.json"));
    ASSERT_TRUE(dropped.ok()) << dropped.status();
    (*dropped)->stream() << std::string(200'000, 'x');
    EXPECT_EQ(Entries(), 2u);  // the file and the temporary
  }
  EXPECT_EQ(Slurp(Path("trace.json")), "old");
  EXPECT_EQ(Entries(), 1u);

  absl::StatusOr<std::unique_ptr<ReplacingFile>> file = ReplacingFile::Open(Path("trace.json"));
  ASSERT_TRUE(file.ok()) << file.status();
  std::string expected;
  for (int piece = 0; piece < 10'000; ++piece) {
    const std::string line = "piece " + std::to_string(piece) + "\n";
    (*file)->stream() << line;
    expected += line;
  }
  EXPECT_EQ(Slurp(Path("trace.json")), "old");  // until Commit
  ASSERT_TRUE((*file)->Commit().ok());
  EXPECT_EQ(Slurp(Path("trace.json")), expected);
  EXPECT_EQ(Entries(), 1u);
  EXPECT_FALSE((*file)->Commit().ok());  // once only

  absl::StatusOr<std::unique_ptr<ReplacingFile>> full = ReplacingFile::Open("/dev/full");
  ASSERT_TRUE(full.ok()) << full.status();
  (*full)->stream() << std::string(100'000, 'x');
  EXPECT_TRUE((*full)->stream().bad());
  const absl::Status no_room = (*full)->Commit();
  EXPECT_NE(no_room.message().find("cannot write /dev/full: no space left on device"), std::string::npos) << no_room;
}

// Past the file-size limit (ulimit -f) a write fails with EFBIG (SIGXFSZ ignored, as
// collwatch does): the old file stays whole and no temporary is left.
TEST_F(SafeFilesTest, AFileSizeLimitIsAWriteErrorThatKeepsTheOldFile) {
  ASSERT_TRUE(WriteFileReplacing(Path("baseline"), "old").ok());
  rlimit saved{};
  getrlimit(RLIMIT_FSIZE, &saved);
  sighandler_t previous = signal(SIGXFSZ, SIG_IGN);
  rlimit small = saved;
  small.rlim_cur = 100;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const absl::Status status = WriteFileReplacing(Path("baseline"), std::string(1000, 'x'));
  setrlimit(RLIMIT_FSIZE, &saved);
  signal(SIGXFSZ, previous);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(status.message().find("file too large"), std::string::npos) << status;
  EXPECT_EQ(Slurp(Path("baseline")), "old");
  EXPECT_EQ(Entries(), 1u);
}

}  // namespace
}  // namespace collwatch
