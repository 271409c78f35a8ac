// Golden reports: each golden GPU trace (tests/data/gpu/*.rings.txt, `collwatch dump` text
// of the rings of a real run) is stored as the collector stores an agent's stream (a trace
// folder, store/trace_store.h), and `collwatch analyze` is run on that folder, as text and
// as --json (cli/analyze_command.h, what main.cc calls). Its output is compared with the
// expected report checked in beside the trace (TRACE.report.txt, TRACE.report.json), line
// by line with a diff on mismatch. To accept a change on purpose:
// COLLWATCH_UPDATE_GOLDEN=1 ctest -R GpuGoldenReport, then review git diff tests/data/gpu.
// report.json's "collwatch_version" names the commit, which every commit changes: the
// expected reports hold kVersionPlaceholder there, so the field's presence and place are
// checked and a new commit or version changes no golden file.
// Threading: single-threaded.
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "cli/analyze_command.h"
#include "files/version.h"
#include "gtest/gtest.h"
#include "store/event_codec.h"
#include "store/trace_store.h"
#include "tests/support/analyze_both_ways.h"
#include "tests/support/ring_dump_text.h"

namespace collwatch::gpu_golden_report_test {
namespace {

namespace fs = std::filesystem;
using ::collwatch::testing::DumpedJob;
using ::collwatch::testing::DumpedRecord;
using ::collwatch::testing::DumpedRing;
using ::collwatch::testing::DumpRegions;
using ::collwatch::testing::kDumpMonotonicOriginNs;
using ::collwatch::testing::kDumpRealtimeOriginNs;
using ::collwatch::testing::ReadRingDumpText;

constexpr char kTraceSuffix[] = ".rings.txt";
constexpr size_t kContextLines = 2;  // equal lines shown around each difference
constexpr char kVersionPlaceholder[] = "@COLLWATCH_VERSION@";

std::string TracePath(const std::string& name) { return std::string(COLLWATCH_GPU_TRACES_DIR) + "/" + name; }

// TRACE.rings.txt -> TRACE.report.txt (or .json), beside it.
std::string ExpectedReportPath(const std::string& trace, const std::string& extension) {
  return TracePath(trace.substr(0, trace.size() - (sizeof kTraceSuffix - 1)) + ".report." + extension);
}

bool UpdateRequested() {
  const char* value = std::getenv("COLLWATCH_UPDATE_GOLDEN");
  return value != nullptr && std::string(value) == "1";
}

// The identity an agent would have sent for `ring` (its clocks at the dump reader's
// origin, as every record time is).
v1::RankIdentity IdentityOf(const DumpedRing& ring) {
  v1::RankIdentity identity;
  identity.set_job(ring.job);
  identity.set_host(ring.info.host);
  identity.set_pid(ring.info.pid);
  identity.set_rank(ring.info.global_rank);
  identity.set_local_rank(ring.local_rank);
  identity.set_world_size(ring.info.world_size);
  identity.set_ring_path(ring.path);
  identity.set_lane_count(ring.lanes);
  identity.set_start_realtime_ns(static_cast<uint64_t>(kDumpRealtimeOriginNs));
  identity.set_start_monotonic_ns(kDumpMonotonicOriginNs);
  return identity;
}

// Each ring of `job` as one batch of its agent, stored under `out_dir`/JOB/ by the
// collector's trace store: every record, its region names, the writer's final status,
// what was lost and the exit status. Returns the job's folder ("" on failure).
std::string StoreAsTheCollectorWould(const DumpedJob& job, const std::string& out_dir) {
  TraceStore store(out_dir, StoreOptions{});
  for (const DumpedRing& ring : job.rings) {
    absl::StatusOr<std::shared_ptr<RankTraceWriter>> writer = store.Writer(IdentityOf(ring));
    EXPECT_TRUE(writer.ok()) << writer.status();
    if (!writer.ok()) return "";
    v1::StreamEventsRequest batch;
    batch.set_batch_seq(1);
    for (const DumpedRecord& item : ring.records) {
      EventFromRecord(IndexedRecord{item.lane, item.index, item.record}, batch.add_events());
    }
    for (const auto& [id, name] : ring.region_names) {
      v1::RegionName* region = batch.add_regions();
      region->set_id(id);
      region->set_name(name);
    }
    batch.set_lost(ring.lost_records);
    batch.set_writer_status(ProcessStatusToWire(ring.status));
    if (ring.exit_code) {
      batch.set_exit_recorded(true);
      batch.set_exit_code(*ring.exit_code);
    }
    absl::StatusOr<AppendResult> appended = (*writer)->Append(batch);
    EXPECT_TRUE(appended.ok()) << appended.status();
    if (!appended.ok()) return "";
    EXPECT_EQ(appended->stored, ring.records.size()) << ring.path << ": every record stored once";
  }
  return job.rings.empty() ? "" : out_dir + "/" + job.rings[0].job;
}

struct Analyzed {
  int exit_code = -1;
  std::string text;  // report.txt
  std::string json;  // report.json
};

// `collwatch analyze` and `collwatch analyze --json` on the trace, stored as the collector
// would have stored its rings. Where the report names the folder it read (a scratch folder
// that changes every run), it names the trace file instead.
Analyzed AnalyzeTrace(const std::string& trace) {
  Analyzed analyzed;
  absl::StatusOr<DumpedJob> job = ReadRingDumpText(TracePath(trace), DumpRegions::kKeep);
  EXPECT_TRUE(job.ok()) << job.status();
  if (!job.ok()) return analyzed;
  char pattern[] = "/tmp/collwatch-golden-XXXXXX";
  if (mkdtemp(pattern) == nullptr) {
    ADD_FAILURE() << "mkdtemp failed";
    return analyzed;
  }
  const std::string scratch = pattern;
  const std::string job_dir = StoreAsTheCollectorWould(*job, scratch + "/out");
  if (!job_dir.empty()) {
    const std::string stable = "tests/data/gpu/" + trace;
    const testing::AnalyzedBothWays text = testing::AnalyzeBothWays(AnalyzeOptions{job_dir, /*json=*/false, 0});
    const testing::AnalyzedBothWays json = testing::AnalyzeBothWays(AnalyzeOptions{job_dir, /*json=*/true, 0});
    analyzed.exit_code = text.exit_code;
    EXPECT_EQ(json.exit_code, analyzed.exit_code) << "the same verdict either way";
    EXPECT_EQ(text.err, "") << "no warning on a whole trace";
    EXPECT_EQ(json.err, "");
    analyzed.text = absl::StrReplaceAll(text.out, {{job_dir, stable}});
    analyzed.json = absl::StrReplaceAll(json.out, {{job_dir, stable}});
    const std::string version_field = absl::StrCat("\"collwatch_version\": \"", std::string(CollwatchVersionText()), "\"");
    EXPECT_NE(analyzed.json.find(version_field), std::string::npos) << "report.json names the version";
    analyzed.json = absl::StrReplaceAll(
        analyzed.json, {{version_field, absl::StrCat("\"collwatch_version\": \"", kVersionPlaceholder, "\"")}});
  }
  fs::remove_all(scratch);
  return analyzed;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

// The differences between `expected` and `actual`, for people: "-" lines only the
// expected report has, "+" lines only the actual one has, a few equal lines around them,
// "@@ line N" (of the expected file) before each stretch. Empty when they are equal.
std::string LineDiff(const std::vector<std::string>& expected, const std::vector<std::string>& actual) {
  const size_t n = expected.size(), m = actual.size();
  // common[i][j]: the longest common subsequence of expected[i..] and actual[j..].
  std::vector<std::vector<size_t>> common(n + 1, std::vector<size_t>(m + 1, 0));
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      common[i][j] = expected[i] == actual[j] ? common[i + 1][j + 1] + 1 : std::max(common[i + 1][j], common[i][j + 1]);
    }
  }
  struct Edit {
    char tag;  // ' ', '-', '+'
    size_t expected_line;
    const std::string* text;
  };
  std::vector<Edit> edits;
  for (size_t i = 0, j = 0; i < n || j < m;) {
    if (i < n && j < m && expected[i] == actual[j]) {
      edits.push_back({' ', i++, &actual[j++]});
    } else if (i < n && (j == m || common[i + 1][j] >= common[i][j + 1])) {
      edits.push_back({'-', i, &expected[i]});
      ++i;
    } else {
      edits.push_back({'+', i, &actual[j++]});
    }
  }
  std::vector<bool> shown(edits.size(), false);
  for (size_t k = 0; k < edits.size(); ++k) {
    if (edits[k].tag == ' ') continue;
    const size_t last = std::min(edits.size() - 1, k + kContextLines);
    for (size_t e = k > kContextLines ? k - kContextLines : 0; e <= last; ++e) shown[e] = true;
  }
  std::string diff;
  for (size_t k = 0; k < edits.size(); ++k) {
    if (!shown[k]) continue;
    if (k == 0 || !shown[k - 1]) diff += "@@ line " + std::to_string(edits[k].expected_line + 1) + "\n";
    diff += std::string(1, edits[k].tag) + " " + *edits[k].text + "\n";
  }
  return diff;
}

// `actual` against the expected report at `path` (rewritten first when asked).
void ExpectAsChecked(const std::string& actual, const std::string& path) {
  SCOPED_TRACE(path);
  ASSERT_FALSE(actual.empty());
  if (UpdateRequested()) {
    std::ofstream(path) << actual;
    std::printf("COLLWATCH_UPDATE_GOLDEN=1: wrote %s\n", path.c_str());
  }
  std::ifstream file(path);
  ASSERT_TRUE(file.good()) << path << " is missing: run COLLWATCH_UPDATE_GOLDEN=1 ctest -R GpuGoldenReport";
  std::stringstream expected;
  expected << file.rdbuf();
  const std::string diff = LineDiff(Lines(expected.str()), Lines(actual));
  EXPECT_TRUE(diff.empty() && expected.str() == actual)
      << "the report differs from " << path << " (-: expected, +: now):\n"
      << diff << "If the change is meant, run COLLWATCH_UPDATE_GOLDEN=1 ctest -R GpuGoldenReport and review "
      << "git diff tests/data/gpu.";
}

// Each of these runs hung and was killed: `analyze` says not healthy (exit status 1).
void ExpectReportsAsChecked(const std::string& trace) {
  SCOPED_TRACE(trace);
  const Analyzed analyzed = AnalyzeTrace(trace);
  EXPECT_EQ(analyzed.exit_code, 1);
  ExpectAsChecked(analyzed.text, ExpectedReportPath(trace, "txt"));
  ExpectAsChecked(analyzed.json, ExpectedReportPath(trace, "json"));
}

TEST(GpuGoldenReport, ExpertSkip) { ExpectReportsAsChecked("2026-11-23-h200x2-trainer-expert-skip.rings.txt"); }

TEST(GpuGoldenReport, DtypeMismatch) { ExpectReportsAsChecked("2026-11-23-h200x2-trainer-dtype-mismatch.rings.txt"); }

TEST(GpuGoldenReport, ImageText) { ExpectReportsAsChecked("2026-11-23-h200x2-trainer-image-text.rings.txt"); }

// The diff itself: what a mismatch shows.
TEST(GpuGoldenReportDiff, ShowsEachChangeWithItsLineAndContext) {
  const std::vector<std::string> expected = {"a", "b", "c", "d", "e", "f", "g", "h", "i"};
  std::vector<std::string> actual = expected;
  actual[1] = "B";
  actual.push_back("j");
  EXPECT_EQ(LineDiff(expected, expected), "");
  EXPECT_EQ(LineDiff(expected, actual),
            "@@ line 1\n  a\n- b\n+ B\n  c\n  d\n"
            "@@ line 8\n  h\n  i\n+ j\n");
}

}  // namespace
}  // namespace collwatch::gpu_golden_report_test
