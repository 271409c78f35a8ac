// Diff (see schedule_diff.h): communicators matched by their keys, rank classes compared
// through the ranks they share, each difference placed in A's folded step.
// Threading: pure functions over their arguments.
#include "analyzer/schedule_diff.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analyzer/schedule_hunk.h"
#include "analyzer/schedule_words.h"
#include "analyzer/step_folding.h"

namespace collwatch::analyzer {
namespace {

using schedule_internal::Av;

// A difference that one line shows: "@@ HEADLINE @@".
ScheduleDifference DiffLineDifference(DifferenceKind kind, std::string communicator, std::vector<int32_t> ranks,
                                  std::string headline) {
  ScheduleDifference difference{kind, std::move(communicator), std::move(ranks), 0, std::move(headline), ""};
  difference.text = absl::StrCat("@@ ", difference.headline, " @@\n");
  return difference;
}

}  // namespace

ScheduleDiff DiffSchedules(const JobSchedule& a, const JobSchedule& b, const OpTable& table,
                           std::string_view label_a_in, std::string_view label_b_in) {
  // The runs are A and B in the hunks; the header names them.
  const absl::string_view label_a = "A", label_b = "B";
  ScheduleDiff diff;
  std::string out = absl::StrCat("--- A: ", Av(label_a_in), "\n+++ B: ", Av(label_b_in), "\n");
  const auto add = [&diff, &out](ScheduleDifference difference) {
    diff.identical = false;
    out += difference.text;
    diff.differences.push_back(std::move(difference));
  };
  std::vector<std::pair<int, int32_t>> shapes_a, shapes_b;
  for (const CommSchedule& comm : a.comms) shapes_a.emplace_back(comm.parent, comm.size);
  for (const CommSchedule& comm : b.comms) shapes_b.emplace_back(comm.parent, comm.size);
  const std::vector<std::string> keys_a = CommMatchKeys(shapes_a);
  const std::vector<std::string> keys_b = CommMatchKeys(shapes_b);
  std::map<std::string, size_t> b_by_key;
  for (size_t i = 0; i < keys_b.size(); ++i) b_by_key[keys_b[i]] = i;
  std::vector<bool> b_matched(b.comms.size(), false);

  for (size_t i = 0; i < a.comms.size(); ++i) {
    const CommSchedule& comm_a = a.comms[i];
    const std::string name = CommLabel(comm_a.index, comm_a.size, comm_a.parent);
    auto it = b_by_key.find(keys_a[i]);
    if (it == b_by_key.end()) {
      add(DiffLineDifference(DifferenceKind::kCommunicatorMissing, name, {}, absl::StrCat(name, ": only in ", label_a)));
      continue;
    }
    b_matched[it->second] = true;
    const CommSchedule& comm_b = b.comms[it->second];
    const std::string name_b = CommLabel(comm_b.index, comm_b.size, comm_b.parent);
    const std::string both = name == name_b ? name : absl::StrCat(name, " (", name_b, " in ", label_b, ")");
    if (comm_a.absent_ranks != comm_b.absent_ranks) {
      // The ranks absent from one run and not from the other.
      std::vector<int32_t> one_side;
      std::set_symmetric_difference(comm_a.absent_ranks.begin(), comm_a.absent_ranks.end(),
                                    comm_b.absent_ranks.begin(), comm_b.absent_ranks.end(),
                                    std::back_inserter(one_side));
      add(DiffLineDifference(DifferenceKind::kRanksAbsent, name, std::move(one_side),
                         absl::StrCat(both, ": ranks reporting nothing: ", ScheduleRanksText(comm_a.absent_ranks),
                                      " in ", label_a, ", ", ScheduleRanksText(comm_b.absent_ranks), " in ",
                                      label_b)));
    }
    if (comm_a.classes.size() > 1 || comm_b.classes.size() > 1) {
      auto classes = [](const CommSchedule& comm) {
        std::vector<std::string> parts;
        for (const ClassSchedule& rank_class : comm.classes) parts.push_back(ScheduleRanksText(rank_class.ranks));
        return absl::StrJoin(parts, " | ");
      };
      absl::StrAppend(&out, "# ", both, ": ranks that issued different schedules within a run: ", label_a, ": ",
                      classes(comm_a), "; ", label_b, ": ", classes(comm_b), "\n");
    }
    // Compare each pair of classes that share ranks, through the lowest shared rank.
    for (const ClassSchedule& class_a : comm_a.classes) {
      for (const ClassSchedule& class_b : comm_b.classes) {
        const std::vector<int32_t> ranks = SharedRanks(class_a.ranks, class_b.ranks);
        if (ranks.empty()) continue;
        const std::vector<uint32_t>& ops_a = class_a.ops;
        const std::vector<uint32_t>& ops_b = class_b.ops;
        // A damaged region matches any (OpTable::Matches): damage alone is no difference.
        const auto same = [&table](uint32_t x, uint32_t y) { return table.Matches(x, y); };
        const auto mismatch = std::mismatch(ops_a.begin(), ops_a.end(), ops_b.begin(), ops_b.end(), same);
        if (mismatch.first == ops_a.end() && mismatch.second == ops_b.end()) continue;
        const auto first = static_cast<uint64_t>(mismatch.first - ops_a.begin());
        HunkSides sides;
        sides.context = HunkContextBefore(ops_a, first);
        sides.minus = HunkSlice(ops_a, first, kHunkWindow);
        sides.plus = HunkSlice(ops_b, first, kHunkWindow);
        sides.minus_more = first + sides.minus.size() < ops_a.size();
        sides.plus_more = first + sides.plus.size() < ops_b.size();
        // Where in A's step the difference falls.
        const std::vector<Segment> folded = FoldSchedule(ops_a);
        std::vector<uint64_t> counts;
        for (const Segment& segment : folded) counts.push_back(segment.repeat);
        const StepExpansion expansion(folded, std::move(counts));
        const std::string where =
            first < ops_a.size()
                ? absl::StrCat(" (", label_a, ": ", expansion.Describe(expansion.Locate(first), true, false), ")")
                : "";
        std::string header = absl::StrCat(both, ", ranks ", ScheduleRanksText(ranks),
                                          ": first difference at collective ", first + 1, where);
        std::string hunk = RenderHunk(table, first, sides, header, label_a, label_b);
        add({DifferenceKind::kCollectives, name, ranks, first + 1, std::move(header), std::move(hunk)});
      }
    }
  }
  for (size_t i = 0; i < b.comms.size(); ++i) {
    if (b_matched[i]) continue;
    const std::string name = CommLabel(b.comms[i].index, b.comms[i].size, b.comms[i].parent);
    add(DiffLineDifference(DifferenceKind::kCommunicatorAdded, name, {}, absl::StrCat(name, ": only in ", label_b)));
  }
  if (diff.identical) {
    size_t collectives = 0;
    for (const CommSchedule& comm : a.comms) {
      for (const ClassSchedule& rank_class : comm.classes) {
        collectives += rank_class.ops.size() * rank_class.ranks.size();
      }
    }
    absl::StrAppend(&out, "identical: ", a.comms.size(), " communicator", a.comms.size() == 1 ? "" : "s", ", ",
                    collectives, " collective calls\n");
  }
  diff.text = std::move(out);
  return diff;
}

}  // namespace collwatch::analyzer
