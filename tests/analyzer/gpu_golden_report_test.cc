// Golden reports: for each golden GPU trace (tests/data/gpu/*.rings.txt), the post-mortem
// report `collwatch analyze` would print is compared with the expected one checked in
// beside it (*.report.txt), line by line with a diff on mismatch. To accept a change on
// purpose: COLLWATCH_UPDATE_GOLDEN=1 ctest -R GpuGoldenReport, then review the files'
// diff. Threading: single-threaded.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "analyzer/analyzer.h"
#include "analyzer/report.h"
#include "gtest/gtest.h"
#include "tests/support/ring_dump_text.h"

namespace collwatch::analyzer {
namespace {

using ::collwatch::testing::DumpedJob;
using ::collwatch::testing::DumpedJobFeeder;
using ::collwatch::testing::DumpRegions;
using ::collwatch::testing::ReadRingDumpText;

constexpr char kTraceSuffix[] = ".rings.txt";
constexpr char kReportSuffix[] = ".report.txt";
constexpr size_t kContextLines = 2;  // equal lines shown around each difference

std::string TracePath(const std::string& name) { return std::string(COLLWATCH_GPU_TRACES_DIR) + "/" + name; }

// TRACE.rings.txt -> TRACE.report.txt, beside it.
std::string ExpectedReportPath(const std::string& trace) {
  return TracePath(trace.substr(0, trace.size() - (sizeof kTraceSuffix - 1)) + kReportSuffix);
}

bool UpdateRequested() {
  const char* value = std::getenv("COLLWATCH_UPDATE_GOLDEN");
  return value != nullptr && std::string(value) == "1";
}

// What `collwatch analyze` prints for the trace's rings (cli/analyze_command.cc): every
// record, one final pass as of the end of the trace, report.txt's text. The source is
// the trace's file name, so that the text does not depend on where the tree lies.
std::string PostMortemReport(const std::string& trace) {
  absl::StatusOr<DumpedJob> job = ReadRingDumpText(TracePath(trace), DumpRegions::kKeep);
  EXPECT_TRUE(job.ok()) << job.status();
  if (!job.ok()) return "";
  Analyzer analyzer;
  DumpedJobFeeder feeder(*job, &analyzer.model());
  feeder.FeedRest();
  const std::vector<Finding> findings = analyzer.Analyze(analyzer.model().LatestTimeNs(), /*final_pass=*/true);
  ReportInfo info = DescribeJob(analyzer.model());
  info.source = trace + " (collwatch dump text)";
  return ReportText(findings, info);
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

void ExpectReportAsChecked(const std::string& trace) {
  SCOPED_TRACE(trace);
  const std::string actual = PostMortemReport(trace);
  ASSERT_FALSE(actual.empty());
  const std::string path = ExpectedReportPath(trace);
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

TEST(GpuGoldenReport, ExpertSkip) { ExpectReportAsChecked("2026-11-23-h200x2-trainer-expert-skip.rings.txt"); }

TEST(GpuGoldenReport, DtypeMismatch) { ExpectReportAsChecked("2026-11-23-h200x2-trainer-dtype-mismatch.rings.txt"); }

TEST(GpuGoldenReport, ImageText) { ExpectReportAsChecked("2026-11-23-h200x2-trainer-image-text.rings.txt"); }

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
}  // namespace collwatch::analyzer
