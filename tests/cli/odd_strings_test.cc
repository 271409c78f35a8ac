// The collwatch command under odd strings and lost output (#38 items 1, 8, 9): a path or
// job id that is not UTF-8, a token gRPC would choke on, a standard output that cannot be
// written, names holding terminal escape sequences. Each is said and survived, never an
// abort, a silent exit 0 or raw escapes on the user's terminal. Threading: one thread.
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "interposer/ring_writer.h"
#include "ring/hash.h"
#include "tests/support/cli_run.h"
#include "tests/support/read_files.h"
#include "tests/support/run_env.h"
#include "tests/support/subprocess.h"

namespace collwatch {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::ReadFile;
using testing::Subprocess;
using testing::TempDir;

using Outcome = testing::CliOutcome;

// `collwatch ARGS...` with `env` added; its standard output goes to `stdout_path` (a file
// in `dir` by default). Killed after 60 s.
Outcome Collwatch(const TempDir& dir, const std::vector<std::string>& args,
                  const std::map<std::string, std::string>& env = {}, std::string stdout_path = "") {
  return testing::RunCollwatch(dir, args, env, 60, std::move(stdout_path));
}

// A trace folder of two ranks, imported from a Flight Recorder fixture.
std::string ImportedTraces(const TempDir& dir) {
  const std::string dumps = std::string(COLLWATCH_TEST_DATA_DIR) + "/flight_recorder/ddp-clean-json/nccl_trace_rank_";
  const std::string traces = dir.path() + "/traces";
  const Outcome imported = Collwatch(dir, {"import", "--flight-recorder", dumps + "0", dumps + "1", "--out", traces});
  EXPECT_EQ(imported.exit_code, 0) << imported.err;
  return traces;
}

bool IsValidJson(const std::string& text) {
  return !nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false).is_discarded();
}

// An --out path that is not UTF-8: the job's status, rings gone, and run.json and
// report.json valid JSON naming the path with U+FFFD (it aborted after the job, exit 134,
// with no report and the rings left in /dev/shm).
TEST(OddStringsTest, AnOutPathThatIsNotUtf8StillGetsAReport) {
  TempDir dir;
  const std::string out = dir.path() + "/o\xff" "2";
  const Outcome run = Collwatch(dir, {"run", "--no-dashboard", "--out", out, "--", COLLWATCH_NCCL_RANKS_PATH, "2",
                                      "all", dir.path()},
                                {{"COLLWATCH_CPU_NCCL_SHM_DIR", dir.path()}});
  EXPECT_EQ(run.exit_code, 0) << "the job's own status\n" << run.err;
  EXPECT_THAT(run.err, Not(HasSubstr("the rings stay in"))) << run.err;
  const std::string run_json = ReadFile(out + "/run.json");
  ASSERT_TRUE(IsValidJson(run_json)) << run_json;
  EXPECT_THAT(run_json, HasSubstr("/o\xef\xbf\xbd" "2"));
  std::string report;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(out)) {
    if (entry.path().filename() == "report.json") report = ReadFile(entry.path().string());
  }
  ASSERT_FALSE(report.empty()) << "no report.json under the out folder\n" << run.err;
  EXPECT_TRUE(IsValidJson(report)) << report;
}

// An import --job that is not a job id is refused before anything is created (it aborted
// inside the JSON writer, leaving a half-written .importing- folder).
TEST(OddStringsTest, AnImportJobThatIsNotAJobIdIsRefusedLeavingNothing) {
  TempDir dir;
  const std::string dumps = std::string(COLLWATCH_TEST_DATA_DIR) + "/flight_recorder/ddp-clean-json/nccl_trace_rank_";
  const Outcome imported = Collwatch(dir, {"import", "--flight-recorder", dumps + "0", dumps + "1", "--out",
                                           dir.path() + "/t", "--job", "bad\xff"});
  EXPECT_EQ(imported.exit_code, 2) << imported.err;
  EXPECT_THAT(imported.err, HasSubstr("collwatch import: --job 'bad\\xff' is not a job id"));
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_THAT(entry.path().filename().string(), Not(HasSubstr("importing"))) << "left behind";
    EXPECT_NE(entry.path().filename(), "t");
  }
}

// A token file gRPC could not send (a line break inside, only whitespace) is refused at load
// by every command that takes one, in the same words: collector, agent, run and top (it was
// accepted by the collector and aborted the others inside gRPC's metadata check).
TEST(OddStringsTest, ATokenThatIsNoMetadataValueIsRefusedByEveryCommandAlike) {
  TempDir dir;
  const struct {
    std::string name, contents, problem;
  } tokens[] = {
      {"two-lines.token", "abc\ndef\n", "the token holds a line break (byte 4)"},
      {"blank.token", "  \n", "the token is only whitespace"},
  };
  const std::string marker = dir.path() + "/command-ran";
  for (const auto& [name, contents, problem] : tokens) {
    const std::string file = dir.path() + "/" + name;
    std::ofstream(file) << contents;
    chmod(file.c_str(), 0600);
    const std::string words = file + ": " + problem + ": give one line of printable ASCII without spaces";
    const struct {
      std::vector<std::string> args;
      int exit_code;
    } commands[] = {
        {{"collector", "--listen", "unix:" + dir.path() + "/c.sock", "--out", dir.path() + "/store"}, 2},
        {{"agent", "--idle-exit", "0.5", "--ring-dir", dir.path() + "/rings"}, 2},
        {{"run", "--no-dashboard", "--collector", "unix:" + dir.path() + "/c.sock", "--out", dir.path() + "/out"}, 125},
        {{"top", "--collector", "unix:" + dir.path() + "/c.sock"}, 2},
    };
    for (const auto& [args, exit_code] : commands) {
      std::vector<std::string> with_token = args;
      with_token.insert(with_token.begin() + 1, {"--token-file", file});
      if (args[0] == "run") with_token.insert(with_token.end(), {"--", "touch", marker});
      const Outcome outcome = Collwatch(dir, with_token);
      EXPECT_EQ(outcome.exit_code, exit_code) << args[0] << " " << name << "\n" << outcome.err;
      EXPECT_THAT(outcome.err, HasSubstr("collwatch " + args[0] + ": " + words)) << args[0];
    }
  }
  EXPECT_FALSE(std::filesystem::exists(marker)) << "run must refuse before its command starts";
}

// Standard output that cannot be written (a full device, a closed descriptor) is an error
// with a non-zero status, never exit 0 with nothing written.
TEST(OddStringsTest, AStandardOutputThatCannotBeWrittenIsAnError) {
  TempDir dir;
  const std::string traces = ImportedTraces(dir);
  ASSERT_EQ(Collwatch(dir, {"baseline", traces, "-o", dir.path() + "/b"}).exit_code, 0);
  const std::vector<std::vector<std::string>> commands = {
      {"analyze", traces},
      {"analyze", "--json", traces},
      {"baseline", traces, "-o", "-"},
      {"export", "--chrome", traces, "-o", "-"},
      {"dump", traces},
      {"diff", traces, traces},
      {"check", "--baseline", dir.path() + "/b", traces},
      {"env"},
  };
  for (const std::vector<std::string>& args : commands) {
    const Outcome full = Collwatch(dir, args, {}, "/dev/full");
    EXPECT_NE(full.exit_code, 0) << args[0] << " " << args[1 % args.size()];
    EXPECT_NE(full.exit_code, -1) << args[0] << " hung";
    // The cause is named when the failing write was the last flush's ("No space left on device").
    EXPECT_THAT(full.err, HasSubstr("collwatch " + args[0] + ": cannot write standard output"));
  }
  // Closed, not redirected: the shell runs collwatch with descriptor 1 shut.
  std::string command = std::string(COLLWATCH_CLI_PATH) + " analyze " + traces + " >&-";
  Subprocess closed({"/bin/sh", "-c", command}, testing::CollwatchRunEnv({}), "", dir.path() + "/closed.err");
  EXPECT_EQ(closed.Wait(60), 2);
  EXPECT_THAT(ReadFile(dir.path() + "/closed.err"), HasSubstr("collwatch analyze: cannot write standard output"));
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/full"));
}

// Region names are any bytes a job gave NVTX: `collwatch dump` shows an escape sequence
// (clear the screen, set the window title) as \xNN text, never raw.
TEST(OddStringsTest, DumpShowsEscapeSequencesInNamesEscaped) {
  TempDir dir;
  Config config;
  config.ring_records = 64;
  std::snprintf(config.ring_dir, sizeof config.ring_dir, "%s", dir.path().c_str());
  std::snprintf(config.job, sizeof config.job, "oddnames");
  std::unique_ptr<RingWriter> writer = RingWriter::Create(config);
  ASSERT_NE(writer, nullptr);
  const char kName[] = "fwd/\x1b[2J\x1b]0;pwn\x07";
  ring::StringSlot& slot = writer->strings()[0];
  std::memcpy(slot.text, kName, sizeof kName - 1);
  slot.length = sizeof kName - 1;
  slot.hash = Hash64(kName, sizeof kName - 1);  // readers check a whole name against it
  slot.state.store(ring::kStringReady, std::memory_order_release);
  ring::Record record{};
  record.kind = static_cast<uint16_t>(ring::RecordKind::kEnter);
  record.fn = static_cast<uint16_t>(ring::ApiFn::kGroupStart);
  record.region_id = 1;
  writer->Append(RingWriter::kSharedLane, record);

  const Outcome dump = Collwatch(dir, {"dump", dir.path()});
  EXPECT_EQ(dump.exit_code, 0) << dump.err;
  EXPECT_THAT(dump.out, HasSubstr("fwd/\\x1b[2J\\x1b]0;pwn\\x07"));
  for (const char c : dump.out) {
    const auto byte = static_cast<unsigned char>(c);
    ASSERT_TRUE(byte >= 0x20 || c == '\n') << "raw byte " << static_cast<int>(byte) << " in\n" << dump.out;
  }
}

}  // namespace
}  // namespace collwatch
