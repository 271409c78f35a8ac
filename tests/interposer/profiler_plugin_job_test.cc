// libcollwatch.so as NCCL's profiler plugin, on the CPU NCCL backend (which calls a
// plugin as NCCL 2.28 does, or as an older NCCL asking for interface version 1 to 4:
// COLLWATCH_CPU_NCCL_PROFILER_VERSION), each version a test instance: alone
// (NCCL_PROFILER_PLUGIN, no LD_PRELOAD: the calls a statically linked NCCL would hide)
// every collective and send/receive is recorded once, with its completion where the
// version gives one (v4, v5); with the preload too, no record is written twice and every
// call has one completion: the plugin's where it can give it, the wrapper's otherwise.
// CUDA graph replays (v5), as the backend emulates them: recorded at each replay, and a
// rank that replays less named by `collwatch run`.
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cli/exit_codes.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "ring/ring_names.h"
#include "tests/support/read_files.h"
#include "tests/support/ring_ranks.h"
#include "tests/support/run_env.h"
#include "tests/support/subprocess.h"

namespace collwatch::profiler_plugin_job_test {
namespace {

using ring::ApiFn;
using ring::RecordKind;
using testing::EnterNames;
using testing::RankTrace;
using testing::ReadFile;
using testing::ReadJson;
using testing::ReadRanks;
using testing::Subprocess;
using testing::TempDir;

// How many kComplete records name each kEnter (lane, index).
std::map<std::pair<uint32_t, uint64_t>, int> Completions(const RankTrace& trace) {
  std::map<std::pair<uint32_t, uint64_t>, int> count;
  for (const ring::Record& record : trace.OfKind(RecordKind::kComplete)) ++count[{record.ref_lane, record.ref_index}];
  return count;
}

// The kReturn record of each kEnter (lane, index).
std::map<std::pair<uint32_t, uint64_t>, std::vector<ring::Record>> Returns(const RankTrace& trace) {
  std::map<std::pair<uint32_t, uint64_t>, std::vector<ring::Record>> returns;
  for (const ring::Record& record : trace.OfKind(RecordKind::kReturn)) {
    returns[{record.ref_lane, record.ref_index}].push_back(record);
  }
  return returns;
}

// The parameter: the profiler interface version the CPU backend asks for, as NCCL 2.28
// (5), 2.27 (4), 2.26 (3), 2.24-2.25 (2) or 2.23 (1) does.
class ProfilerPluginTest : public ::testing::TestWithParam<int> {
 protected:
  int version() const { return GetParam(); }
  // Versions that say how many channels a launch runs on, so that the plugin can see it end.
  bool PluginCompletes() const { return version() >= 4; }
  std::map<std::string, std::string> Env(bool preload) const {
    std::map<std::string, std::string> env = {{"NCCL_PROFILER_PLUGIN", COLLWATCH_PRELOAD_PATH},
                                              {"COLLWATCH_CPU_NCCL_PROFILER_VERSION", std::to_string(version())},
                                              {"COLLWATCH_RING_DIR", dir_.path() + "/rings"},
                                              {"COLLWATCH_CPU_NCCL_SHM_DIR", dir_.path()}};
    if (preload) env["LD_PRELOAD"] = COLLWATCH_PRELOAD_LIST;
    return env;
  }
  std::vector<std::string> Ranks(int nproc) const {
    return {COLLWATCH_NCCL_RANKS_PATH, std::to_string(nproc), "all", dir_.path()};
  }
  TempDir dir_;
};

TEST_P(ProfilerPluginTest, AloneItRecordsEveryCallNcclReportsWithItsCompletion) {
  constexpr int kRanks = 3;
  Subprocess job(Ranks(kRanks), Env(/*preload=*/false));
  ASSERT_EQ(job.Wait(60), 0) << "the program's own result checks failed with the plugin";
  std::map<int, RankTrace> ranks = ReadRanks(dir_.path() + "/rings", /*writers_gone=*/true);
  ASSERT_EQ(ranks.size(), static_cast<size_t>(kRanks));
  // What NCCL's profiler reports: collectives (all-to-all, gather and scatter reach it as
  // sends and receives, which the CPU backend does not emulate), and each send/receive.
  const std::vector<std::string> expected = {"all-reduce", "broadcast",      "broadcast", "reduce",
                                             "all-gather", "reduce-scatter", "send",      "recv",
                                             "all-reduce", "all-reduce",     "all-reduce"};
  std::set<uint64_t> world_ids;
  for (const auto& [rank, trace] : ranks) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(EnterNames(trace), expected);
    const std::vector<ring::Record> enters = trace.OfKind(RecordKind::kEnter);
    ASSERT_FALSE(enters.empty());
    auto returns = Returns(trace);
    const auto completions = Completions(trace);
    for (const IndexedRecord& item : trace.records) {
      if (item.record.kind != static_cast<uint16_t>(RecordKind::kEnter)) continue;
      const std::string name(OpName(static_cast<ApiFn>(item.record.fn)));
      const std::vector<ring::Record>& its_returns = returns[{item.lane, item.index}];
      ASSERT_EQ(its_returns.size(), 1u) << name;
      // v1..v3 cannot see a launch end: the return says no completion will come, which
      // the analyzer reads as complete at return (no false stall).
      EXPECT_EQ((completions.count({item.lane, item.index})), PluginCompletes() ? 1u : 0u) << name;
      EXPECT_EQ((its_returns[0].flags & ring::kFlagNoCompletion) != 0, !PluginCompletes()) << name;
      EXPECT_GE(item.record.rank, 0);
      // Before v5 NCCL names a call only at its launch, with all-gathers and broadcasts
      // in bytes of ncclInt8 (the program all-gathers 4 float32s, broadcasts 8).
      if (item.record.fn == static_cast<uint16_t>(ApiFn::kAllGather)) {
        EXPECT_EQ(item.record.count, version() >= 5 ? 4u : 16u);
        EXPECT_EQ(item.record.dtype, version() >= 5 ? 7u : 0u);
      }
    }
    // The world communicator: the same id on every rank, collectives numbered 1.. in order;
    // its size where NCCL gives it to the plugin (init from v4 on).
    world_ids.insert(enters[0].comm_id);
    EXPECT_NE(enters[0].comm_id, 0u);
    EXPECT_EQ(enters[0].nranks, version() >= 4 ? kRanks : ring::kUnset);
    uint64_t seq = 0;
    for (const ring::Record& record : enters) {
      if (record.comm_id != enters[0].comm_id || !ring::IsCollective(static_cast<ApiFn>(record.fn))) continue;
      EXPECT_EQ(record.seq, ++seq);
    }
    EXPECT_EQ(seq, 8u);
    EXPECT_EQ(enters[0].count, 8u);
    EXPECT_EQ(enters[0].dtype, 7u);  // ncclFloat32
  }
  EXPECT_EQ(world_ids.size(), 1u);
}

TEST_P(ProfilerPluginTest, WithThePreloadEveryRecordIsWrittenOnceAndEveryCallCompletesOnce) {
  constexpr int kRanks = 2;
  Subprocess job(Ranks(kRanks), Env(/*preload=*/true));
  ASSERT_EQ(job.Wait(60), 0);
  std::map<int, RankTrace> ranks = ReadRanks(dir_.path() + "/rings", /*writers_gone=*/true);
  ASSERT_EQ(ranks.size(), static_cast<size_t>(kRanks));
  for (const auto& [rank, trace] : ranks) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    std::vector<std::string> expected = {
        "comm-init-rank", "all-reduce", "broadcast", "bcast", "reduce", "all-gather", "reduce-scatter",
        "all-to-all", "gather", "scatter", "group-start", "send", "recv", "group-end", "group-start",
        "group-start", "all-reduce", "group-end", "all-reduce", "group-end", "comm-split", "all-reduce",
        "comm-destroy", "comm-finalize", "comm-destroy"};
    if (rank == 0) expected.insert(expected.begin(), "get-unique-id");
    EXPECT_EQ(EnterNames(trace), expected) << "the plugin wrote no call of its own";
    // Without CUDA the preload alone marks calls complete at return; where the version
    // says when a launch ends (v4, v5), the plugin gives the ungrouped collectives NCCL
    // reports a completion record instead, one each. Either way, one completion a call.
    const auto completions = Completions(trace);
    auto returns = Returns(trace);
    int completed = 0;
    for (const IndexedRecord& item : trace.records) {
      if (item.record.kind != static_cast<uint16_t>(RecordKind::kEnter)) continue;
      const auto fn = static_cast<ApiFn>(item.record.fn);
      const bool reported = ring::IsCollective(fn) && fn != ApiFn::kAlltoAll && fn != ApiFn::kGather &&
                            fn != ApiFn::kScatter && item.record.group_id == 0;
      auto found = completions.find({item.lane, item.index});
      const int count = found == completions.end() ? 0 : found->second;
      EXPECT_EQ(count, reported && PluginCompletes() ? 1 : 0) << OpName(fn) << " at " << item.index;
      completed += count;
      if ((ring::IsCollective(fn) || ring::IsP2p(fn)) && item.record.group_id == 0) {
        const std::vector<ring::Record>& its_returns = returns[{item.lane, item.index}];
        ASSERT_EQ(its_returns.size(), 1u) << OpName(fn) << " at " << item.index;
        const bool at_return = (its_returns[0].flags & ring::kFlagCompletesAtReturn) != 0;
        EXPECT_EQ(at_return, count == 0) << OpName(fn) << " at " << item.index << ": the wrapper's completion";
      }
    }
    EXPECT_EQ(completed, PluginCompletes() ? 7 : 0);
  }
}

INSTANTIATE_TEST_SUITE_P(ByInterfaceVersion, ProfilerPluginTest, ::testing::Values(5, 4, 3, 2, 1),
                         [](const ::testing::TestParamInfo<int>& param) { return "v" + std::to_string(param.param); });

// CUDA graphs as the CPU backend emulates them for NCCL 2.28 (interface version 5: at each
// replay, from a thread of its own, a Coll event whose parent is its capture's API event):
// tests/programs/nccl_ranks.cc's `graph` plan captures an all-reduce of 4 floats once,
// replays it 3 times, then all-reduces 1 float as a barrier.
class ProfilerPluginGraphTest : public ProfilerPluginTest {
 protected:
  // The program's rendezvous and shared-memory folder: one per run (a second run in the
  // same one would read the first's unique id).
  std::string RunDir(const std::string& name) const {
    const std::string dir = dir_.path() + "/" + name;
    std::filesystem::create_directories(dir);
    return dir;
  }
};

TEST_P(ProfilerPluginGraphTest, EveryReplayIsRecordedAndCompletedAloneAndWithThePreload) {
  for (const bool preload : {false, true}) {
    SCOPED_TRACE(preload ? "with the preload" : "alone");
    const std::string run = RunDir(preload ? "preload" : "alone");
    const std::string rings = run + "/rings";
    std::map<std::string, std::string> env = Env(preload);
    env["COLLWATCH_RING_DIR"] = rings;
    env["COLLWATCH_CPU_NCCL_SHM_DIR"] = run;
    Subprocess job({COLLWATCH_NCCL_RANKS_PATH, "2", "graph", run}, env);
    ASSERT_EQ(job.Wait(60), 0) << "the program's own result checks failed";
    const std::map<int, RankTrace> ranks = ReadRanks(rings, /*writers_gone=*/true);
    ASSERT_EQ(ranks.size(), 2u);
    for (const auto& [rank, trace] : ranks) {
      SCOPED_TRACE("rank " + std::to_string(rank));
      const auto completions = Completions(trace);
      std::vector<ring::Record> host_calls;
      std::vector<ring::Record> replays;
      for (const IndexedRecord& item : trace.records) {
        if (item.record.kind != static_cast<uint16_t>(RecordKind::kEnter) ||
            item.record.fn != static_cast<uint16_t>(ApiFn::kAllReduce)) {
          continue;
        }
        const bool replay = (item.record.flags & ring::kFlagReplay) != 0;
        (replay ? replays : host_calls).push_back(item.record);
        if (replay) {
          EXPECT_EQ((completions.count({item.lane, item.index})), 1u) << "replay " << item.record.seq;
        }
      }
      // The capture (flagged captured where the plugin wrote it; the preload needs CUDA to
      // tell), then the barrier, numbered as if no replay had run.
      ASSERT_EQ(host_calls.size(), 2u);
      const ring::Record& capture = host_calls[0];
      EXPECT_EQ(capture.count, 4u);
      EXPECT_EQ((capture.flags & ring::kFlagCaptured) != 0, !preload);
      EXPECT_EQ(host_calls[1].count, 1u);
      EXPECT_EQ(host_calls[1].seq, capture.seq + 1);
      ASSERT_EQ(replays.size(), 3u);
      for (size_t i = 0; i < replays.size(); ++i) {
        EXPECT_EQ(replays[i].seq, i + 1);
        EXPECT_EQ(replays[i].aux0, capture.seq) << "the capture it replays";
        EXPECT_EQ(replays[i].comm_id, capture.comm_id);
        EXPECT_EQ(replays[i].count, 4u);
        EXPECT_EQ(replays[i].dtype, 7u);  // ncclFloat32
      }
    }
  }
}

// The last rank replays the graph twice only and goes on to the barrier: the other's third
// replay waits for it. `collwatch run` names that in the communicator's replay lane, the
// late rank the one that replayed less, before the barrier it never reached.
TEST_P(ProfilerPluginGraphTest, ARankThatReplaysAGraphLessIsNamedInTheReplayLane) {
  const std::string out = dir_.path() + "/out";
  const std::string log = dir_.path() + "/run.log";
  Subprocess run({COLLWATCH_CLI_PATH, "run", "--no-dashboard", "--out", out, "--ring-dir", dir_.path() + "/run-rings",
                  "--profiler-plugin", "--kill-on-hang", "--stall-after", "3", "--", COLLWATCH_NCCL_RANKS_PATH, "2",
                  "graph-skip", dir_.path()},
                 testing::CollwatchRunEnv({{"COLLWATCH_CPU_NCCL_SHM_DIR", dir_.path()}}), "", log);
  EXPECT_EQ(run.Wait(90), kExitStoppedHungJob) << ReadFile(log);
  const nlohmann::json report = ReadJson(out + "/report.json");
  ASSERT_TRUE(report.is_object() && report["findings"].is_array() && !report["findings"].empty()) << ReadFile(log);
  const nlohmann::json& first = report["findings"][0];
  EXPECT_EQ(first["kind"], "NOT_JOINED");
  EXPECT_NE(first["headline"].get<std::string>().find("(CUDA graph replays)"), std::string::npos) << first["headline"];
  EXPECT_EQ(first["seq"], 3);
  EXPECT_EQ(first["lagging_ranks"], nlohmann::json::array({1}));
}

INSTANTIATE_TEST_SUITE_P(Nccl228, ProfilerPluginGraphTest, ::testing::Values(5),
                         [](const ::testing::TestParamInfo<int>& param) { return "v" + std::to_string(param.param); });

}  // namespace
}  // namespace collwatch::profiler_plugin_job_test
