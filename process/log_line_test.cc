// Stamped log lines as they reach stderr (a file here): every line of a message carries
// the UTC time and the host, and --quiet drops only the informational ones.
// Threading: single-threaded test code.
#include "process/log_line.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "process/process_sample.h"

namespace collwatch {
namespace {

// What `write` puts on stderr, read back from a file standing in for it.
template <typename Write>
std::string CaptureStderr(Write write) {
  char path[] = "/tmp/collwatch-log-line-XXXXXX";
  const int file = mkstemp(path);
  const int saved = dup(STDERR_FILENO);
  dup2(file, STDERR_FILENO);
  write();
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(file);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  unlink(path);
  return text.str();
}

TEST(LogLineTest, EveryLineOfAMessageCarriesTheTimeAndTheHost) {
  const std::string written = CaptureStderr([] {
    LogLine(LogLevel::kFinding, "collwatch collector") << "finding: rank 1 never joined\nsecond line" << 42 << "\n";
  });
  const std::string stamp = "\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z " + ThisHostName();
  EXPECT_TRUE(std::regex_match(written, std::regex(stamp + " collwatch collector: finding: rank 1 never joined\n" + stamp +
                                                   " collwatch collector: second line42\n")))
      << written;
}

TEST(LogLineTest, QuietKeepsFindingsAndErrorsOnly) {
  const std::string written = CaptureStderr([] {
    SetQuietLog(true);
    LogLine(LogLevel::kInfo, "collwatch agent") << "rank 3 exited";
    LogLine(LogLevel::kError, "collwatch agent") << "collector unreachable";
    LogLine(LogLevel::kFinding, "collwatch") << "NOT_JOINED";
    SetQuietLog(false);
    LogLine(LogLevel::kInfo, "collwatch agent") << "loud again";
  });
  EXPECT_EQ(written.find("rank 3 exited"), std::string::npos) << written;
  EXPECT_NE(written.find("collwatch agent: collector unreachable\n"), std::string::npos) << written;
  EXPECT_NE(written.find("collwatch: NOT_JOINED\n"), std::string::npos) << written;
  EXPECT_NE(written.find("collwatch agent: loud again\n"), std::string::npos) << written;
}

}  // namespace
}  // namespace collwatch
