// Chrome trace export on synthetic jobs: valid JSON, a process per rank, a track per
// communicator, slices with their arguments, overlapping calls on extra tracks, the hang
// as instant events.
#include "analyzer/chrome_export.h"

#include <map>
#include <set>
#include <sstream>

#include "analyzer/test_job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace collwatch::analyzer {
namespace {

using nlohmann::json;
using testing::Gather;
using testing::ReduceScatter;
using testing::TestJob;
using ::testing::HasSubstr;

constexpr uint64_t kWorld = 0x3f2a9c0100000001ull;

json Export(const JobModel& model, ChromeExportStats* stats = nullptr) {
  std::ostringstream out;
  const ChromeExportStats written = WriteChromeTrace(model, out);
  if (stats != nullptr) *stats = written;
  json trace = json::parse(out.str(), nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(trace.is_discarded()) << out.str();
  return trace;
}

std::vector<json> EventsWith(const json& trace, const std::string& phase) {
  std::vector<json> events;
  for (const json& event : trace["traceEvents"]) {
    if (event["ph"] == phase) events.push_back(event);
  }
  return events;
}

// The name of each (pid, tid) track, and of each pid.
std::map<std::pair<int, int>, std::string> TrackNames(const json& trace) {
  std::map<std::pair<int, int>, std::string> names;
  for (const json& event : EventsWith(trace, "M")) {
    if (event["name"] == "thread_name") names[{event["pid"], event["tid"]}] = event["args"]["name"];
    if (event["name"] == "process_name") names[{event["pid"], -1}] = event["args"]["name"];
  }
  return names;
}

TEST(ChromeExportTest, AProcessPerRankATrackPerCommunicatorASlicePerCall) {
  JobModel model;
  TestJob job(&model);
  for (int r = 0; r < 4; ++r) {
    const ProcessId p = job.AddRank(r, "node" + std::to_string(r / 2));
    job.Init(p, kWorld, r, 4);
    job.Collective(p, kWorld, r, 4, Gather("fwd/embed", 256));
    job.Collective(p, kWorld, r, 4, ReduceScatter("bwd/embed", 64));
    if (r < 2) {
      job.Init(p, 0x77, r, 2, kWorld);
      job.Send(p, 0x77, r, 2, 1 - r, 32);
    }
  }
  ChromeExportStats stats;
  const json trace = Export(model, &stats);
  EXPECT_EQ(stats.processes, 4u);
  EXPECT_EQ(stats.ranks, 4u);
  EXPECT_EQ(stats.unfinished, 0u);
  // Per rank: an init and two collectives on the world; ranks 0-1 an init and a send on the child.
  EXPECT_EQ(stats.slices, 4u * 3 + 2u * 2);
  EXPECT_EQ(trace["otherData"]["producer"], "collwatch export --chrome");

  const auto names = TrackNames(trace);
  EXPECT_EQ(names.at({1, -1}), "rank 0 (node0, pid 4000)");
  EXPECT_EQ(names.at({4, -1}), "rank 3 (node1, pid 4003)");
  EXPECT_EQ(names.at({1, 16}), "comm 1 (size 4) 3f2a9c0100000001");
  EXPECT_EQ(names.at({2, 32}), "comm 2 (size 2) 0000000000000077");

  std::set<int> pids;
  int collectives = 0, sends = 0;
  for (const json& slice : EventsWith(trace, "X")) {
    pids.insert(slice["pid"].get<int>());
    EXPECT_GE(slice["ts"].get<double>(), 0.0);
    EXPECT_GE(slice["dur"].get<double>(), 0.0);
    const json& args = slice["args"];
    EXPECT_EQ(args["state"], "completed");
    if (slice["cat"] == "collective") {
      ++collectives;
      EXPECT_EQ(slice["tid"], 16);
      EXPECT_EQ(args["comm"], "3f2a9c0100000001");
      EXPECT_EQ(args["comm_index"], 1);
      if (args["seq"] == 1) {
        EXPECT_EQ(slice["name"], "all-gather fwd/embed");
        EXPECT_EQ(args["op"], "all-gather");
        EXPECT_EQ(args["count"], 256);
        EXPECT_EQ(args["dtype"], "float32");
        EXPECT_EQ(args["bytes"], 1024);
        EXPECT_EQ(args["region"], "fwd/embed");
        EXPECT_FALSE(args.contains("redop"));
      } else {
        EXPECT_EQ(args["seq"], 2);
        EXPECT_EQ(args["redop"], "avg");
      }
    } else if (slice["cat"] == "p2p") {
      ++sends;
      EXPECT_EQ(slice["tid"], 32);
      EXPECT_EQ(args["op"], "send");
      EXPECT_EQ(args["peer"], 1 - (slice["pid"].get<int>() - 1));
    } else {
      EXPECT_EQ(slice["cat"], "communicator");
    }
  }
  EXPECT_EQ(pids, std::set<int>({1, 2, 3, 4}));
  EXPECT_EQ(collectives, 8);
  EXPECT_EQ(sends, 2);
}

TEST(ChromeExportTest, CallsThatNeverReturnedOrCompletedAreTheHang) {
  JobModel model;
  TestJob job(&model);
  for (int r = 0; r < 2; ++r) {
    const ProcessId p = job.AddRank(r);
    job.Init(p, kWorld, r, 2);
    job.Collective(p, kWorld, r, 2, Gather("fwd/embed"));
    if (r == 0) job.Collective(p, kWorld, r, 2, Gather("fwd/vision"), /*returns=*/false);
    if (r == 1) job.AsyncCollective(p, kWorld, r, 2, Gather("fwd/block0"));  // returned, never completed
    job.Wait(p, 5'000'000);
  }
  ChromeExportStats stats;
  const json trace = Export(model, &stats);
  EXPECT_EQ(stats.unfinished, 2u);
  const std::vector<json> instants = EventsWith(trace, "i");
  ASSERT_EQ(instants.size(), 2u);
  std::set<std::string> names;
  for (const json& instant : instants) {
    names.insert(instant["name"]);
    EXPECT_EQ(instant["s"], "t");
    EXPECT_EQ(instant["cat"], "hang");
  }
  EXPECT_EQ(names, std::set<std::string>({"never returned: all-gather #2", "never completed: all-gather #2"}));
  // Their slices reach to the end of the trace.
  const double end_us = (trace["otherData"]["trace_end_realtime_ns"].get<int64_t>() -
                         trace["otherData"]["time_origin_realtime_ns"].get<int64_t>()) / 1000.0;
  int open = 0;
  for (const json& slice : EventsWith(trace, "X")) {
    const std::string name = slice["name"];
    if (name.find("(never") == std::string::npos) continue;
    ++open;
    EXPECT_NEAR(slice["ts"].get<double>() + slice["dur"].get<double>(), end_us, 1e-3) << name;
    EXPECT_THAT(slice["args"]["state"].get<std::string>(), HasSubstr("never"));
  }
  EXPECT_EQ(open, 2);
}

TEST(ChromeExportTest, OverlappingAsyncCallsGoToExtraTracksSoThatSlicesNest) {
  JobModel model;
  TestJob job(&model);
  const ProcessId p = job.AddRank(0);
  job.Init(p, kWorld, 0, 1);
  // Three GPU collectives enqueued back to back; they complete later, in order.
  const uint64_t a = job.AsyncCollective(p, kWorld, 0, 1, Gather("a"));
  const uint64_t b = job.AsyncCollective(p, kWorld, 0, 1, Gather("b"));
  const uint64_t c = job.AsyncCollective(p, kWorld, 0, 1, Gather("c"));
  job.Wait(p, 1'000'000);
  job.Complete(p, a);
  job.Complete(p, b);
  job.Complete(p, c);
  // After they are done, the next one fits on the first track again.
  job.Collective(p, kWorld, 0, 1, Gather("d"));
  const json trace = Export(model);
  std::map<int, std::vector<std::pair<double, double>>> by_track;
  std::map<std::string, int> track_of;
  for (const json& slice : EventsWith(trace, "X")) {
    const double ts = slice["ts"], dur = slice["dur"];
    by_track[slice["tid"]].emplace_back(ts, ts + dur);
    track_of[slice["args"]["region"]] = slice["tid"];
  }
  EXPECT_EQ(track_of["a"], 16);
  EXPECT_EQ(track_of["b"], 17);
  EXPECT_EQ(track_of["c"], 18);
  EXPECT_EQ(track_of["d"], 16);
  for (auto& [tid, slices] : by_track) {
    std::sort(slices.begin(), slices.end());
    for (size_t i = 1; i < slices.size(); ++i) EXPECT_LE(slices[i - 1].second, slices[i].first) << tid;
  }
  EXPECT_EQ(TrackNames(trace).at({1, 17}), "comm 1 (size 1) 3f2a9c0100000001 overlap 1");
}

TEST(ChromeExportTest, RegionsThatAreNotUtf8StillGiveValidJson) {
  JobModel model;
  TestJob job(&model);
  const ProcessId p = job.AddRank(0);
  job.Init(p, kWorld, 0, 1);
  job.Collective(p, kWorld, 0, 1, Gather("bad \xff\xfe region \"quoted\"\n"));
  const json trace = Export(model);
  const std::vector<json> slices = EventsWith(trace, "X");
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_THAT(slices[1]["args"]["region"].get<std::string>(), HasSubstr("region \"quoted\"\n"));
}

TEST(ChromeExportTest, AnEmptyJobIsAnEmptyTrace) {
  JobModel model;
  ChromeExportStats stats;
  const json trace = Export(model, &stats);
  EXPECT_TRUE(trace["traceEvents"].is_array());
  EXPECT_TRUE(trace["traceEvents"].empty());
  EXPECT_EQ(stats.slices, 0u);
}

}  // namespace
}  // namespace collwatch::analyzer
