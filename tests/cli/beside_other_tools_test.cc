// `collwatch run` beside other tools (#37): an NVTX tool named by NVTX_INJECTION64_PATH (as
// Nsight Systems sets it) still sees the job's ranges while collwatch's records carry them
// as regions; --profiler-plugin refuses an NCCL_PROFILER_PLUGIN naming another plugin.
// Threading: single-threaded test code.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/read_files.h"
#include "tests/support/run_env.h"
#include "tests/support/subprocess.h"

namespace collwatch::beside_other_tools_test {
namespace {

using testing::ReadFile;
using testing::Subprocess;
using testing::TempDir;

bool Has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(BesideOtherToolsTest, AnNvtxToolAlreadyInjectedStillSeesTheRanges) {
  TempDir dir;
  const std::string tool_log = dir.path() + "/tool.log";
  const std::string out = dir.path() + "/out";
  Subprocess run({COLLWATCH_CLI_PATH, "run", "--no-dashboard", "--out", out, "--", COLLWATCH_NCCL_RANKS_PATH, "2",
                  "all", dir.path()},
                 testing::CollwatchRunEnv({{"COLLWATCH_CPU_NCCL_SHM_DIR", dir.path()},
                                           {"NVTX_INJECTION64_PATH", COLLWATCH_NVTX_TOOL_PATH},
                                           {"COLLWATCH_TEST_NVTX_LOG", tool_log}}),
                 dir.path() + "/run.out", dir.path() + "/run.err");
  ASSERT_EQ(run.Wait(60), 0) << ReadFile(dir.path() + "/run.err");
  const std::string seen = ReadFile(tool_log);
  EXPECT_TRUE(Has(seen, "initialized")) << seen;
  for (const char* range : {"push collectives", "push p2p", "push split", "pop"}) {
    EXPECT_TRUE(Has(seen, range)) << range << " not seen by the tool:\n" << seen;
  }
  Subprocess dump({COLLWATCH_CLI_PATH, "dump", out}, testing::CollwatchRunEnv({}), dir.path() + "/dump.out");
  ASSERT_EQ(dump.Wait(60), 0);
  const std::string records = ReadFile(dir.path() + "/dump.out");
  for (const char* region : {"collectives", "p2p", "split"}) {
    EXPECT_TRUE(Has(records, region)) << region << " not in collwatch's records:\n" << records.substr(0, 3000);
  }
}

TEST(BesideOtherToolsTest, AChainedToolThatCannotLoadIsSaidAndTheRunGoesOn) {
  TempDir dir;
  const std::string out = dir.path() + "/out";
  Subprocess run({COLLWATCH_CLI_PATH, "run", "--no-dashboard", "--out", out, "--", COLLWATCH_NCCL_RANKS_PATH, "2",
                  "all", dir.path()},
                 testing::CollwatchRunEnv({{"COLLWATCH_CPU_NCCL_SHM_DIR", dir.path()},
                                           {"NVTX_INJECTION64_PATH", "/nonexistent/libnvtx-tool.so"}}),
                 dir.path() + "/run.out", dir.path() + "/run.err");
  ASSERT_EQ(run.Wait(60), 0) << ReadFile(dir.path() + "/run.err");
  const std::string job_output = ReadFile(dir.path() + "/run.err") + ReadFile(dir.path() + "/run.out");
  EXPECT_TRUE(Has(job_output, "cannot hand NVTX on to COLLWATCH_NVTX_CHAIN=/nonexistent/libnvtx-tool.so"))
      << job_output;
  Subprocess dump({COLLWATCH_CLI_PATH, "dump", out}, testing::CollwatchRunEnv({}), dir.path() + "/dump.out");
  ASSERT_EQ(dump.Wait(60), 0);
  EXPECT_TRUE(Has(ReadFile(dir.path() + "/dump.out"), "collectives"));
}

// NCCL loads one profiler plugin; collwatch does not forward NCCL's profiler calls.
TEST(BesideOtherToolsTest, ProfilerPluginRefusesAnotherPluginNamingBoth) {
  TempDir dir;
  Subprocess run({COLLWATCH_CLI_PATH, "run", "--profiler-plugin", "--out", dir.path() + "/out", "--", "true"},
                 testing::CollwatchRunEnv({{"NCCL_PROFILER_PLUGIN", "/opt/other/libnccl-profiler-inspector.so"}}),
                 dir.path() + "/run.out", dir.path() + "/run.err");
  EXPECT_NE(run.Wait(30), 0) << "collwatch run's own failure code";
  const std::string err = ReadFile(dir.path() + "/run.err");
  EXPECT_TRUE(Has(err, "NCCL_PROFILER_PLUGIN=/opt/other/libnccl-profiler-inspector.so names another one")) << err;
  EXPECT_TRUE(Has(err, "unset NCCL_PROFILER_PLUGIN")) << err;
  EXPECT_TRUE(Has(err, "run without --profiler-plugin")) << err;
}

}  // namespace
}  // namespace collwatch::beside_other_tools_test
