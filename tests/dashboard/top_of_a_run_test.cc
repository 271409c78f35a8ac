// `collwatch top DIR` of a real `collwatch run` (the CPU backend's first-op-differs plan on
// 4 ranks: rank 0 alone issues an all-gather where ranks 1-3 issue a reduce-scatter, so the
// OP_MISMATCH has a minority class). top finds the run by its folder; `--once --json` holds
// to docs/schema/top.schema.json and names the minority; `--once` at 80x24 and 60x20
// keeps every word of the headline and the states; a missing or wrong token ends top at
// once with top's own hint, on a terminal too; NO_COLOR draws without colour; and once the
// run has ended, top DIR says so and points at analyze.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/exit_codes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/cli_run.h"
#include "tests/support/json_schema.h"
#include "tests/support/read_files.h"
#include "tests/support/test_time.h"
#include "tests/support/tmux_terminal.h"

namespace collwatch::top_of_a_run_test {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using testing::CliOutcome;
using testing::RunCollwatch;
using testing::Subprocess;
using testing::TempDir;

bool Has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Columns a line takes: one per UTF-8 code point.
size_t Columns(const std::string& text) {
  size_t columns = 0;
  for (char c : text) columns += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  return columns;
}

// `text` with its line ends and runs of spaces made one space: a word cut across two lines
// would read as two there.
std::string Squeezed(const std::string& text) {
  std::string squeezed;
  for (char c : text) {
    if (c == '\n') c = ' ';
    if (c != ' ' || squeezed.empty() || squeezed.back() != ' ') squeezed += c;
  }
  return squeezed;
}

// Any SGR sequence that sets a foreground or background colour (30-38, 40-48, 90-97,
// 100-107); 39 and 49 put the defaults back.
bool HasColour(const std::string& screen) {
  for (size_t at = screen.find("\033["); at != std::string::npos; at = screen.find("\033[", at + 2)) {
    const size_t end = screen.find('m', at);
    if (end == std::string::npos) break;
    std::string parameters = screen.substr(at + 2, end - at - 2);
    for (size_t start = 0; start <= parameters.size();) {
      size_t stop = parameters.find(';', start);
      if (stop == std::string::npos) stop = parameters.size();
      const int code = std::atoi(parameters.substr(start, stop - start).c_str());
      if ((code >= 30 && code <= 48 && code != 39) || (code >= 90 && code <= 107)) return true;
      start = stop + 1;
    }
  }
  return false;
}

// The job hangs on its first collective, with rank 0 the odd one out, until stopped.
class TopOfARunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = dir_.path() + "/out";
    run_ = std::make_unique<Subprocess>(
        std::vector<std::string>{COLLWATCH_CLI_PATH, "run", "--out", out_, "--no-dashboard", "--", COLLWATCH_NCCL_RANKS_PATH,
                                 "4", "first-op-differs", dir_.path()},
        testing::CollwatchRunEnv({{"COLLWATCH_CPU_NCCL_SHM_DIR", dir_.path()}}), dir_.path() + "/run.out",
        dir_.path() + "/run.err");
  }

  // `collwatch run` stops its command's own process group on SIGTERM, as a scheduler's
  // stop; killing run's group alone would leave the job's ranks behind in theirs.
  void TearDown() override {
    if (run_ == nullptr) return;
    kill(run_->pid(), SIGTERM);
    run_->Wait(60);
  }

  // `collwatch top ARGS...` in its own folder (standard output and error apart).
  CliOutcome Top(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {}) {
    TempDir scratch;
    std::vector<std::string> argv = {"top"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCollwatch(scratch, argv, env, 60);
  }

  // `top DIR --once --json` until the finding is in it.
  nlohmann::json SnapshotWithTheFinding() {
    nlohmann::json snapshot;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(testing::Scaled(60));
    while (std::chrono::steady_clock::now() < deadline) {
      const CliOutcome top = Top({out_, "--once", "--json"});
      snapshot = nlohmann::json::parse(top.out, nullptr, /*allow_exceptions=*/false);
      if (top.exit_code == kExitOk && snapshot.is_object() && !snapshot["findings"].empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    return snapshot;
  }

  std::string RunRecordField(const std::string& key) {
    const nlohmann::json record = testing::ReadJson(out_ + "/run.json");
    return record.is_object() && record.contains(key) && record[key].is_string() ? record[key].get<std::string>() : "";
  }

  TempDir dir_;
  std::string out_;
  std::unique_ptr<Subprocess> run_;
};

TEST_F(TopOfARunTest, FindsTheRunByItsFolderAndPrintsItAsJsonAndAsFrames) {
  const nlohmann::json snapshot = SnapshotWithTheFinding();
  ASSERT_TRUE(snapshot.is_object() && !snapshot["findings"].empty())
      << snapshot.dump(2) << "\n" << testing::ReadFile(dir_.path() + "/run.err");
  const nlohmann::json schema = testing::ReadJson(std::string(COLLWATCH_SCHEMA_DIR) + "/top.schema.json");
  ASSERT_TRUE(schema.is_object());
  EXPECT_THAT(testing::SchemaProblems(schema, snapshot), IsEmpty()) << snapshot.dump(2);
  EXPECT_EQ(snapshot["schema_version"], 1);
  EXPECT_EQ(snapshot["verdict"], "findings");
  EXPECT_EQ(snapshot["collector"]["address"], RunRecordField("collector"));
  const nlohmann::json& finding = snapshot["findings"][0];
  EXPECT_EQ(finding["kind"], "OP_MISMATCH") << finding.dump(2);
  bool named_minority = false;
  for (const nlohmann::json& rank_class : finding["rank_classes"]) {
    if (rank_class["minority"] == true) named_minority = rank_class["ranks"] == nlohmann::json::array({0});
  }
  EXPECT_TRUE(named_minority) << finding.dump(2);
  const nlohmann::json& ranks = snapshot["communicators"][0]["ranks"];
  ASSERT_EQ(ranks.size(), 4u) << snapshot.dump(2);
  EXPECT_EQ(ranks[0]["minority"], true);
  EXPECT_EQ(ranks[1]["minority"], false);

  // One text frame at the sizes of small terminals: every line fits, and the headline
  // and each rank's state read whole.
  for (const auto& [columns, rows] : {std::pair<size_t, size_t>{80, 24}, {60, 20}}) {
    const std::string size = std::to_string(columns) + "x" + std::to_string(rows);
    const CliOutcome frame = Top({out_, "--once", "--size", size});
    ASSERT_EQ(frame.exit_code, kExitOk) << frame.err;
    std::vector<std::string> lines;
    for (size_t at = 0, end; at < frame.out.size(); at = end + 1) {
      end = frame.out.find('\n', at);
      if (end == std::string::npos) end = frame.out.size();
      lines.push_back(frame.out.substr(at, end - at));
    }
    EXPECT_LE(lines.size(), rows) << frame.out;
    for (const std::string& line : lines) EXPECT_LE(Columns(line), columns) << size << ": " << line;
    const std::string words = Squeezed(frame.out);
    EXPECT_TRUE(Has(words, finding["brief"].get<std::string>())) << size << "\n" << frame.out;
    EXPECT_TRUE(Has(words, "diverged: " + ranks[0]["note"].get<std::string>())) << size << "\n" << frame.out;
    EXPECT_THAT(ranks[0]["note"].get<std::string>(), HasSubstr("(minority)"));
  }
}

// A token the collector does not take ends top at once, saying how to give top the right
// one; never "every communicator agrees", never the agent's flag.
TEST_F(TopOfARunTest, AMissingOrWrongTokenEndsTopAtOnceWithTopsHint) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(testing::Scaled(30));
  while (RunRecordField("collector").empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const std::string address = RunRecordField("collector");
  ASSERT_FALSE(address.empty()) << testing::ReadFile(dir_.path() + "/run.err");
  const std::string wrong = dir_.path() + "/wrong-token";
  std::ofstream(wrong) << "not-the-token\n";
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--collector", address, "--token-file", wrong, "--once", "--json"}, {"--collector", address, "--once"}}) {
    const CliOutcome top = Top(args);
    SCOPED_TRACE(args.size());
    EXPECT_EQ(top.exit_code, kExitBadInput) << top.err;
    // Refused on the first answer, not after the 10 s of waiting for an unreachable one.
    EXPECT_LT(top.seconds, testing::Scaled(8)) << top.err;
    EXPECT_THAT(top.err, HasSubstr("refused this dashboard")) << top.err;
    EXPECT_THAT(top.err, HasSubstr(args.size() == 6 ? "the token of --token-file " + wrong + " is not the collector's"
                                                    : "no token was given"));
    EXPECT_THAT(top.err, HasSubstr("`collwatch top DIR`"));
    EXPECT_THAT(top.err, HasSubstr("--token-file FILE"));
    EXPECT_THAT(top.err, Not(HasSubstr("agent")));
    EXPECT_EQ(top.out, "") << "nothing printed";
  }
  // On a terminal, the full-screen top ends as soon, and the shell gets the words.
  if (!testing::TmuxInstalled()) GTEST_SKIP() << "tmux is not installed (scripts/install_deps.sh)";
  testing::TmuxTerminal terminal(std::string(COLLWATCH_CLI_PATH) + " top --collector " + address + " --token-file " +
                                     wrong + "; echo top-exit=$?; sleep 60",
                                 80, 24);
  const std::string screen = terminal.WaitFor([](const std::string& s) { return Has(s, "top-exit="); }, 15);
  EXPECT_TRUE(Has(screen, "top-exit=2")) << screen;
  EXPECT_TRUE(Has(Squeezed(screen), "refused this dashboard")) << screen;
  EXPECT_FALSE(Has(screen, "agrees")) << screen;
}

// On a terminal, top DIR draws the run in colour, and in none with NO_COLOR set; either
// way the minority stands out in reverse video. Once the run ended, top DIR says so.
TEST_F(TopOfARunTest, NoColorOnATerminalAndTheEndedRunSaidAsSuch) {
  ASSERT_FALSE(SnapshotWithTheFinding()["findings"].empty()) << testing::ReadFile(dir_.path() + "/run.err");
  if (testing::TmuxInstalled()) {
    for (const bool no_colour : {false, true}) {
      testing::TmuxTerminal terminal(std::string(no_colour ? "env NO_COLOR=1 " : "env -u NO_COLOR ") +
                                         "TERM=xterm-256color " + COLLWATCH_CLI_PATH + " top " + out_,
                                     100, 30, no_colour ? "no-colour" : "colour");
      const std::string screen = terminal.WaitFor([](const std::string& s) { return Has(s, "OP_MISMATCH"); }, 20);
      ASSERT_TRUE(Has(screen, "OP_MISMATCH")) << screen;
      const std::string drawn = terminal.ScreenWithAttributes();
      EXPECT_EQ(HasColour(drawn), !no_colour) << (no_colour ? "NO_COLOR=1" : "no NO_COLOR") << "\n" << drawn;
      EXPECT_TRUE(Has(drawn, "\033[7m") || Has(drawn, ";7m") || Has(drawn, ";7;")) << "reverse video\n" << drawn;
      terminal.Keys("q");
    }
  }

  // The job is stopped: run.json's last word says the run ended.
  kill(run_->pid(), SIGTERM);
  run_->Wait(60);
  const CliOutcome ended = Top({out_, "--once"});
  EXPECT_EQ(ended.exit_code, kExitBadInput);
  EXPECT_THAT(ended.err, HasSubstr("the run in " + out_ + " has ended")) << ended.err;
  EXPECT_THAT(ended.err, HasSubstr("`collwatch analyze " + out_ + "`")) << ended.err;
  const CliOutcome nothing = Top({dir_.path(), "--once"});
  EXPECT_EQ(nothing.exit_code, kExitBadInput);
  EXPECT_THAT(nothing.err, HasSubstr("holds no run record (run.json)")) << nothing.err;
}

// A collector that is not there: top gives up after its bounded wait, saying so.
TEST(TopUnreachableTest, ACollectorThatIsNotThereIsSaidAfterABoundedWait) {
  TempDir dir;
  const std::string address = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  const CliOutcome top = RunCollwatch(dir, {"top", "--collector", address, "--once", "--connect-timeout", "2"}, {}, 60);
  EXPECT_EQ(top.exit_code, 1) << top.err;
  EXPECT_THAT(top.err, HasSubstr("no state from the collector at " + address + " within 2 s")) << top.err;
  EXPECT_THAT(top.err, HasSubstr("is it running"));
}

}  // namespace
}  // namespace collwatch::top_of_a_run_test
