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

#include "cli/exit_codes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/loop_gate.h"
#include "tests/support/cli_run.h"
#include "tests/support/read_files.h"
#include "tests/support/run_env.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_time.h"

namespace collwatch::bad_input_test {
namespace {

using ::testing::HasSubstr;
using testing::ReadFile;
using testing::Subprocess;
using testing::Scaled;
using testing::TempDir;
using testing::WaitForText;

using Outcome = testing::CliOutcome;

// `collwatch ARGS...` with `env` added; killed after 30 s.
Outcome Collwatch(const TempDir& dir, const std::vector<std::string>& args,
                  const std::map<std::string, std::string>& env = {}) {
  return testing::RunCollwatch(dir, args, env);
}

// `run`'s standard error says where it kept the rings ("the rings stay in DIR "): DIR
// holds `count` of them. Removes DIR.
void ExpectRingsKept(const std::string& err, size_t count) {
  const std::string marker = "the rings stay in ";
  const size_t at = err.find(marker);
  ASSERT_NE(at, std::string::npos) << err;
  const std::string rings = err.substr(at + marker.size(), err.find(' ', at + marker.size()) - at - marker.size());
  size_t ring_files = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(rings, error)) {
    ring_files += entry.path().extension() == ".ring";
  }
  EXPECT_EQ(ring_files, count) << rings;
  std::filesystem::remove_all(rings);
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
    // collwatch run's own failure never reads like its job's exit status.
    EXPECT_EQ(outcome.exit_code, args[0] == "run" ? kExitRunFailed : kExitBadInput)
        << args[0] << " " << args[1] << " " << args[2];
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
  WaitForText(dir.path() + "/first.err", "listening", 10);
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
    EXPECT_EQ(outcome.exit_code, kExitBadInput) << listen;
    EXPECT_THAT(outcome.err, HasSubstr("collwatch collector: cannot listen on")) << listen;
    EXPECT_THAT(outcome.err, HasSubstr(words)) << listen;
  }
  // The same store folder, another port: one writer per store.
  const Outcome same_store = Collwatch(dir, {"collector", "--listen", "127.0.0.1:0", "--out", dir.path() + "/first"});
  EXPECT_EQ(same_store.exit_code, kExitBadInput);
  EXPECT_THAT(same_store.err, HasSubstr("another collector (pid " + std::to_string(first.pid()) + ") writes there"));
}

// A job id that names no job folder, recording turned off, a ring size the preload would
// replace: `collwatch run` stops before the command starts (it reported "No findings" over
// 0 ranks, or deleted the rings of a job whose hellos were all refused).
TEST(BadInputTest, SettingsThatWouldMakeTheRunPointlessStopItBeforeTheCommand) {
  TempDir dir;
  const std::string marker = dir.path() + "/command-ran";
  const struct {
    std::string variable, value, words;
  } cases[] = {
      {"COLLWATCH_JOB_ID", "..", "COLLWATCH_JOB_ID='..' is not a job id"},
      {"COLLWATCH_JOB_ID", ".", "COLLWATCH_JOB_ID='.' is not a job id"},
      {"COLLWATCH_DISABLE", "yes", "COLLWATCH_DISABLE=yes turns recording off"},
      {"COLLWATCH_RING_RECORDS", "lots", "COLLWATCH_RING_RECORDS=lots is not a whole number from 64 to 1048576"},
      {"COLLWATCH_RING_LANES", "0", "COLLWATCH_RING_LANES=0 is not a whole number from 2 to 64"},
  };
  for (const auto& [variable, value, words] : cases) {
    const Outcome outcome = Collwatch(dir, {"run", "--no-dashboard", "--out", dir.path() + "/out", "--", "touch", marker},
                                      {{variable, value}});
    EXPECT_EQ(outcome.exit_code, kExitRunFailed) << variable << "=" << value;
    EXPECT_THAT(outcome.err, HasSubstr(words));
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
  EXPECT_EQ(outcome.exit_code, kExitRunFailed);
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

// Links another user planted in a shared folder (mode 1777, as /tmp) where export,
// baseline and check --junit write: one under the name the temporary had before
// ("FILE.tmp"), one at FILE itself. Neither link's target is written; the first output
// is written, the second refused.
TEST(BadInputTest, PlantedLinksUnderOutputsRedirectNothing) {
  TempDir dir;
  const std::string dumps = std::string(COLLWATCH_TEST_DATA_DIR) + "/flight_recorder/ddp-clean-json/nccl_trace_rank_";
  const std::string traces = dir.path() + "/t";
  ASSERT_EQ(Collwatch(dir, {"import", "--flight-recorder", dumps + "0", dumps + "1", "--out", traces}).exit_code, 0);
  ASSERT_EQ(Collwatch(dir, {"baseline", traces, "-o", dir.path() + "/good.baseline"}).exit_code, 0);
  const std::string shared = dir.path() + "/shared";
  std::filesystem::create_directory(shared);
  std::filesystem::permissions(shared, std::filesystem::perms::all | std::filesystem::perms::sticky_bit);
  const std::string victim = dir.path() + "/victim";
  std::ofstream(victim) << "precious";
  const struct {
    std::string name;
    std::vector<std::string> args;  // the output path goes last
  } outputs[] = {
      {"export.json", {"export", "--chrome", traces, "-o"}},
      {"run.baseline", {"baseline", traces, "-o"}},
      {"junit.xml", {"check", "--baseline", dir.path() + "/good.baseline", traces, "--junit"}},
  };
  for (const auto& [name, args] : outputs) {
    const std::string target = shared + "/" + name;
    std::filesystem::create_symlink(victim, target + ".tmp");
    std::vector<std::string> with_target = args;
    with_target.push_back(target);
    const Outcome written = Collwatch(dir, with_target);
    EXPECT_EQ(written.exit_code, 0) << name << ": " << written.err;
    EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::symlink_status(target))) << name;
    EXPECT_EQ(ReadFile(victim), "precious") << name;

    std::filesystem::remove(target);
    std::filesystem::create_symlink(victim, target);
    const Outcome refused = Collwatch(dir, with_target);
    EXPECT_NE(refused.exit_code, 0) << name;
    EXPECT_THAT(refused.err, HasSubstr(target + ": is a symbolic link")) << name;
    EXPECT_EQ(ReadFile(victim), "precious") << name;
  }
}

// An agent pointed at a folder with no rings says so, at the start and at the end.
TEST(BadInputTest, AnAgentWithoutRingsSaysSo) {
  TempDir dir;
  const testing::DeadLoopbackPort never_a_collector;
  const Outcome outcome = Collwatch(dir, {"agent", "--ring-dir", dir.path() + "/missing", "--idle-exit", "0.5",
                                          "--collector", never_a_collector.address()});
  EXPECT_EQ(outcome.exit_code, 0) << outcome.err;
  EXPECT_THAT(outcome.err, HasSubstr(dir.path() + "/missing does not exist yet; waiting for the first ring there"));
  EXPECT_THAT(outcome.err, HasSubstr("no ring appeared in " + dir.path() + "/missing"));
}

// The out folder removed while the job runs: every write into the removed store
// succeeded and every batch was acknowledged, but "drained" means stored: run says the
// store is gone, run.json cannot claim a drain, and the rings are kept, holding the records.
TEST(BadInputTest, AnOutFolderRemovedMidRunKeepsTheRings) {
  TempDir dir;
  const std::string out = dir.path() + "/out";
  const testing::LoopGate gate(dir.path() + "/gate", 2);
  Subprocess run({COLLWATCH_CLI_PATH, "run", "--no-dashboard", "--out", out, "--", COLLWATCH_NCCL_RANKS_PATH, "2",
                  "loop", dir.path()},
                 testing::CollwatchRunEnv({{"COLLWATCH_CPU_NCCL_SHM_DIR", dir.path()},
                                           {"COLLWATCH_TEST_LOOP_STEPS", "200"},
                                           {"COLLWATCH_TEST_LOOP_GATE", gate.path()}}),
                 dir.path() + "/run.out", dir.path() + "/run.err");
  // The job is held half-way until its store's folder is gone: the removal falls mid-run
  // however slow the machine, once both ranks' traces are in the store.
  gate.Open(100);
  ASSERT_TRUE(gate.AwaitAll(100)) << ReadFile(dir.path() + "/run.err");
  int traces = 0;
  for (int waited = 0; waited < Scaled(200) && traces < 2; ++waited) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::error_code error;
    traces = 0;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(out, error)) {
      traces += entry.path().filename() == "trace.cwlog";
    }
  }
  ASSERT_EQ(traces, 2) << ReadFile(dir.path() + "/run.err");
  std::filesystem::remove_all(out);
  gate.Open(200);
  EXPECT_EQ(run.Wait(60), 0) << "the job's own status";
  const std::string err = ReadFile(dir.path() + "/run.err");
  EXPECT_THAT(err, HasSubstr("the trace store " + out + " was removed or moved while the job ran")) << err;
  ExpectRingsKept(err, 2);
}

// A collector under a file-size limit (`ulimit -f`) cannot write its store: it says so and
// ends each stream with the write error, the agent passes that reason on (it said the
// collector was "unreachable (CANCELLED)"), and `run` keeps the rings, the records in them.
TEST(BadInputTest, ACollectorThatCannotWriteItsStoreIsNamedAndTheRingsKept) {
  TempDir dir;
  const std::string socket = "unix:" + dir.path() + "/c.sock";
  Subprocess collector({"/bin/sh", "-c",
                        "ulimit -f 64; exec " + std::string(COLLWATCH_CLI_PATH) + " collector --listen " + socket +
                            " --out " + dir.path() + "/store"},
                       testing::CollwatchRunEnv({}), dir.path() + "/collector.out", dir.path() + "/collector.err");
  WaitForText(dir.path() + "/collector.err", "listening", 10);
  ASSERT_THAT(ReadFile(dir.path() + "/collector.err"), HasSubstr("listening on"));
  Subprocess run({COLLWATCH_CLI_PATH, "run", "--no-dashboard", "--collector", socket, "--out", dir.path() + "/out", "--",
                  COLLWATCH_NCCL_RANKS_PATH, "2", "loop", dir.path()},
                 testing::CollwatchRunEnv({{"COLLWATCH_CPU_NCCL_SHM_DIR", dir.path()}, {"COLLWATCH_TEST_LOOP_STEPS", "1500"}}),
                 dir.path() + "/run.out", dir.path() + "/run.err");
  EXPECT_EQ(run.Wait(90), 0) << "the job's own status";
  const std::string err = ReadFile(dir.path() + "/run.err");
  EXPECT_THAT(ReadFile(dir.path() + "/collector.err"), HasSubstr("File too large"));
  EXPECT_THAT(err, HasSubstr("collwatch agent: the collector " + socket + " ended the stream of rank")) << err;
  EXPECT_THAT(err, HasSubstr("trace.cwlog: File too large")) << err;
  ExpectRingsKept(err, 2);
}

// A collector that refuses every stream (another token): `run` keeps the rings, says the
// collector refused them and where the rings are, and keeps the job's status; nothing
// waits out the drain timeout (a refusal is final).
TEST(BadInputTest, StreamsTheCollectorRefusedKeepTheirRings) {
  TempDir dir;
  const std::string socket = "unix:" + dir.path() + "/c.sock";
  std::ofstream(dir.path() + "/right.token") << "the-collectors-token-5d41";
  std::ofstream(dir.path() + "/wrong.token") << "another-token-of-a-job-7c2e";
  chmod((dir.path() + "/right.token").c_str(), 0600);
  chmod((dir.path() + "/wrong.token").c_str(), 0600);
  Subprocess collector({COLLWATCH_CLI_PATH, "collector", "--listen", socket, "--out", dir.path() + "/store",
                        "--token-file", dir.path() + "/right.token"},
                       testing::CollwatchRunEnv({}), dir.path() + "/collector.out", dir.path() + "/collector.err");
  WaitForText(dir.path() + "/collector.err", "listening", 10);
  ASSERT_THAT(ReadFile(dir.path() + "/collector.err"), HasSubstr("listening on"));
  const Outcome run = Collwatch(dir, {"run", "--no-dashboard", "--collector", socket, "--token-file",
                                      dir.path() + "/wrong.token", "--out", dir.path() + "/out", "--",
                                      COLLWATCH_NCCL_RANKS_PATH, "2", "all", dir.path()},
                                {{"COLLWATCH_CPU_NCCL_SHM_DIR", dir.path()}});
  EXPECT_EQ(run.exit_code, 0) << "the job's own status\n" << run.err;
  EXPECT_LT(run.seconds, 25) << "a refusal does not wait out the 30 s drain";
  EXPECT_THAT(run.err, HasSubstr("the collector refused 2 of the 2 rings' streams")) << run.err;
  ExpectRingsKept(run.err, 2);
}

// A job id with characters a folder name cannot hold: what run says and run.json records
// is the folder the traces were written to (it named "x_.._y_z" while the store wrote
// "x____y_z"), and `analyze` of the out folder finds them.
TEST(BadInputTest, AJobIdWithSlashesNamesTheFolderItsTracesAreIn) {
  TempDir dir;
  const std::string out = dir.path() + "/out";
  const Outcome run = Collwatch(dir, {"run", "--no-dashboard", "--out", out, "--", COLLWATCH_NCCL_RANKS_PATH, "2", "all",
                                      dir.path()},
                                {{"COLLWATCH_JOB_ID", "x/../y z"}, {"COLLWATCH_CPU_NCCL_SHM_DIR", dir.path()}});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string traces = out + "/x____y_z";
  EXPECT_TRUE(std::filesystem::is_directory(traces)) << run.err;
  EXPECT_THAT(run.err, HasSubstr("traces in " + traces + ";"));
  EXPECT_THAT(ReadFile(out + "/run.json"), HasSubstr("\"traces\": \"" + traces + "\""));
  const Outcome analyze = Collwatch(dir, {"analyze", out});
  EXPECT_EQ(analyze.exit_code, 0) << analyze.err;
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
    EXPECT_LT(outcome.seconds, testing::Scaled(20)) << args[0];
    EXPECT_THAT(outcome.err, HasSubstr(words)) << args[0];
  }
}

}  // namespace
}  // namespace collwatch::bad_input_test
