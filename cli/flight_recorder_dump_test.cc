// Asking a Flight Recorder for its dump: which pipe and files a rank's environment names
// (newer names first, both defaults when no prefix is set); a byte goes only into a FIFO
// with a reader, never blocking; the wait ends as soon as the dump is written, at once when
// nothing was asked, and an older dump at the path is not taken for the new one.
#include "cli/flight_recorder_dump.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "tests/support/test_time.h"

namespace collwatch {
namespace {

std::string Environment(std::initializer_list<std::string> entries) {
  std::string block;
  for (const std::string& entry : entries) block += entry + '\0';
  return block;
}

class FlightRecorderDumpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("flight-recorder-dump-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

// A reader of a FIFO as PyTorch's monitor thread is: open read-only and non-blocking,
// polled; on a byte it writes `dump` (when given).
class FakeReader {
 public:
  FakeReader(const std::string& pipe, std::string dump) {
    EXPECT_EQ(mkfifo(pipe.c_str(), 0600), 0);
    fd_ = open(pipe.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    EXPECT_GE(fd_, 0);
    thread_ = std::thread([this, dump = std::move(dump)] {
      while (!stop_) {
        char bytes[16];
        if (const ssize_t got = read(fd_, bytes, sizeof bytes); got > 0) {
          bytes_ += static_cast<int>(got);
          if (!dump.empty()) std::ofstream(dump) << "entries\n";
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  ~FakeReader() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  int bytes() const { return bytes_; }

 private:
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<int> bytes_{0};
  std::thread thread_;
};

TEST_F(FlightRecorderDumpTest, NamesThePipeAndTheDumpFromTheEnvironment) {
  EXPECT_FALSE(FlightRecorderDumpOf(7, 0, Environment({"RANK=0", "TORCH_NCCL_DEBUG_INFO_PIPE_FILE="})).has_value());
  const std::optional<FlightRecorderDump> dump = FlightRecorderDumpOf(
      7, 3,
      Environment({"TORCH_NCCL_DEBUG_INFO_PIPE_FILE=/old/p_", "TORCH_FR_DEBUG_INFO_PIPE_FILE=/new/p_",
                   "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/old/d_", "TORCH_FR_DUMP_TEMP_FILE=/new/d_"}));
  ASSERT_TRUE(dump.has_value());
  EXPECT_EQ(dump->pid, 7);
  EXPECT_EQ(dump->rank, 3);
  EXPECT_EQ(dump->pipe, "/new/p_3.pipe") << "PyTorch takes the newer name first";
  EXPECT_EQ(dump->files, std::vector<std::string>{"/new/d_3"});
  const std::optional<FlightRecorderDump> older =
      FlightRecorderDumpOf(7, 12, Environment({"TORCH_NCCL_DEBUG_INFO_PIPE_FILE=/old/p_", "HOME=/home/u"}));
  ASSERT_TRUE(older.has_value());
  EXPECT_EQ(older->pipe, "/old/p_12.pipe");
  EXPECT_EQ(older->files,
            (std::vector<std::string>{"/home/u/.cache/torch/comm_lib_trace_rank_12", "/tmp/nccl_trace_rank_12"}))
      << "no prefix: both of PyTorch's defaults";
}

TEST_F(FlightRecorderDumpTest, PokesOnlyAFifoThatHasAReader) {
  EXPECT_NE(PokeDumpPipe(Path("missing.pipe")).find("no pipe there"), std::string::npos);
  std::ofstream(Path("file.pipe")) << "kept";
  EXPECT_NE(PokeDumpPipe(Path("file.pipe")).find("not a FIFO"), std::string::npos);
  std::ifstream file(Path("file.pipe"));
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(file), {}), "kept");
  ASSERT_EQ(mkfifo(Path("unread.pipe").c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(PokeDumpPipe(Path("unread.pipe")), "nobody reads it");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::duration<double>(testing::Scaled(5)))
      << "never waits for a reader";
  std::filesystem::create_symlink(Path("unread.pipe"), Path("link.pipe"));
  EXPECT_NE(PokeDumpPipe(Path("link.pipe")).find("not a FIFO"), std::string::npos);

  FakeReader reader(Path("read.pipe"), "");
  EXPECT_EQ(PokeDumpPipe(Path("read.pipe")), "");
  for (int i = 0; i < 100 && reader.bytes() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(reader.bytes(), 1);
}

TEST_F(FlightRecorderDumpTest, WaitsUntilTheDumpIsWrittenAndNamesIt) {
  FakeReader reader(Path("p_0.pipe"), Path("d_0"));
  std::vector<FlightRecorderDump> dumps(1);
  dumps[0].rank = 0;
  dumps[0].pipe = Path("p_0.pipe");
  dumps[0].files = {Path("d_0")};
  const auto start = std::chrono::steady_clock::now();
  AskFlightRecorderDumps(60, &dumps);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::duration<double>(testing::Scaled(5)))
      << "returns once written, not at the 60 s limit";
  EXPECT_TRUE(dumps[0].asked());
  EXPECT_EQ(dumps[0].file, Path("d_0"));
  EXPECT_FALSE(dumps[0].still_growing);
  EXPECT_NE(FlightRecorderDumpText(dumps[0]).find(Path("d_0")), std::string::npos);
}

TEST_F(FlightRecorderDumpTest, AnOlderDumpIsNotTheOneAskedFor) {
  std::ofstream(Path("d_1")) << "an older dump";
  FakeReader reader(Path("p_1.pipe"), "");  // reads the byte, writes nothing
  std::vector<FlightRecorderDump> dumps(1);
  dumps[0].rank = 1;
  dumps[0].pipe = Path("p_1.pipe");
  dumps[0].files = {Path("d_1")};
  const auto start = std::chrono::steady_clock::now();
  AskFlightRecorderDumps(0.5, &dumps);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(450)) << "waited for it";
  EXPECT_TRUE(dumps[0].asked());
  EXPECT_FALSE(dumps[0].written());
  EXPECT_NE(FlightRecorderDumpText(dumps[0]).find("none written"), std::string::npos);
}

TEST_F(FlightRecorderDumpTest, NothingAskedMeansNoWait) {
  std::vector<FlightRecorderDump> dumps(1);
  dumps[0].rank = 0;
  dumps[0].pipe = Path("nothing_0.pipe");
  dumps[0].files = {Path("d_0")};
  const auto start = std::chrono::steady_clock::now();
  AskFlightRecorderDumps(60, &dumps);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::duration<double>(testing::Scaled(5)))
      << "no wait, not the 60 s limit";
  EXPECT_FALSE(dumps[0].asked());
  EXPECT_NE(FlightRecorderDumpText(dumps[0]).find("not asked for"), std::string::npos);
}

}  // namespace
}  // namespace collwatch
