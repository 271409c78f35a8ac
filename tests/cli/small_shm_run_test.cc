// `collwatch run` with its rings on a small tmpfs, as in a container whose /dev/shm is a
// few MiB: each run is a mount namespace of its own (unshare -m, as root) with a fresh
// tmpfs as the ring folder. On 30 MiB every rank is recorded in rings sized down to the
// free space; where even the floor does not fit, the ranks without a ring are reported
// with their note's reason, online and post-mortem alike, never as "gone without ever
// calling NCCL". Threading: single-threaded; the runs are child processes.
#include <unistd.h>

#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/read_files.h"
#include "tests/support/run_env.h"
#include "tests/support/subprocess.h"

namespace collwatch::small_shm_run_test {
namespace {

using testing::ReadFile;
using testing::ReadJson;
using testing::Subprocess;
using testing::TempDir;

constexpr int kRanks = 4;
constexpr uint64_t kDefaultRingBytes = 19 << 20;  // a ring as big free space gets: 19.9 MB

bool Has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string UnsharePath() {
  for (const char* path : {"/usr/bin/unshare", "/bin/unshare"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

// Whether this process may mount a tmpfs in a mount namespace of its own: "" when it
// may, else why not (the test is skipped then).
std::string CannotMount(const TempDir& dir) {
  if (geteuid() != 0) return "needs root, to mount a tmpfs in a mount namespace (unshare -m)";
  const std::string unshare = UnsharePath();
  if (unshare.empty()) return "needs unshare(1) (util-linux)";
  const std::string mount_point = dir.path() + "/probe";
  Subprocess probe({unshare, "-m", "sh", "-c", "mkdir -p \"$0\" && mount -t tmpfs -o size=1m tmpfs \"$0\"",
                    mount_point},
                   {}, "", dir.path() + "/probe.err");
  if (probe.Wait(30) != 0) {
    return "unshare -m + mount -t tmpfs refused here: " + ReadFile(dir.path() + "/probe.err");
  }
  return "";
}

struct SmallShmRun {
  int exit_code = -1;
  std::string err;              // collwatch run's stderr
  nlohmann::json report;        // report.json
  std::string text;             // report.txt
  nlohmann::json analyzed;      // collwatch analyze --json of the ring folder, in the namespace
  std::vector<uint64_t> rings;  // the sizes of the rings left in the ring folder
};

// `collwatch run` of kRanks ranks of the plan `all`, its rings on a tmpfs of `size` (mount's
// size=), `fill_kib` of which a file takes first; then `collwatch analyze` of the ring
// folder and the rings' sizes, read before the namespace and its tmpfs go.
SmallShmRun RunOnTmpfs(const TempDir& dir, const std::string& size, int fill_kib) {
  const std::string shm = dir.path() + "/shm";
  const std::string rings = shm + "/collwatch-rings";
  const std::string out = dir.path() + "/out";
  std::ostringstream script;
  script << "set -u; mkdir -p '" << shm << "' && mount -t tmpfs -o size=" << size << ",mode=0700 tmpfs '" << shm
         << "' || exit 97\n";
  // dd runs without the sanitizer runtime the test environment preloads (it may refuse an
  // uninstrumented program): a filler that failed would leave room for every ring.
  if (fill_kib > 0) {
    script << "env -u LD_PRELOAD dd if=/dev/zero of='" << shm << "/filler' bs=1024 count=" << fill_kib
           << " 2>/dev/null || exit 96\n";
  }
  script << "'" << COLLWATCH_CLI_PATH << "' run --out '" << out << "' --ring-dir '" << rings << "' -- '"
         << COLLWATCH_NCCL_RANKS_PATH << "' " << kRanks << " all '" << dir.path() << "'\n"
         << "status=$?\n"
         << "'" << COLLWATCH_CLI_PATH << "' analyze --json '" << rings << "' > '" << dir.path()
         << "/analyzed.json' 2> '" << dir.path() << "/analyze.err'\n"
         << "for ring in '" << rings << "'/*.ring; do [ -f \"$ring\" ] && stat -c %s \"$ring\"; done > '" << dir.path()
         << "/ring_sizes'\n"
         << "exit $status\n";
  Subprocess run({UnsharePath(), "-m", "sh", "-c", script.str()},
                 testing::CollwatchRunEnv({{"COLLWATCH_CPU_NCCL_SHM_DIR", dir.path()}}), dir.path() + "/run.out",
                 dir.path() + "/run.err");
  SmallShmRun result;
  result.exit_code = run.Wait(180);
  result.err = ReadFile(dir.path() + "/run.err");
  result.report = ReadJson(out + "/report.json");
  result.text = ReadFile(out + "/report.txt");
  result.analyzed = ReadJson(dir.path() + "/analyzed.json");
  std::istringstream sizes(ReadFile(dir.path() + "/ring_sizes"));
  for (uint64_t bytes = 0; sizes >> bytes;) result.rings.push_back(bytes);
  return result;
}

TEST(SmallShmRunTest, On30MiBEveryRankIsRecordedInSmallerRings) {
  TempDir dir;
  if (const std::string why = CannotMount(dir); !why.empty()) GTEST_SKIP() << why;
  const SmallShmRun run = RunOnTmpfs(dir, "30m", 0);
  ASSERT_NE(run.exit_code, 97) << "mount refused in the run's namespace:\n" << run.err;
  EXPECT_EQ(run.exit_code, 0) << run.err;
  ASSERT_TRUE(run.report.is_object()) << run.err;
  EXPECT_EQ(run.report["healthy"], true) << run.report.dump(2) << "\n" << run.err;
  ASSERT_EQ(run.report["ranks"].size(), static_cast<size_t>(kRanks)) << run.report["ranks"].dump(2);
  for (const nlohmann::json& rank : run.report["ranks"]) {
    SCOPED_TRACE(rank.dump());
    EXPECT_EQ(rank["ended"], "exited");
    EXPECT_EQ(rank["exit_code"], 0);
    EXPECT_TRUE(rank["not_recorded"].is_null());
    EXPECT_TRUE(rank["last_call"].is_string());
  }
  EXPECT_FALSE(Has(run.err, "cannot create ring")) << run.err;
  // Four default rings (4 x 19.9 MB) would never fit in 30 MiB: each was made smaller.
  ASSERT_EQ(run.rings.size(), static_cast<size_t>(kRanks)) << "the rings stay in a folder the user named";
  for (const uint64_t bytes : run.rings) EXPECT_LT(bytes, kDefaultRingBytes / 2);
  EXPECT_EQ(run.analyzed["healthy"], true) << run.analyzed.dump(2);
}

TEST(SmallShmRunTest, RanksWhoseRingCannotFitAreReportedWithTheReason) {
  TempDir dir;
  if (const std::string why = CannotMount(dir); !why.empty()) GTEST_SKIP() << why;
  // 4 MiB with 2.5 MiB taken: room for one or two rings at the floor (about 0.9 MiB), never four.
  const SmallShmRun run = RunOnTmpfs(dir, "4m", 2560);
  ASSERT_NE(run.exit_code, 97) << "mount refused in the run's namespace:\n" << run.err;
  ASSERT_NE(run.exit_code, 96) << "the filler could not be written:\n" << run.err;
  EXPECT_EQ(run.exit_code, 0) << "the ranks without a ring ran as if collwatch were not there:\n" << run.err;
  ASSERT_TRUE(run.report.is_object()) << run.err;
  EXPECT_EQ(run.report["healthy"], false) << run.report.dump(2);
  ASSERT_EQ(run.report["ranks"].size(), static_cast<size_t>(kRanks)) << run.report["ranks"].dump(2);
  int unrecorded = 0;
  for (const nlohmann::json& rank : run.report["ranks"]) {
    SCOPED_TRACE(rank.dump());
    if (rank["not_recorded"].is_null()) {
      EXPECT_EQ(rank["exit_code"], 0) << "a rank with a ring is recorded to its end";
      continue;
    }
    ++unrecorded;
    const std::string why = rank["not_recorded"];
    EXPECT_TRUE(Has(why, "no ring: ")) << why;
    EXPECT_TRUE(Has(why, dir.path() + "/shm/collwatch-rings")) << why;
    EXPECT_TRUE(Has(why, "raise the container's shm size (docker --shm-size")) << why;
    EXPECT_TRUE(rank["last_call"].is_null());
    EXPECT_TRUE(Has(run.text, "not recorded: " + why)) << run.text;
  }
  EXPECT_GE(unrecorded, 1) << run.report.dump(2);
  EXPECT_LE(unrecorded, kRanks - 1) << "one ring at the floor fits: " << run.report.dump(2);
  EXPECT_EQ(run.rings.size(), static_cast<size_t>(kRanks - unrecorded));
  // The verdict and the report give the reason, never "gone without ever calling NCCL".
  const std::string not_recorded = unrecorded == 1 ? " was not recorded (no ring: " : " were not recorded (no ring: ";
  EXPECT_TRUE(Has(run.err, "collwatch run: not healthy: the data is incomplete")) << run.err;
  EXPECT_TRUE(Has(run.err, not_recorded)) << run.err;
  EXPECT_TRUE(Has(run.text, not_recorded)) << run.text;
  EXPECT_FALSE(Has(run.text, "left no trace")) << "the reason is said instead:\n" << run.text;
  EXPECT_FALSE(Has(run.text, "without ever calling NCCL")) << run.text;
  EXPECT_FALSE(Has(run.err, "without ever calling NCCL")) << run.err;

  // Post-mortem, `collwatch analyze` of the ring folder reads the same notes.
  ASSERT_TRUE(run.analyzed.is_object()) << ReadFile(dir.path() + "/analyze.err");
  EXPECT_EQ(run.analyzed["healthy"], false);
  int analyzed_unrecorded = 0;
  for (const nlohmann::json& rank : run.analyzed["ranks"]) analyzed_unrecorded += rank["not_recorded"].is_string();
  EXPECT_EQ(analyzed_unrecorded, unrecorded) << run.analyzed["ranks"].dump(2);
}

}  // namespace
}  // namespace collwatch::small_shm_run_test
