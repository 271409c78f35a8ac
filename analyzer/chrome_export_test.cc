// Chrome trace export on synthetic jobs, fed as a reader of their traces feeds it (two
// passes, each process in small pieces): valid JSON, a process per rank, a track per
// communicator, slices with their arguments, overlapping calls on extra tracks, the hang
// as instant events, findings as markers with arrows between the ranks' calls, the time
// base, the rank filter and the window; and the same trace whatever the piece size.
#include "analyzer/chrome_export.h"

#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "analyzer/synthetic_job.h"
#include "analyzer/test_job.h"
#include "files/json_contract.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace collwatch::analyzer::chrome_export_test {
namespace {

using nlohmann::json;
using testing::Gather;
using testing::ReduceScatter;
using testing::TestJob;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint64_t kWorld = 0x3f2a9c0100000001ull;

// Both passes over the recorded processes, each process's records in pieces of
// `piece_records` (its names in a piece of their own first, as a trace reader sends them).
json Export(const RecordedJob& job, ChromeExportOptions options = {}, ChromeExportStats* stats = nullptr,
            size_t piece_records = 3) {
  ChromeTraceExport exporter(std::move(options));
  const auto pass = [&] {
    for (const RecordedJob::RecordedProcess& process : job.processes()) {
      if (!exporter.BeginProcess(process.info)) continue;
      ProcessUpdate names;
      names.regions = process.update.regions;
      names.call_paths = process.update.call_paths;
      exporter.AddPiece(names);
      const std::vector<IndexedRecord>& records = process.update.records;
      for (size_t i = 0; i < records.size(); i += piece_records) {
        ProcessUpdate piece;
        const size_t end = std::min(records.size(), i + piece_records);
        piece.records.assign(records.begin() + static_cast<std::ptrdiff_t>(i),
                             records.begin() + static_cast<std::ptrdiff_t>(end));
        exporter.AddPiece(piece);
      }
      exporter.EndProcess();
    }
  };
  pass();
  std::ostringstream out;
  exporter.StartWriting(out);
  pass();
  const ChromeExportStats written = exporter.Finish();
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
  RecordedJob recorded;
  TestJob job(&recorded);
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
  const json trace = Export(recorded, {}, &stats);
  EXPECT_EQ(stats.processes, 4u);
  EXPECT_EQ(stats.ranks, 4u);
  EXPECT_EQ(stats.unfinished, 0u);
  // Per rank: an init and two collectives on the world; ranks 0-1 an init and a send on the child.
  EXPECT_EQ(stats.slices, 4u * 3 + 2u * 2);
  EXPECT_EQ(trace["otherData"]["producer"], "collwatch export --format chrome");

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
  // Relative time: ts 0 is the job's first call, and the head says when that was.
  EXPECT_EQ(trace["baseTimeNanoseconds"], trace["otherData"]["first_call_realtime_ns"]);
  EXPECT_EQ(trace["otherData"]["time_origin_realtime_ns"], trace["baseTimeNanoseconds"]);
  double earliest = 1e300;
  for (const json& slice : EventsWith(trace, "X")) earliest = std::min(earliest, slice["ts"].get<double>());
  EXPECT_EQ(earliest, 0.0);
}

TEST(ChromeExportTest, CallsThatNeverReturnedOrCompletedAreTheHang) {
  RecordedJob recorded;
  TestJob job(&recorded);
  for (int r = 0; r < 2; ++r) {
    const ProcessId p = job.AddRank(r);
    job.Init(p, kWorld, r, 2);
    job.Collective(p, kWorld, r, 2, Gather("fwd/embed"));
    if (r == 0) job.Collective(p, kWorld, r, 2, Gather("fwd/vision"), /*returns=*/false);
    if (r == 1) job.AsyncCollective(p, kWorld, r, 2, Gather("fwd/block0"));  // returned, never completed
    job.Wait(p, 5'000'000);
  }
  ChromeExportStats stats;
  const json trace = Export(recorded, {}, &stats);
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
  RecordedJob recorded;
  TestJob job(&recorded);
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
  const json trace = Export(recorded);
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
  RecordedJob recorded;
  TestJob job(&recorded);
  const ProcessId p = job.AddRank(0);
  job.Init(p, kWorld, 0, 1);
  job.Collective(p, kWorld, 0, 1, Gather("bad \xff\xfe region \"quoted\"\n"));
  const json trace = Export(recorded);
  const std::vector<json> slices = EventsWith(trace, "X");
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_THAT(slices[1]["args"]["region"].get<std::string>(), HasSubstr("region \"quoted\"\n"));
}

TEST(ChromeExportTest, AnEmptyJobIsAnEmptyTrace) {
  RecordedJob recorded;
  ChromeExportStats stats;
  const json trace = Export(recorded, {}, &stats);
  EXPECT_TRUE(trace["traceEvents"].is_array());
  EXPECT_TRUE(trace["traceEvents"].empty());
  EXPECT_EQ(stats.slices, 0u);
}

// Four ranks on the world communicator: a gather each, then at collective 2 ranks 0-1 in
// "fwd/vision" and ranks 2-3 in "fwd/text", each rank a little later than the one before.
RecordedJob DivergedJob(std::vector<ProcessId>* processes = nullptr) {
  RecordedJob recorded;
  TestJob job(&recorded);
  for (int r = 0; r < 4; ++r) {
    const ProcessId p = job.AddRank(r);
    if (processes != nullptr) processes->push_back(p);
    job.Wait(p, r * 10'000);
    job.Init(p, kWorld, r, 4);
    job.Collective(p, kWorld, r, 4, Gather("fwd/embed"));
    job.Collective(p, kWorld, r, 4, Gather(r < 2 ? "fwd/vision" : "fwd/text"), /*returns=*/false);
  }
  return recorded;
}

// The X slice whose (pid, tid, ts) a flow event names: the call it is bound to.
const json* SliceAt(const json& trace, const json& flow) {
  for (const json& slice : trace["traceEvents"]) {
    if (slice["ph"] == "X" && slice["pid"] == flow["pid"] && slice["tid"] == flow["tid"] && slice["ts"] == flow["ts"]) {
      return &slice;
    }
  }
  return nullptr;
}

TEST(ChromeExportTest, AFindingIsAMarkerAtItsFirstBadRecordWithArrowsBetweenTheRanksCalls) {
  const RecordedJob recorded = DivergedJob();
  ChromeExportOptions options;
  TraceMarker marker{"PATH_DIVERGENCE", "PATH_DIVERGENCE at comm 3f2a9c01 seq 2: ranks 0-1 in fwd/vision, ranks 2-3 in "
                     "fwd/text", kWorld, 2, false, {0, 1, 2, 3}, 0};
  // Its first bad record: rank 1's call #2 (any realtime within the trace).
  const json plain = Export(recorded);
  const int64_t origin = plain["otherData"]["first_call_realtime_ns"];
  marker.first_bad_ns = origin + 123'456;
  options.markers = {marker};
  ChromeExportStats stats;
  const json trace = Export(recorded, options, &stats);
  EXPECT_EQ(stats.markers, 1u);
  EXPECT_EQ(stats.arrows, 3u);  // four ranks' calls #2, joined one to the next

  std::vector<json> markers;
  for (const json& instant : EventsWith(trace, "i")) {
    if (instant["cat"] == "finding") markers.push_back(instant);
  }
  ASSERT_EQ(markers.size(), 1u);
  EXPECT_EQ(markers[0]["s"], "g");
  EXPECT_EQ(markers[0]["name"], "PATH_DIVERGENCE at comm 3f2a9c01 seq 2: ranks 0-1 in fwd/vision, ranks 2-3 in fwd/text");
  EXPECT_EQ(markers[0]["args"]["kind"], "PATH_DIVERGENCE");
  EXPECT_DOUBLE_EQ(markers[0]["ts"].get<double>(), 123.456);
  EXPECT_EQ(markers[0]["args"]["comm"], "3f2a9c0100000001");
  EXPECT_EQ(markers[0]["args"]["seq"], 2);
  EXPECT_EQ(markers[0]["args"]["ranks"], json::array({0, 1, 2, 3}));

  const std::vector<json> starts = EventsWith(trace, "s");
  const std::vector<json> ends = EventsWith(trace, "f");
  ASSERT_EQ(starts.size(), 3u);
  ASSERT_EQ(ends.size(), 3u);
  std::set<int> ranks_joined;
  for (size_t i = 0; i < starts.size(); ++i) {
    EXPECT_EQ(starts[i]["id"], ends[i]["id"]);
    EXPECT_EQ(starts[i]["cat"], "finding");
    EXPECT_EQ(ends[i]["bp"], "e");  // bound to the slice it lands in
    EXPECT_LE(starts[i]["ts"].get<double>(), ends[i]["ts"].get<double>());
    for (const json& end : {starts[i], ends[i]}) {
      const json* slice = SliceAt(trace, end);
      ASSERT_NE(slice, nullptr) << end.dump();
      EXPECT_EQ((*slice)["args"]["seq"], 2);
      ranks_joined.insert((*slice)["args"]["rank"].get<int>());
    }
  }
  EXPECT_EQ(ranks_joined, std::set<int>({0, 1, 2, 3}));
  // From rank 0's call to rank 3's, in the order they were entered.
  EXPECT_EQ(SliceAt(trace, starts[0])->at("args")["rank"], 0);
  EXPECT_EQ(SliceAt(trace, ends[2])->at("args")["rank"], 3);
}

TEST(ChromeExportTest, PointToPointAndCreationFindingsJoinTheirOwnCalls) {
  RecordedJob recorded;
  TestJob job(&recorded);
  for (int r = 0; r < 2; ++r) {
    const ProcessId p = job.AddRank(r);
    job.Init(p, kWorld, r, 2);
    job.Collective(p, kWorld, r, 2, Gather("fwd"));  // collective #1: no arrow of the p2p finding
    job.Send(p, kWorld, r, 2, 1 - r, 64);            // send #1 to the other rank
  }
  ChromeExportOptions options;
  options.markers = {TraceMarker{"SIGNATURE_MISMATCH", "send 0->1 #1", kWorld, 1, true, {0, 1}, 0},
                     TraceMarker{"COMM_INIT_STALL", "creation", kWorld, 0, false, {0, 1}, 0}};
  ChromeExportStats stats;
  const json trace = Export(recorded, options, &stats);
  EXPECT_EQ(stats.markers, 0u);  // neither knows its first bad record
  EXPECT_EQ(stats.arrows, 2u);
  std::map<std::string, std::string> cat_of_arrow;
  for (const json& start : EventsWith(trace, "s")) {
    const json* slice = SliceAt(trace, start);
    ASSERT_NE(slice, nullptr);
    cat_of_arrow[start["name"]] = (*slice)["cat"];
  }
  EXPECT_EQ(cat_of_arrow, (std::map<std::string, std::string>{{"finding 1: SIGNATURE_MISMATCH #1", "p2p"},
                                                             {"finding 2: COMM_INIT_STALL #0", "communicator"}}));
}

// A wait cycle across two communicators: an arrow from each rank's held call to the call
// of the rank it waits for, round the cycle, read from report.json's `wait_cycle` too.
TEST(ChromeExportTest, AWaitCycleIsArrowsRoundItsArcs) {
  constexpr uint64_t kSecond = 0x5d0c8e2100000002ull;
  RecordedJob recorded;
  TestJob job(&recorded);
  for (int r = 0; r < 2; ++r) {
    const ProcessId p = job.AddRank(r);
    job.Init(p, kWorld, r, 2);
    job.Init(p, kSecond, r, 2);
    // Rank 0 hangs in the world's all-reduce #1, rank 1 in the second communicator's.
    job.Collective(p, r == 0 ? kWorld : kSecond, r, 2, SyntheticOp{ring::ApiFn::kAllReduce, 8, testing::kFloat32, "", 0},
                   /*returns=*/false);
  }
  const json report = {
      {"findings",
       {{{"kind", "WAIT_CYCLE"}, {"comm", JsonId(kWorld)}, {"seq", 1u}, {"headline", "WAIT_CYCLE: ..."},
         {"wait_cycle",
          {{"arcs",
            {{{"comm_rank", 0},
              {"waits_in", {{"comm", JsonId(kWorld)}, {"seq", 1u}, {"op", "all-reduce"}, {"peer", nullptr}}}},
             {{"comm_rank", 1},
              {"waits_in", {{"comm", JsonId(kSecond)}, {"seq", 1u}, {"op", "all-reduce"}, {"peer", nullptr}}}}}}}}}}}};
  size_t unreadable = 0;
  ChromeExportOptions options;
  options.markers = MarkersFromReport(report, &unreadable);
  ASSERT_EQ(options.markers.size(), 1u);
  ASSERT_EQ(options.markers[0].cycle.size(), 2u);
  ChromeExportStats stats;
  const json trace = Export(recorded, options, &stats);
  EXPECT_EQ(stats.arrows, 2u) << "rank 0's call to rank 1's, and back";
  std::set<std::pair<int, int>> arrows;  // (pid it starts in, pid it ends in)
  std::map<int, int> start_pid;
  for (const json& start : EventsWith(trace, "s")) start_pid[start["id"]] = start["pid"];
  for (const json& end : EventsWith(trace, "f")) arrows.insert({start_pid[end["id"]], end["pid"]});
  ASSERT_EQ(arrows.size(), 2u);
  EXPECT_NE(arrows.begin()->first, arrows.begin()->second);
  EXPECT_EQ(arrows.count({arrows.begin()->second, arrows.begin()->first}), 1u) << "the way back closes the cycle";
}

TEST(ChromeExportTest, AbsoluteTimeIsMicrosecondsOfTheRanksRealtimeClockFromTheBaseAsked) {
  const RecordedJob recorded = DivergedJob();
  const json relative = Export(recorded);
  const int64_t first_call = relative["otherData"]["first_call_realtime_ns"];
  ChromeExportOptions epoch;
  epoch.time_base_ns = 0;
  const json absolute = Export(recorded, epoch);
  EXPECT_EQ(absolute["baseTimeNanoseconds"], 0);
  EXPECT_EQ(absolute["otherData"]["time_origin_realtime_ns"], 0);
  EXPECT_EQ(absolute["otherData"]["first_call_realtime_ns"], first_call);
  ChromeExportOptions kineto;
  kineto.time_base_ns = first_call - 5'000'000'000;  // a Kineto trace's baseTimeNanoseconds
  const json based = Export(recorded, kineto);
  EXPECT_EQ(based["baseTimeNanoseconds"], first_call - 5'000'000'000);
  const std::vector<json> slices = EventsWith(relative, "X");
  const std::vector<json> absolute_slices = EventsWith(absolute, "X");
  const std::vector<json> based_slices = EventsWith(based, "X");
  ASSERT_EQ(slices.size(), absolute_slices.size());
  ASSERT_EQ(slices.size(), based_slices.size());
  for (size_t i = 0; i < slices.size(); ++i) {
    const double ts = slices[i]["ts"];
    // To the microsecond of the realtime clock, a double's precision there (0.25 us).
    EXPECT_NEAR(absolute_slices[i]["ts"].get<double>(), static_cast<double>(first_call) / 1000.0 + ts, 0.5);
    EXPECT_NEAR(based_slices[i]["ts"].get<double>(), 5'000'000.0 + ts, 1e-6);
    EXPECT_EQ(absolute_slices[i]["dur"], slices[i]["dur"]);
  }
}

TEST(ChromeExportTest, TheRankFilterKeepsTheProcessesOfTheRanksAsked) {
  const RecordedJob recorded = DivergedJob();
  ChromeExportOptions options;
  options.ranks = std::vector<int32_t>{1, 3};
  options.markers = {TraceMarker{"PATH_DIVERGENCE", "part", kWorld, 2, false, {0, 1, 2, 3}, 0}};
  ChromeExportStats stats;
  const json trace = Export(recorded, options, &stats);
  EXPECT_EQ(stats.processes, 2u);
  EXPECT_EQ(stats.processes_left_out, 2u);
  EXPECT_EQ(stats.arrows, 1u);  // rank 1's call #2 to rank 3's
  std::set<std::string> processes;
  for (const auto& [track, name] : TrackNames(trace)) {
    if (track.second == -1) processes.insert(name);
  }
  EXPECT_EQ(processes, std::set<std::string>({"rank 1 (node0, pid 4001)", "rank 3 (node0, pid 4003)"}));
  // Process ids stay those of the whole job, so filtered traces line up with it.
  std::set<int> pids;
  for (const json& slice : EventsWith(trace, "X")) pids.insert(slice["pid"].get<int>());
  EXPECT_EQ(pids, std::set<int>({2, 4}));
  EXPECT_EQ(trace["otherData"]["ranks"], json::array({1, 3}));
}

TEST(ChromeExportTest, TheWindowKeepsTheCallsThatOverlapItAndTheMarkersInIt) {
  // One rank: a collective a second from t0 to t0 + 10 s, 100 ms each.
  RecordedJob recorded;
  TestJob job(&recorded);
  const ProcessId p = job.AddRank(0);
  job.Init(p, kWorld, 0, 1);
  for (int k = 0; k < 10; ++k) {
    job.Wait(p, 1'000'000'000 - 2'000);
    job.Collective(p, kWorld, 0, 1, Gather("step"));
  }
  const int64_t first_call = Export(recorded)["otherData"]["first_call_realtime_ns"];
  ChromeExportOptions options;
  options.since_s = 3.5;
  options.until_s = 6.5;
  options.markers = {TraceMarker{"NOT_JOINED", "in", kWorld, 5, false, {0}, first_call + 5'000'000'000},
                     TraceMarker{"NOT_JOINED", "out", kWorld, 8, false, {0}, first_call + 8'000'000'000}};
  ChromeExportStats stats;
  const json trace = Export(recorded, options, &stats);
  std::vector<int> seqs;
  for (const json& slice : EventsWith(trace, "X")) {
    EXPECT_GE(slice["ts"].get<double>() + slice["dur"].get<double>(), 3.5e6);
    EXPECT_LE(slice["ts"].get<double>(), 6.5e6);
    seqs.push_back(slice["args"]["seq"]);
  }
  EXPECT_THAT(seqs, ElementsAre(4, 5, 6));  // entered at about 4, 5 and 6 s
  EXPECT_EQ(stats.calls_outside, 11u - 3u);  // the creation and seven collectives
  EXPECT_EQ(stats.markers, 1u);
  EXPECT_EQ(trace["otherData"]["window"]["since_s"], 3.5);
  EXPECT_EQ(trace["otherData"]["window"]["until_s"], 6.5);
}

// Piece by piece or whole, a reader gets the same trace: what a call is does not depend
// on where the records were cut.
TEST(ChromeExportTest, TheTraceDoesNotDependOnHowTheRecordsArePieced) {
  RecordedJob recorded;
  TestJob job(&recorded);
  for (int r = 0; r < 2; ++r) {
    const ProcessId p = job.AddRank(r);
    job.Init(p, kWorld, r, 2);
    std::vector<uint64_t> in_flight;
    for (int k = 0; k < 40; ++k) {
      in_flight.push_back(job.AsyncCollective(p, kWorld, r, 2, Gather("g" + std::to_string(k % 3))));
      if (in_flight.size() == 3) {
        for (const uint64_t enter : in_flight) job.Complete(p, enter);
        in_flight.clear();
      }
      if (k % 7 == 0) job.Send(p, kWorld, r, 2, 1 - r, 16);
    }
  }
  const auto events = [](const json& trace) {
    std::multiset<std::string> all;
    for (const json& event : trace["traceEvents"]) all.insert(event.dump());
    return all;
  };
  const std::multiset<std::string> whole = events(Export(recorded, {}, nullptr, 1 << 20));
  EXPECT_EQ(events(Export(recorded, {}, nullptr, 1)), whole);
  EXPECT_EQ(events(Export(recorded, {}, nullptr, 5)), whole);
}

// A long process fed in pieces: the calls held stay those in flight and a margin, however
// many were made, and every one is handed out.
TEST(CallStreamTest, HoldsTheCallsInFlightNotTheCallsMade) {
  RecordedJob recorded;
  TestJob job(&recorded);
  const ProcessId p = job.AddRank(0);
  job.Init(p, kWorld, 0, 1);
  std::vector<uint64_t> in_flight;
  constexpr int kCalls = 30'000;
  for (int k = 0; k < kCalls; ++k) {
    in_flight.push_back(job.AsyncCollective(p, kWorld, 0, 1, Gather("g")));
    if (in_flight.size() == 4) {
      for (const uint64_t enter : in_flight) job.Complete(p, enter);
      in_flight.clear();
    }
  }
  const RecordedJob::RecordedProcess& process = recorded.processes()[0];
  CallStream stream(process.info);
  size_t handed_out = 0, most_held = 0;
  const auto count = [&](const JobModel&, uint32_t, const Call& call) {
    ++handed_out;
    EXPECT_TRUE(CallFinished(call));
  };
  ProcessUpdate names;
  names.regions = process.update.regions;
  stream.Add(names, count);
  const std::vector<IndexedRecord>& records = process.update.records;
  for (size_t i = 0; i < records.size(); i += 1000) {
    ProcessUpdate piece;
    piece.records.assign(records.begin() + static_cast<std::ptrdiff_t>(i),
                         records.begin() + static_cast<std::ptrdiff_t>(std::min(records.size(), i + 1000)));
    stream.Add(piece, count);
    most_held = std::max(most_held, stream.calls_held());
  }
  stream.Finish(count);
  EXPECT_EQ(handed_out, static_cast<size_t>(kCalls) + 1);
  EXPECT_LE(most_held, 2'100u);  // the 1,024 kept below the newest, a piece's calls, the creation
}

}  // namespace
}  // namespace collwatch::analyzer::chrome_export_test
