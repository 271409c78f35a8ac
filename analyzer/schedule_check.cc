// Check (see schedule_check.h): each baseline section against the run's rank classes it
// shares ranks with, the step count chosen from the run's length; report and JUnit words.
// Threading: pure functions over their arguments.
#include "analyzer/schedule_check.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analyzer/schedule_hunk.h"
#include "analyzer/schedule_words.h"
#include "analyzer/step_folding.h"

namespace collwatch::analyzer {
namespace {

using schedule_internal::Av;

// The first position where `expected` and `actual` differ (OpTable::Matches: a damaged
// region is no difference); nullopt when equal.
std::optional<uint64_t> FirstDifferingPosition(const StepExpansion& expected, const std::vector<uint32_t>& actual,
                                               const OpTable& table) {
  const uint64_t common = std::min<uint64_t>(expected.size(), actual.size());
  for (uint64_t i = 0; i < common; ++i) {
    if (!table.Matches(expected.At(i), actual[i])) return i;
  }
  if (expected.size() == actual.size()) return std::nullopt;
  return common;
}

// A run's class against one baseline section: nullopt when it matches, else its first
// difference with the hunk.
std::optional<ScheduleDifference> CheckClass(const BaselineSection& section, const std::vector<uint32_t>& actual,
                       const std::vector<int32_t>& ranks, const std::string& comm_name, const OpTable& table) {
  const std::vector<Segment>& segments = section.segments;
  // The literal parts are taken once; the step as often as the run's length suggests
  // (rounded down and up: the one that matches further wins), or as the baseline pins.
  uint64_t fixed = 0, step_length = 0;
  std::optional<size_t> step_segment;
  for (size_t i = 0; i < segments.size(); ++i) {
    if (segments[i].steps) {
      step_segment = i;
      step_length = segments[i].ops.size();
    } else {
      fixed += segments[i].ops.size();
    }
  }
  std::vector<uint64_t> step_counts = {1};
  if (step_segment && segments[*step_segment].repeat != 0) {
    step_counts = {segments[*step_segment].repeat};
  } else if (step_segment && actual.size() > fixed) {
    const uint64_t room = actual.size() - fixed;
    step_counts = {std::max<uint64_t>(1, room / step_length)};
    if (room % step_length != 0) step_counts.push_back(room / step_length + 1);
  }
  std::optional<StepExpansion> best;
  uint64_t best_first = 0;
  for (const uint64_t steps : step_counts) {
    std::vector<uint64_t> counts;
    for (size_t i = 0; i < segments.size(); ++i) counts.push_back(step_segment == i ? steps : 1);
    StepExpansion expansion(segments, std::move(counts));
    const std::optional<uint64_t> first = FirstDifferingPosition(expansion, actual, table);
    if (!first) return std::nullopt;
    // The furthest match wins; at a tie, the length nearer the run's (a dropped collective
    // is then shown as such, not as a missing step).
    const auto distance = [&](const StepExpansion& e) {
      return e.size() > actual.size() ? e.size() - actual.size() : actual.size() - e.size();
    };
    if (!best || *first > best_first || (*first == best_first && distance(expansion) < distance(*best))) {
      best.emplace(expansion);
      best_first = *first;
    }
  }
  const StepExpansion& expected = *best;
  HunkSides sides;
  sides.context = HunkContextBefore(actual, best_first);
  sides.minus = expected.Window(best_first, kHunkWindow);
  sides.plus = HunkSlice(actual, best_first, kHunkWindow);
  sides.minus_more = best_first + sides.minus.size() < expected.size();
  sides.plus_more = best_first + sides.plus.size() < actual.size();
  const std::string where = best_first < expected.size()
                                ? expected.Describe(expected.Locate(best_first), /*with_counts=*/false, true)
                                : "past the baseline's end";
  std::string header = absl::StrCat(comm_name, ", ranks ", ScheduleRanksText(ranks), ": collective ", best_first + 1,
                                    " differs (", where, ")");
  std::string hunk = RenderHunk(table, best_first, sides, header, "the baseline", "the run");
  return ScheduleDifference{DifferenceKind::kCollectives, comm_name, ranks, best_first + 1, std::move(header),
                            std::move(hunk)};
}

// A difference that one line of text shows.
ScheduleDifference CheckLineDifference(DifferenceKind kind, const std::string& communicator, std::vector<int32_t> ranks,
                                  std::string headline) {
  std::string text = absl::StrCat(headline, "\n");
  return {kind, communicator, std::move(ranks), 0, std::move(headline), std::move(text)};
}

void Add(ScheduleDifference difference, CommCheck* check) {
  check->message += difference.text;
  check->differences.push_back(std::move(difference));
}

CommCheck CheckComm(const BaselineComm& expected, const CommSchedule* actual, const OpTable& table) {
  CommCheck check;
  check.name = CommLabel(expected.index, expected.size, expected.parent);
  if (actual == nullptr) {
    Add(CheckLineDifference(DifferenceKind::kCommunicatorMissing, check.name, {},
                       absl::StrCat(check.name, ": not in the run (no communicator of size ", expected.size,
                                    expected.parent > 0 ? absl::StrCat(" split from comm ", expected.parent) : "",
                                    " was created in that order)")),
        &check);
    return check;
  }
  if (!actual->absent_ranks.empty()) {
    Add(CheckLineDifference(DifferenceKind::kRanksAbsent, check.name, actual->absent_ranks,
                       absl::StrCat(check.name, ": ranks ", ScheduleRanksText(actual->absent_ranks),
                                    " reported nothing in the run (lost traces, or the ranks never joined)")),
        &check);
  }
  for (const BaselineSection& section : expected.sections) {
    for (const ClassSchedule& rank_class : actual->classes) {
      const std::vector<int32_t> ranks = SharedRanks(section.ranks, rank_class.ranks);
      if (ranks.empty()) continue;
      if (std::optional<ScheduleDifference> difference = CheckClass(section, rank_class.ops, ranks, check.name, table)) {
        Add(*std::move(difference), &check);
      }
    }
  }
  check.passed = check.differences.empty();
  return check;
}

// An attribute keeps its line ends only escaped; an element's text keeps them as they are.
enum class XmlPlace { kAttribute, kText };

std::string XmlEscape(std::string_view text, XmlPlace place = XmlPlace::kAttribute) {
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      case '\n': out += place == XmlPlace::kText ? "\n" : "&#10;"; break;
      case '\t': out += "&#9;"; break;
      default:
        // XML 1.0 allows no other control characters, not even escaped.
        out += (c < 0x20 || c == 0x7f) ? '?' : ch;
    }
  }
  return out;
}

}  // namespace

CheckResult CheckSchedule(const Baseline& baseline, const JobSchedule& run, const OpTable& table) {
  CheckResult result;
  std::vector<std::pair<int, int32_t>> expected_shapes, actual_shapes;
  for (const BaselineComm& comm : baseline.comms) expected_shapes.emplace_back(comm.parent, comm.size);
  for (const CommSchedule& comm : run.comms) actual_shapes.emplace_back(comm.parent, comm.size);
  const std::vector<std::string> expected_keys = CommMatchKeys(expected_shapes);
  const std::vector<std::string> actual_keys = CommMatchKeys(actual_shapes);
  std::map<std::string, size_t> actual_by_key;
  for (size_t i = 0; i < actual_keys.size(); ++i) actual_by_key[actual_keys[i]] = i;
  std::vector<bool> matched(run.comms.size(), false);
  for (size_t i = 0; i < baseline.comms.size(); ++i) {
    const CommSchedule* actual = nullptr;
    if (auto it = actual_by_key.find(expected_keys[i]); it != actual_by_key.end()) {
      actual = &run.comms[it->second];
      matched[it->second] = true;
    }
    const auto start = std::chrono::steady_clock::now();
    result.comms.push_back(CheckComm(baseline.comms[i], actual, table));
    result.comms.back().seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  for (size_t i = 0; i < run.comms.size(); ++i) {
    if (matched[i]) continue;
    const CommSchedule& comm = run.comms[i];
    CommCheck extra;
    extra.name = CommLabel(comm.index, comm.size, comm.parent);
    size_t collectives = 0;
    for (const ClassSchedule& rank_class : comm.classes) collectives = std::max(collectives, rank_class.ops.size());
    Add(CheckLineDifference(DifferenceKind::kCommunicatorAdded, extra.name, {},
                       absl::StrCat(extra.name, ": a communicator the baseline does not have (", collectives,
                                    " collectives); if it is meant to be there, make the baseline again")),
        &extra);
    result.comms.push_back(std::move(extra));
  }
  result.passed = std::all_of(result.comms.begin(), result.comms.end(), [](const CommCheck& c) { return c.passed; });
  return result;
}

std::string CheckReportText(const CheckResult& result, std::string_view baseline_name_in,
                            std::string_view run_name_in) {
  const absl::string_view baseline_name = Av(baseline_name_in), run_name = Av(run_name_in);
  std::string out;
  size_t failed = 0;
  for (const CommCheck& comm : result.comms) {
    absl::StrAppend(&out, comm.passed ? "ok    " : "FAIL  ", comm.name, "\n");
    failed += comm.passed ? 0 : 1;
  }
  for (const CommCheck& comm : result.comms) {
    if (!comm.passed) absl::StrAppend(&out, "\n", comm.message);
  }
  if (result.passed) {
    absl::StrAppend(&out, "collwatch check: ", run_name, " keeps the collective schedule of ", baseline_name, " (",
                    result.comms.size(), " communicator", result.comms.size() == 1 ? "" : "s", ")\n");
  } else {
    absl::StrAppend(&out, "\ncollwatch check: ", run_name, " changes the collective schedule of ", baseline_name,
                    " in ", failed, " of ", result.comms.size(), " communicator",
                    result.comms.size() == 1 ? "" : "s",
                    ". If the change is intended, make the baseline again (collwatch baseline) and commit it "
                    "with the change.\n");
  }
  return out;
}

std::string CheckJunitXml(const CheckResult& result, const JunitRun& run) {
  size_t failures = 0;
  for (const CommCheck& comm : result.comms) failures += comm.passed ? 0 : 1;
  const size_t errors = run.error.empty() ? 0 : 1;
  const size_t tests = result.comms.size() + errors;
  const std::string time = absl::StrFormat("%.3f", run.seconds);
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  absl::StrAppend(&out, "<testsuites name=\"collwatch check\" tests=\"", tests, "\" failures=\"", failures,
                  "\" errors=\"", errors, "\" time=\"", time, "\">\n");
  absl::StrAppend(&out, "  <testsuite name=\"", XmlEscape(run.suite_name), "\" tests=\"", tests,
                  "\" failures=\"", failures, "\" errors=\"", errors, "\" skipped=\"0\" time=\"", time, "\">\n");
  for (const CommCheck& comm : result.comms) {
    absl::StrAppendFormat(&out, "    <testcase classname=\"collwatch.schedule\" name=\"%s\" time=\"%.3f\"",
                          XmlEscape(comm.name), comm.seconds);
    if (comm.passed) {
      out += "/>\n";
      continue;
    }
    // CI pages show the message as a title: one line; the whole hunks go in the body.
    std::string message = comm.differences.empty() ? comm.name : comm.differences.front().headline;
    if (comm.differences.size() > 1) absl::StrAppend(&message, " (and ", comm.differences.size() - 1, " more)");
    absl::StrAppend(&out, ">\n      <failure type=\"ScheduleChanged\" message=\"", XmlEscape(message), "\">",
                    XmlEscape(comm.message, XmlPlace::kText), "</failure>\n    </testcase>\n");
  }
  if (errors > 0) {
    const std::string first_line = run.error.substr(0, run.error.find('\n'));
    absl::StrAppend(&out, "    <testcase classname=\"collwatch.check\" name=\"input\" time=\"0.000\">\n",
                    "      <error type=\"BadInput\" message=\"", XmlEscape(first_line), "\">", XmlEscape(run.error, XmlPlace::kText),
                    "</error>\n    </testcase>\n");
  }
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

}  // namespace collwatch::analyzer
