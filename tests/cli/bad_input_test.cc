// The collwatch command under a careless or hostile user's input (#25): each case exits
// with a clear message within a time bound, never crashes, hangs or writes where it must
// not. The library-level cases (FIFOs among traces, planted links under outputs, two
// collectors on one store) are in files/, cli/ and collector/ tests.
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/read_files.h"
#include "tests/support/run_env.h"
#include "tests/support/subprocess.h"

namespace collwatch {
namespace {

using ::testing::HasSubstr;
using testing::ReadFile;
using testing::Subprocess;
using testing::TempDir;

struct Outcome {
  int exit_code = -1;
  std::string err;
  double seconds = 0;
};

// `collwatch ARGS...` with `env` added, its standard error kept; killed after 30 s.
Outcome Collwatch(const TempDir& dir, const std::vector<std::string>& args,
                  const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> argv = {COLLWATCH_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string err_path = dir.path() + "/stderr";
  const auto start = std::chrono::steady_clock::now();
  Subprocess cli(argv, testing::CollwatchRunEnv(env), dir.path() + "/stdout", err_path);
  Outcome outcome;
  outcome.exit_code = cli.Wait(30);
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  outcome.err = ReadFile(err_path);
  return outcome;
}

// Numbers outside what an option means, NaN among them, are refused before anything starts.
TEST(BadInputTest, NumericOptionsOutOfRangeAreRefusedNamingTheRange) {
  TempDir dir;
  const struct {
    std::vector<std::string> args;
    std::string words;
  } cases[] = {
      {{"analyze", "--stall-after", "-5", "x"}, "--stall-after: -5 is out of range: give a number from 0.001 to 1000000"},
      {{"analyze", "--stall-after", "0", "x"}, "--stall-after: 0 is out of range"},
      {{"analyze", "--stall-after", "nan", "x"}, "--stall-after: 'nan' is not a number from 0.001 to 1000000"},
      {{"run", "--stall-after", "inf", "--", "true"}, "--stall-after: 'inf' is not a number"},
      {{"collector", "--max-message-bytes", "0"}, "--max-message-bytes: 0 is out of range"},
      {{"collector", "--max-message-bytes", "-1"}, "--max-message-bytes: -1 is out of range"},
      {{"collector", "--max-stream-rate", "-1"}, "--max-stream-rate: -1 is out of range"},
      {{"collector", "--max-stream-rate", "nan"}, "--max-stream-rate: 'nan' is not a number"},
      {{"agent", "--idle-exit", "-1"}, "--idle-exit: -1 is out of range: give a number from 0 to 1000000"},
      {{"agent", "--idle-exit", "nan"}, "--idle-exit: 'nan' is not a number"},
      {{"agent", "--give-up-after", "-1"}, "--give-up-after: -1 is out of range"},
      {{"top", "--refresh", "0"}, "--refresh: 0 is out of range"},
  };
  for (const auto& [args, words] : cases) {
    const Outcome outcome = Collwatch(dir, args);
    EXPECT_EQ(outcome.exit_code, 2) << args[0] << " " << args[1] << " " << args[2];
    EXPECT_THAT(outcome.err, HasSubstr(words));
  }
}

// Every way a collector cannot listen is said, with a failure status: no crash (it was a
// segfault in the destructor), no port shared with another collector.
TEST(BadInputTest, ACollectorThatCannotListenSaysWhy) {
  TempDir dir;
  const int port = testing::FreeLoopbackPort();
  Subprocess first({COLLWATCH_CLI_PATH, "collector", "--listen", "127.0.0.1:" + std::to_string(port), "--out",
                    dir.path() + "/first"},
                   testing::CollwatchRunEnv({}), dir.path() + "/first.out", dir.path() + "/first.err");
  for (int waited = 0; waited < 200 && ReadFile(dir.path() + "/first.err").find("listening") == std::string::npos;
       ++waited) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_THAT(ReadFile(dir.path() + "/first.err"), HasSubstr("listening on"));
  const struct {
    std::string listen;
    std::string words;
  } cases[] = {
      {"127.0.0.1:" + std::to_string(port), "address in use"},
      {"127.0.0.1:99999", "a port from 0 to 65535"},
      {"unix:" + dir.path() + "/missing/c.sock", "no folder " + dir.path() + "/missing"},
  };
  for (const auto& [listen, words] : cases) {
    const Outcome outcome = Collwatch(dir, {"collector", "--listen", listen, "--out", dir.path() + "/second"});
    EXPECT_EQ(outcome.exit_code, 1) << listen;
    EXPECT_THAT(outcome.err, HasSubstr("collwatch collector: cannot listen on")) << listen;
    EXPECT_THAT(outcome.err, HasSubstr(words)) << listen;
  }
  // The same store folder, another port: one writer per store.
  const Outcome same_store = Collwatch(dir, {"collector", "--listen", "127.0.0.1:0", "--out", dir.path() + "/first"});
  EXPECT_EQ(same_store.exit_code, 1);
  EXPECT_THAT(same_store.err, HasSubstr("another collector (pid " + std::to_string(first.pid()) + ") writes there"));
}

// A job id that names no job folder stops `collwatch run` before the command starts.
TEST(BadInputTest, AJobIdThatIsNoFolderNameStopsRunBeforeTheCommand) {
  TempDir dir;
  const std::string marker = dir.path() + "/command-ran";
  for (const std::string id : {"..", "."}) {
    const Outcome outcome = Collwatch(dir, {"run", "--no-dashboard", "--out", dir.path() + "/out", "--", "touch", marker},
                                      {{"COLLWATCH_JOB_ID", id}});
    EXPECT_EQ(outcome.exit_code, 2) << id;
    EXPECT_THAT(outcome.err, HasSubstr("COLLWATCH_JOB_ID='" + id + "' is not a job id"));
    EXPECT_FALSE(std::filesystem::exists(marker)) << "the command must not run";
  }
}

// An --out folder others can write (links planted at run.json, report.json) is refused
// before the command starts; the links' targets are untouched.
TEST(BadInputTest, AnOutFolderOthersCanWriteIsRefused) {
  TempDir dir;
  const std::string out = dir.path() + "/shared";
  std::filesystem::create_directory(out);
  std::filesystem::permissions(out, std::filesystem::perms::all);
  std::ofstream(dir.path() + "/victim") << "precious";
  for (const char* name : {"run.json", "report.json", "report.txt"}) {
    std::filesystem::create_symlink(dir.path() + "/victim", out + "/" + name);
  }
  const std::string marker = dir.path() + "/command-ran";
  const Outcome outcome = Collwatch(dir, {"run", "--no-dashboard", "--out", out, "--", "touch", marker});
  EXPECT_EQ(outcome.exit_code, 2);
  EXPECT_THAT(outcome.err, HasSubstr("group or others may write in it (mode 0777)"));
  EXPECT_FALSE(std::filesystem::exists(marker));
  EXPECT_EQ(ReadFile(dir.path() + "/victim"), "precious");
}

// Outputs onto devices: /dev/full is a write error said as such, never replaced by a file.
TEST(BadInputTest, AnOutputOnAFullDeviceIsAWriteErrorAndStaysADevice) {
  TempDir dir;
  const std::string dumps = std::string(COLLWATCH_TEST_DATA_DIR) + "/flight_recorder/ddp-clean-json/nccl_trace_rank_";
  const Outcome imported =
      Collwatch(dir, {"import", "--flight-recorder", dumps + "0", dumps + "1", "--out", dir.path() + "/t"});
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"export", "--chrome", dir.path() + "/t", "-o", "/dev/full"},
        std::vector<std::string>{"baseline", dir.path() + "/t", "-o", "/dev/full"}}) {
    const Outcome outcome = Collwatch(dir, args);
    EXPECT_NE(outcome.exit_code, 0) << args[0];
    EXPECT_THAT(outcome.err, HasSubstr("cannot write /dev/full: no space left on device")) << args[0];
  }
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/full"));
  const Outcome to_null = Collwatch(dir, {"export", "--chrome", dir.path() + "/t", "-o", "/dev/null"});
  EXPECT_EQ(to_null.exit_code, 0) << to_null.err;
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
}

// A FIFO or /dev/zero given where a file is read (a token file, a baseline, a trace):
// an error at once.
TEST(BadInputTest, AFifoOrDevZeroAsAnInputIsAnErrorAtOnce) {
  TempDir dir;
  const std::string fifo = dir.path() + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const struct {
    std::vector<std::string> args;
    std::string words;
  } cases[] = {
      {{"collector", "--token-file", fifo, "--out", dir.path() + "/c"}, fifo + ": is a FIFO, not a regular file"},
      {{"agent", "--token-file", "/dev/zero"}, "/dev/zero: is a character device, not a regular file"},
      {{"check", "--baseline", fifo, dir.path()}, "baseline " + fifo + ": is a FIFO, not a regular file"},
      {{"analyze", fifo}, "fifo"},
      {{"dump", fifo}, "fifo"},
  };
  for (const auto& [args, words] : cases) {
    const Outcome outcome = Collwatch(dir, args);
    EXPECT_NE(outcome.exit_code, 0) << args[0];
    EXPECT_NE(outcome.exit_code, -1) << args[0] << " hung";
    EXPECT_LT(outcome.seconds, 20) << args[0];
    EXPECT_THAT(outcome.err, HasSubstr(words)) << args[0];
  }
}

}  // namespace
}  // namespace collwatch
