// `collwatch top` end to end, in a real terminal (tmux): a standalone collector fed by
// the bundled trainer's image-text hang on 4 CPU ranks; the captured screen names the
// finding and each rank's class, the finding opens with its aligned sequences, and when
// the collector is killed and restarted the screen says so and reconnects.
// COLLWATCH_SCREENSHOT_DIR=DIR keeps the captured screens (docs/dashboard.md shows them).
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "cli/exit_codes.h"
#include "gtest/gtest.h"
#include "tests/support/read_files.h"
#include "tests/support/run_env.h"
#include "tests/support/subprocess.h"
#include "ring/settings.h"
#include "tests/support/test_time.h"
#include "tests/support/tmux_terminal.h"

namespace collwatch::top_end_to_end_test {
namespace {

using testing::Subprocess;
using testing::TempDir;

// 150x45, as docs/dashboard.md shows the screens.
class Terminal : public testing::TmuxTerminal {
 public:
  explicit Terminal(const std::string& command) : TmuxTerminal(command, 150, 45) {}
};

bool Has(const std::string& screen, const std::string& text) { return screen.find(text) != std::string::npos; }

// The screen line that shows rank `rank` in the per-rank view.
std::string RankLine(const std::string& screen, int rank) {
  const std::string prefix = "\n " + std::to_string(rank) + " ";
  const size_t at = screen.find(prefix);
  if (at == std::string::npos) return "";
  return screen.substr(at + 1, screen.find('\n', at + 1) - at - 1);
}

void KeepScreenshot(const std::string& name, const std::string& screen) {
  if (const char* dir = SettingIfSet(Setting::kScreenshotDir)) {
    std::ofstream(std::string(dir) + "/" + name + ".txt") << screen;
  }
}

#if defined(COLLWATCH_TRAINER_PATH)

TEST(TopEndToEndTest, NamesTheHangAndItsRanksAndSurvivesACollectorRestart) {
  if (!testing::TmuxInstalled()) GTEST_SKIP() << "tmux is not installed (scripts/install_deps.sh)";
  TempDir dir;
  const std::string address = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  const std::vector<std::string> collector_argv = {COLLWATCH_CLI_PATH, "collector", "--listen", address, "--out",
                                                   dir.path() + "/store", "--stall-after", "5"};
  auto collector = std::make_unique<Subprocess>(collector_argv, testing::CollwatchRunEnv({}), "",
                                                dir.path() + "/collector.log");
  // top gives up on a collector that answers nothing within --connect-timeout: start it
  // once the collector listens (a sanitized collector on a busy machine took over top's
  // default 10 s, and top's window closed with it).
  const std::string collector_log =
      testing::WaitForText(dir.path() + "/collector.log", "listening", 30, [&] { return collector->Running(); });
  ASSERT_NE(collector_log.find("listening"), std::string::npos) << collector_log;
  // The job hangs on its first forward all-gather; with --kill-on-hang it is stopped once
  // the collector's finding reaches `collwatch run`, and the collector keeps the finding.
  Subprocess run({COLLWATCH_CLI_PATH, "run", "--collector", address, "--out", dir.path() + "/run", "--no-dashboard",
                  "--kill-on-hang", "--", COLLWATCH_TRAINER_PATH, "--nproc", "4", "--scenario", "image-text", "--steps",
                  "3", "--hidden", "32", "--layers", "2", "--vision-layers", "1", "--seq", "16", "--vocab", "32",
                  "--batch", "2"},
                 testing::CollwatchRunEnv({{"COLLWATCH_CPU_NCCL_SHM_DIR", dir.path()}}), dir.path() + "/run.out",
                 dir.path() + "/run.err");

  Terminal terminal(std::string(COLLWATCH_CLI_PATH) + " top --collector " + address);
  std::string screen = terminal.WaitFor(
      [](const std::string& s) { return Has(s, "PATH_DIVERGENCE") && Has(s, "diverged: class 2/2"); }, 90);
  KeepScreenshot("top-image-text", screen);
  ASSERT_TRUE(Has(screen, "PATH_DIVERGENCE")) << screen;
  EXPECT_TRUE(Has(screen, "4 ranks on 1 node")) << screen;
  EXPECT_TRUE(Has(screen, "ranks 0,2 in fwd/vision.patch, ranks 1,3 in fwd/embed")) << screen;
  for (int rank : {0, 2}) EXPECT_TRUE(Has(RankLine(screen, rank), "diverged: class 1/2 at seq 1")) << screen;
  for (int rank : {1, 3}) EXPECT_TRUE(Has(RankLine(screen, rank), "diverged: class 2/2 at seq 1")) << screen;
  EXPECT_EQ(run.Wait(60), kExitStoppedHungJob) << "collwatch run should have stopped the hung job";

  terminal.Keys("Enter");
  // The view's title may be drawn before its words (seen under TSan): wait for both.
  screen = terminal.WaitFor(
      [](const std::string& s) { return Has(s, "finding 1 of 1") && Has(s, "> seq 1      all-gather"); }, 10);
  KeepScreenshot("top-finding", screen);
  // report.txt's words: the classes, the summary, what each class issued.
  EXPECT_TRUE(Has(screen, "issued it in fwd/vision.patch")) << screen;
  EXPECT_TRUE(Has(screen, "issued it in fwd/embed")) << screen;
  EXPECT_TRUE(Has(screen, "Likely cause: a data-dependent branch")) << screen;
  EXPECT_TRUE(Has(screen, "> seq 1      all-gather")) << screen;
  terminal.Keys("Escape");

  // The collector goes away: the screen says so and keeps the last state.
  collector->KillGroup();
  screen = terminal.WaitFor([](const std::string& s) { return Has(s, "lost: reconnecting"); }, 20);
  KeepScreenshot("top-collector-lost", screen);
  ASSERT_TRUE(Has(screen, "collector " + address + " lost: reconnecting")) << screen;
  EXPECT_TRUE(Has(screen, "PATH_DIVERGENCE")) << "the last state stays on screen\n" << screen;

  // It comes back on the same address: the dashboard reconnects by itself.
  collector = std::make_unique<Subprocess>(collector_argv, testing::CollwatchRunEnv({}), "",
                                           dir.path() + "/collector2.log");
  screen = terminal.WaitFor([](const std::string& s) { return Has(s, "connected (reconnected 1 time)"); }, 30);
  ASSERT_TRUE(Has(screen, "collector " + address + " connected (reconnected 1 time)")) << screen;

  terminal.Keys("q");
  for (int i = 0; i < testing::Scaled(50) && terminal.Alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(terminal.Alive()) << "q should end collwatch top";
}

// `collwatch run` on a terminal draws the same screen; q gives the terminal back while the
// job goes on, and Ctrl-C then reaches the job, whose output was kept in DIR/job.log.
TEST(TopEndToEndTest, RunShowsTheDashboardOnATerminal) {
  if (!testing::TmuxInstalled()) GTEST_SKIP() << "tmux is not installed (scripts/install_deps.sh)";
  TempDir dir;
  std::string preload_runtime;
  for (const auto& [name, value] : testing::CollwatchRunEnv({})) preload_runtime += name + "=" + value + " ";
  // The shell stays after collwatch exits, so its last words can be read.
  Terminal terminal("env " + preload_runtime + "COLLWATCH_CPU_NCCL_SHM_DIR=" + dir.path() + " " + COLLWATCH_CLI_PATH +
                    " run --out " + dir.path() + "/out --stall-after 5 -- " + COLLWATCH_TRAINER_PATH +
                    " --nproc 4 --scenario image-text --steps 3 --hidden 32 --layers 2 --vision-layers 1 --seq 16"
                    " --vocab 32 --batch 2; echo collwatch-exit=$?; sleep 60");
  std::string screen = terminal.WaitFor(
      [](const std::string& s) { return Has(s, "PATH_DIVERGENCE") && Has(s, "diverged: class 2/2"); }, 90);
  ASSERT_TRUE(Has(screen, "collwatch top  job run-")) << screen;
  for (int rank : {0, 2}) EXPECT_TRUE(Has(RankLine(screen, rank), "diverged: class 1/2 at seq 1")) << screen;

  terminal.Keys("q");
  screen = terminal.WaitFor([](const std::string& s) { return Has(s, "dashboard closed; the job goes on"); }, 10);
  ASSERT_TRUE(Has(screen, "dashboard closed; the job goes on")) << screen;
  terminal.Keys("C-c");
  screen = terminal.WaitFor([](const std::string& s) { return Has(s, "collwatch-exit="); }, 30);
#if defined(__SANITIZE_THREAD__)
  // Under TSan the uninstrumented trainer runs with the TSan runtime preloaded (the
  // preload needs it), which changes how its launcher ends on SIGINT: it ended, whatever
  // its status.
  EXPECT_TRUE(Has(screen, "collwatch-exit=")) << "the job ends on Ctrl-C\n" << screen;
#else
  EXPECT_TRUE(Has(screen, "collwatch-exit=130")) << "the job ends on Ctrl-C\n" << screen;
#endif
  EXPECT_TRUE(Has(screen, "the job's output is in " + dir.path() + "/out/job.log")) << screen;
  std::ifstream log(dir.path() + "/out/job.log");
  const std::string job_output((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(Has(job_output, "collwatch-trainer: scenario image-text, 4 ranks")) << job_output;
}

#endif

}  // namespace
}  // namespace collwatch::top_end_to_end_test
