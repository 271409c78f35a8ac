// `collwatch export` end to end on a trace store written as the collector writes one
// (tests/support/synthetic_store.h): four ranks on one communicator, ranks 2-3 parting from
// ranks 0-1 at collective 3 and every rank stuck in it. Each spelling of the command gives
// the same trace, valid under docs/schema/chrome-trace.schema.json; the finding (from the
// analysis, or from report.json) is a marker with arrows between the four calls #3; the
// rank filter, the window and absolute time do what they say; bad usage is exit 2 with
// words that say what to give.
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "analyzer/test_job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/cli_run.h"
#include "tests/support/json_schema.h"
#include "tests/support/read_files.h"
#include "tests/support/subprocess.h"
#include "tests/support/synthetic_store.h"

namespace collwatch::export_test {
namespace {

using analyzer::testing::Gather;
using analyzer::testing::TestJob;
using nlohmann::json;
using testing::CliOutcome;
using testing::ReadFile;
using testing::RunCollwatch;
using testing::SchemaProblems;
using testing::TempDir;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr uint64_t kWorld = 0x3f2a9c0100000001ull;
constexpr int kRanks = 4;
constexpr int64_t kFirstCallNs = 1'700'000'000'000'000'000 + 1'000;  // TestJob's clock, its first tick

// The run under DIR/run: ten steps of two gathers, 100 ms apart; then collective 21, where
// ranks 2-3 gather another region than ranks 0-1 and nobody returns.
std::string WriteRun(const TempDir& dir) {
  const std::string out = dir.path() + "/run";
  testing::SyntheticStore store(out, "job1");
  TestJob job(&store);
  std::vector<analyzer::ProcessId> ranks;
  for (int r = 0; r < kRanks; ++r) ranks.push_back(job.AddRank(r));
  for (int r = 0; r < kRanks; ++r) job.Init(ranks[r], kWorld, r, kRanks);
  for (int step = 0; step < 10; ++step) {
    for (int r = 0; r < kRanks; ++r) {
      job.Collective(ranks[r], kWorld, r, kRanks, Gather("fwd/embed"));
      job.Collective(ranks[r], kWorld, r, kRanks, Gather("fwd/block"));
      job.Wait(ranks[r], 100'000'000);
    }
  }
  for (int r = 0; r < kRanks; ++r) {
    job.Collective(ranks[r], kWorld, r, kRanks, Gather(r < 2 ? "fwd/vision" : "fwd/text"), /*returns=*/false);
  }
  EXPECT_TRUE(store.Finish(v1::WRITER_STATUS_RUNNING).ok());
  return out;
}

json Schema() {
  return json::parse(ReadFile(std::string(COLLWATCH_SCHEMA_DIR) + "/chrome-trace.schema.json"));
}

// Runs the export; the trace it wrote, checked against its schema.
json Exported(const TempDir& dir, std::vector<std::string> args, const std::string& file = "trace.json") {
  args.insert(args.begin(), "export");
  args.insert(args.end(), {"-o", dir.path() + "/" + file});
  const CliOutcome outcome = RunCollwatch(dir, args, {}, 60);
  EXPECT_EQ(outcome.exit_code, 0) << outcome.err;
  const json trace = json::parse(ReadFile(dir.path() + "/" + file), nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(trace.is_discarded());
  EXPECT_THAT(SchemaProblems(Schema(), trace), IsEmpty());
  return trace;
}

std::vector<json> EventsWith(const json& trace, const std::string& phase, const std::string& cat = "") {
  std::vector<json> events;
  for (const json& event : trace["traceEvents"]) {
    if (event["ph"] == phase && (cat.empty() || event.value("cat", "") == cat)) events.push_back(event);
  }
  return events;
}

// The slices an arrow's ends land in: (rank, seq) of each.
std::set<std::pair<int, int>> ArrowEnds(const json& trace) {
  std::set<std::pair<int, int>> ends;
  const std::vector<json> slices = EventsWith(trace, "X");
  for (const std::string phase : {"s", "f"}) {
    for (const json& end : EventsWith(trace, phase)) {
      for (const json& slice : slices) {
        if (slice["pid"] == end["pid"] && slice["tid"] == end["tid"] && slice["ts"] == end["ts"]) {
          ends.emplace(slice["args"]["rank"].get<int>(), slice["args"]["seq"].get<int>());
        }
      }
    }
  }
  return ends;
}

TEST(ExportTest, EverySpellingWritesTheSameTrace) {
  TempDir dir;
  const std::string run = WriteRun(dir);
  const json trace = Exported(dir, {run});
  for (const std::vector<std::string>& spelling : std::vector<std::vector<std::string>>{
           {"--format", "chrome", run}, {"--chrome", run}, {run, "--chrome"}}) {
    EXPECT_EQ(Exported(dir, spelling, "again.json"), trace) << spelling.front();
  }
  // Standard output, when asked: the same JSON and nothing else.
  const CliOutcome to_stdout = RunCollwatch(dir, {"export", run, "-o", "-"}, {}, 60);
  EXPECT_EQ(to_stdout.exit_code, 0) << to_stdout.err;
  EXPECT_EQ(json::parse(to_stdout.out), trace);
  // The version of the collwatch that wrote it.
  EXPECT_THAT(trace["otherData"]["collwatch_version"].get<std::string>(), HasSubstr("0."));
  EXPECT_EQ(EventsWith(trace, "X").size(), static_cast<size_t>(kRanks) * (1 + 20 + 1));
}

TEST(ExportTest, TheFindingIsAMarkerWithArrowsBetweenTheRanksCallsOfItsSequenceNumber) {
  TempDir dir;
  const std::string run = WriteRun(dir);
  // No report.json: the export analyses the run.
  const CliOutcome analysed = RunCollwatch(dir, {"export", run, "-o", dir.path() + "/analysed.json"}, {}, 60);
  ASSERT_EQ(analysed.exit_code, 0) << analysed.err;
  EXPECT_THAT(analysed.out,
              HasSubstr("1 of 1 findings marked, 3 arrows between their calls (from the analysis of the run)"));
  const json trace = json::parse(ReadFile(dir.path() + "/analysed.json"));
  const std::vector<json> markers = EventsWith(trace, "i", "finding");
  ASSERT_EQ(markers.size(), 1u);
  EXPECT_EQ(markers[0]["s"], "g");
  EXPECT_EQ(markers[0]["args"]["comm"], "3f2a9c0100000001");
  EXPECT_EQ(markers[0]["args"]["seq"], 21);
  EXPECT_EQ(markers[0]["args"]["ranks"], json::array({0, 1, 2, 3}));
  // At the first bad record: among the ranks' calls #21, which part.
  double first_21 = 1e300, last_21 = 0;
  for (const json& slice : EventsWith(trace, "X")) {
    if (slice["args"].value("seq", 0) != 21) continue;
    first_21 = std::min(first_21, slice["ts"].get<double>());
    last_21 = std::max(last_21, slice["ts"].get<double>());
  }
  EXPECT_GE(markers[0]["ts"].get<double>(), first_21);
  EXPECT_LE(markers[0]["ts"].get<double>(), last_21);
  EXPECT_EQ(ArrowEnds(trace), (std::set<std::pair<int, int>>{{0, 21}, {1, 21}, {2, 21}, {3, 21}}));

  // The same from the report beside the traces, as collwatch run leaves it.
  const CliOutcome report = RunCollwatch(dir, {"analyze", "--json", run}, {}, 60);
  ASSERT_EQ(report.exit_code, 1) << report.err;
  std::filesystem::copy_file(dir.path() + "/stdout", run + "/report.json");
  const CliOutcome from_report = RunCollwatch(dir, {"export", run, "-o", dir.path() + "/reported.json"}, {}, 60);
  ASSERT_EQ(from_report.exit_code, 0) << from_report.err;
  EXPECT_THAT(from_report.out, HasSubstr("(from " + run + "/report.json)"));
  const json reported = json::parse(ReadFile(dir.path() + "/reported.json"));
  ASSERT_EQ(EventsWith(reported, "i", "finding").size(), 1u);
  // report.json keeps milliseconds of the first bad record.
  EXPECT_NEAR(EventsWith(reported, "i", "finding")[0]["ts"].get<double>(), markers[0]["ts"].get<double>(), 1'000.0);
  EXPECT_EQ(ArrowEnds(reported), ArrowEnds(trace));

  const json none = Exported(dir, {run, "--no-findings"});
  EXPECT_TRUE(EventsWith(none, "i", "finding").empty());
  EXPECT_TRUE(EventsWith(none, "s").empty());
}

TEST(ExportTest, AbsoluteTimeIsTheRanksRealtimeClockInMicroseconds) {
  TempDir dir;
  const std::string run = WriteRun(dir);
  const json relative = Exported(dir, {run, "--no-findings"});
  const json absolute = Exported(dir, {run, "--no-findings", "--absolute-time"}, "absolute.json");
  EXPECT_EQ(relative["baseTimeNanoseconds"], kFirstCallNs);
  EXPECT_EQ(absolute["baseTimeNanoseconds"], 0);
  EXPECT_EQ(absolute["otherData"]["first_call_realtime_ns"], kFirstCallNs);
  const json based = Exported(dir, {run, "--no-findings", "--time-base", std::to_string(kFirstCallNs - 2'000'000'000)},
                              "based.json");
  const std::vector<json> slices = EventsWith(relative, "X");
  const std::vector<json> absolute_slices = EventsWith(absolute, "X");
  const std::vector<json> based_slices = EventsWith(based, "X");
  ASSERT_EQ(slices.size(), absolute_slices.size());
  ASSERT_EQ(slices.size(), based_slices.size());
  for (size_t i = 0; i < slices.size(); ++i) {
    EXPECT_NEAR(absolute_slices[i]["ts"].get<double>(),
                static_cast<double>(kFirstCallNs) / 1000.0 + slices[i]["ts"].get<double>(), 0.5);
    EXPECT_NEAR(based_slices[i]["ts"].get<double>(), 2'000'000.0 + slices[i]["ts"].get<double>(), 1e-6);
  }
}

TEST(ExportTest, RanksAndAWindowSelectWhatIsWritten) {
  TempDir dir;
  const std::string run = WriteRun(dir);
  const CliOutcome filtered =
      RunCollwatch(dir, {"export", run, "--ranks", "1,3", "--since", "0.35", "--until", "0.65", "-o",
                         dir.path() + "/part.json"}, {}, 60);
  ASSERT_EQ(filtered.exit_code, 0) << filtered.err;
  EXPECT_THAT(filtered.out,
              HasSubstr("2 ranks, 12 calls; 2 processes left out by --ranks; 32 calls outside the window"));
  const json trace = json::parse(ReadFile(dir.path() + "/part.json"));
  EXPECT_THAT(SchemaProblems(Schema(), trace), IsEmpty());
  std::set<int> ranks, pids;
  for (const json& slice : EventsWith(trace, "X")) {
    ranks.insert(slice["args"]["rank"].get<int>());
    pids.insert(slice["pid"].get<int>());
    // Steps 4, 5 and 6 (entered at 0.4, 0.5 and 0.6 s) overlap 0.35-0.65 s.
    EXPECT_GE(slice["ts"].get<double>(), 0.35e6);
    EXPECT_LE(slice["ts"].get<double>(), 0.65e6);
  }
  EXPECT_EQ(ranks, std::set<int>({1, 3}));
  EXPECT_EQ(pids, std::set<int>({2, 4}));  // their places in the whole job
  EXPECT_EQ(trace["otherData"]["ranks"], json::array({1, 3}));
  EXPECT_TRUE(EventsWith(trace, "i", "finding").empty());  // collective 21 is after the window
}

// Rings alone (no collector ran): each rank's ring, read whole and handed on in pieces.
TEST(ExportTest, RingsAloneAreExportedToo) {
  TempDir dir;
  const std::string rings = dir.path() + "/rings";
  std::filesystem::create_directories(rings);
  std::filesystem::permissions(rings, std::filesystem::perms::owner_all);  // the preload wants it private
  // The preload list carries a sanitizer build's runtime first.
  testing::Subprocess job({COLLWATCH_NCCL_RANKS_PATH, "2", "all", dir.path()},
                          {{"LD_PRELOAD", COLLWATCH_PRELOAD_LIST},
                           {"COLLWATCH_RING_DIR", rings},
                           {"COLLWATCH_JOB_ID", "rings"},
                           {"COLLWATCH_CPU_NCCL_SHM_DIR", dir.path()}});
  ASSERT_EQ(job.Wait(60), 0);
  const CliOutcome outcome = RunCollwatch(dir, {"export", rings, "-o", dir.path() + "/rings.json"}, {}, 60);
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  EXPECT_THAT(outcome.out, HasSubstr(": 2 ranks, "));
  EXPECT_THAT(outcome.out, HasSubstr("0 of 0 findings marked"));
  const json trace = json::parse(ReadFile(dir.path() + "/rings.json"));
  EXPECT_THAT(SchemaProblems(Schema(), trace), IsEmpty());
  std::map<int, int> collectives_of_pid;
  for (const json& slice : EventsWith(trace, "X")) {
    if (slice["cat"] == "collective") ++collectives_of_pid[slice["pid"].get<int>()];
  }
  ASSERT_EQ(collectives_of_pid.size(), 2u);
  EXPECT_GT(collectives_of_pid.begin()->second, 0);
  EXPECT_EQ(collectives_of_pid.begin()->second, collectives_of_pid.rbegin()->second);
}

TEST(ExportTest, BadUsageSaysWhatToGive) {
  TempDir dir;
  const std::string run = WriteRun(dir);
  const std::string out = dir.path() + "/t.json";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"export", "-o", out}, "which trace folder? collwatch export DIR -o FILE"},
      {{"export", run}, "where to? -o FILE (- for standard output)"},
      {{"export", dir.path() + "/none", "-o", out}, "none: no such file or folder"},
      {{"export", run, "--chrome", dir.path(), "-o", out}, "two trace folders given"},
      {{"export", run, "--ranks", "3-1", "-o", out}, "--ranks '3-1': not a list of ranks (e.g. 0,3-5)"},
      {{"export", run, "--since", "2", "--until", "1", "-o", out}, "0 <= --since < --until"},
      {{"export", run, "--findings", dir.path() + "/none.json", "-o", out}, "none.json"},
      {{"export", run, "--format", "perfetto", "-o", out}, "perfetto"},
  };
  for (const auto& [args, words] : cases) {
    const CliOutcome outcome = RunCollwatch(dir, args, {}, 60);
    EXPECT_EQ(outcome.exit_code, 2) << args[1];
    EXPECT_THAT(outcome.err, HasSubstr(words)) << args[1];
  }
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace collwatch::export_test
