// The parts of the dashboard's terminal handling that need no terminal: the job's log
// (truncated, close-on-exec), its tail printed after the run, and collwatch's own stderr
// set aside while the screen is up and given back, replayed, after. (The screen itself
// is tested in tests/dashboard.)
#include "cli/run_dashboard.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/run_test_support.h"
#include "gtest/gtest.h"

namespace collwatch {
namespace {

using testing::ReadFile;
using testing::TempPath;
using testing::WaitForExit;

TEST(OpenJobLog, TruncatesAndIsNotInheritedAcrossExec) {
  const std::string path = TempPath("job.log");
  std::ofstream(path) << "an old run's output\n";
  const int fd = OpenJobLog(path);
  ASSERT_GE(fd, 0);
  EXPECT_NE(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
  ASSERT_EQ(write(fd, "new\n", 4), 4);
  close(fd);
  EXPECT_EQ(ReadFile(path), "new\n");
  std::filesystem::remove(path);
  EXPECT_LT(OpenJobLog("/nonexistent/folder/job.log"), 0);
}

TEST(PrintJobLogTail, WhereTheOutputIsThenItsLastLines) {
  const std::string path = TempPath("tail.log");
  std::ofstream(path) << "one\ntwo\nthree\nfour\n";
  std::ostringstream err;
  PrintJobLogTail(path, 2, err);
  EXPECT_EQ(err.str(), "collwatch run: the job's output is in " + path + "; its end:\n  three\n  four\n");
  std::ostringstream all;
  PrintJobLogTail(path, 10, all);
  EXPECT_EQ(all.str(), "collwatch run: the job's output is in " + path + "; its end:\n  one\n  two\n  three\n  four\n");
  std::filesystem::remove(path);
}

TEST(PrintJobLogTail, EmptyOrMissingLogSaysSo) {
  const std::string path = TempPath("empty.log");
  std::ofstream(path).close();
  std::ostringstream err;
  PrintJobLogTail(path, 10, err);
  EXPECT_EQ(err.str(), "collwatch run: the job's output is in " + path + " (empty)\n");
  std::filesystem::remove(path);
}

TEST(StderrAside, MessagesGoToTheFileThenBackToStderrAndTheFileGoes) {
  const std::string path = TempPath("messages");
  ::testing::internal::CaptureStderr();  // stands for the terminal
  {
    StderrAside aside(path);
    const char message[] = "collwatch agent: rank 1 died\n";
    ASSERT_EQ(write(STDERR_FILENO, message, std::strlen(message)), static_cast<ssize_t>(std::strlen(message)));
    std::cerr << "through std::cerr\n";
    std::cerr.flush();
    EXPECT_EQ(ReadFile(path), "collwatch agent: rank 1 died\nthrough std::cerr\n");
  }
  std::cerr << "after\n";
  const std::string terminal = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(terminal, "collwatch agent: rank 1 died\nthrough std::cerr\nafter\n");
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(StderrAside, NothingSetAsideWhenTheFileCannotBeMade) {
  ::testing::internal::CaptureStderr();
  {
    StderrAside aside("/nonexistent/folder/messages");
    std::cerr << "straight through\n";
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "straight through\n");
}

}  // namespace
}  // namespace collwatch
