// Hunks (see schedule_hunk.h): the edit script comes from alignment.h's Align; the
// words for the kind of change are made here, from the two ops' fields.
// Threading: pure functions over their arguments.
#include "analyzer/schedule_hunk.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analyzer/alignment.h"
#include "analyzer/finding.h"
#include "analyzer/schedule_words.h"

namespace collwatch::analyzer {
namespace {

using ring::ApiFn;
using schedule_internal::Av;

constexpr size_t kMaxChangedLines = 24;

enum class Edit : char { kSame = ' ', kRemoved = '-', kAdded = '+' };

// The edit script of two short windows, from their LCS alignment. Where both readings keep
// as much in common, the second side is taken to have inserted (a run that does extra
// work, then what was expected) rather than to have skipped; within each block of
// changes, removals are listed before additions, as in unified diffs.
std::vector<Edit> EditScript(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  const std::vector<uint64_t> wide_a(a.begin(), a.end()), wide_b(b.begin(), b.end());
  const Alignment alignment = Align(wide_a, wide_b, AlignTie::kSkipB);
  std::vector<Edit> script;
  size_t i = 0, j = 0;
  // The unmatched ops up to (to_a, to_b): one block of changes.
  const auto changes_until = [&](size_t to_a, size_t to_b) {
    for (; i < to_a; ++i) script.push_back(Edit::kRemoved);
    for (; j < to_b; ++j) script.push_back(Edit::kAdded);
  };
  for (const auto& [matched_a, matched_b] : alignment.pairs) {
    changes_until(matched_a, matched_b);
    script.push_back(Edit::kSame);
    ++i, ++j;
  }
  changes_until(a.size(), b.size());
  return script;
}

std::string DiffLine(char tag, uint64_t position, const std::string& text) {
  return absl::StrFormat("%c #%-6d %s\n", tag, position + 1, text);
}

// What kind of change the first differing pair is, in words ("" when the two lines say
// it all).
std::string ChangeKind(const OpTable& table, std::optional<uint32_t> expected, std::optional<uint32_t> actual,
                       const std::vector<Edit>& script, absl::string_view minus, absl::string_view plus) {
  if (!expected) return absl::StrCat(plus, " goes on past the end of ", minus);
  if (!actual) return absl::StrCat(plus, " stops here");
  const ScheduleOp& a = table.op(*expected);
  const ScheduleOp& b = table.op(*actual);
  if (a.fn == b.fn && a.region == b.region && a.fn != ApiFn::kNone) {
    std::vector<std::string> what;
    if (a.count != b.count) what.push_back(absl::StrCat("count ", a.count, " -> ", b.count));
    if (a.dtype != b.dtype) what.push_back(absl::StrCat("dtype ", DtypeName(a.dtype), " -> ", DtypeName(b.dtype)));
    if (a.redop != b.redop) what.push_back(absl::StrCat("reduce op ", RedOpName(a.redop), " -> ", RedOpName(b.redop)));
    if (a.root != b.root) what.push_back(absl::StrCat("root ", a.root, " -> ", b.root));
    if (!what.empty()) return absl::StrCat(Av(OpName(a.fn)), " changed: ", absl::StrJoin(what, ", "));
  }
  size_t removed = 0, added = 0, k = 0;
  for (; k < script.size() && script[k] != Edit::kSame; ++k) (script[k] == Edit::kRemoved ? removed : added)++;
  const bool resynced = k < script.size();
  if (resynced && removed == 0) {
    return absl::StrCat(plus, " inserts ", added, " collective", added == 1 ? "" : "s", " here");
  }
  if (resynced && added == 0) {
    return absl::StrCat(plus, " leaves out ", removed, " collective", removed == 1 ? "" : "s", " here");
  }
  return "";
}

}  // namespace

std::string_view DifferenceKindName(DifferenceKind kind) {
  switch (kind) {
    case DifferenceKind::kCollectives: return "collectives";
    case DifferenceKind::kRanksAbsent: return "ranks_absent";
    case DifferenceKind::kCommunicatorMissing: return "communicator_missing";
    case DifferenceKind::kCommunicatorAdded: return "communicator_added";
  }
  return "unknown";
}

std::string RenderHunk(const OpTable& table, uint64_t first, const HunkSides& sides, const std::string& header,
                       absl::string_view minus_name, absl::string_view plus_name) {
  const std::vector<Edit> script = EditScript(sides.minus, sides.plus);
  const std::string kind = ChangeKind(table, sides.minus.empty() ? std::nullopt : std::optional(sides.minus[0]),
                                      sides.plus.empty() ? std::nullopt : std::optional(sides.plus[0]), script,
                                      minus_name, plus_name);
  const size_t width = std::max(minus_name.size(), plus_name.size()) + 1;
  auto label = [&](absl::string_view name) { return absl::StrCat(name, ":", std::string(width - name.size(), ' ')); };
  std::string out = absl::StrCat("@@ ", header, " @@\n");
  absl::StrAppend(&out, "  ", label(minus_name), sides.minus.empty() ? "(nothing more)" : table.Line(sides.minus[0]),
                  "\n");
  absl::StrAppend(&out, "  ", label(plus_name), sides.plus.empty() ? "(nothing more)" : table.Line(sides.plus[0]),
                  "\n");
  if (!kind.empty()) absl::StrAppend(&out, "  ", kind, "\n");
  absl::StrAppend(&out, "  ('-' ", minus_name, ", '+' ", plus_name, ")\n");
  for (size_t k = 0; k < sides.context.size(); ++k) {
    out += DiffLine(' ', first - sides.context.size() + k, table.Line(sides.context[k]));
  }
  size_t i = 0, j = 0, changed = 0, same_run = 0;
  bool stopped = false;
  // Where one side has ended, a few lines of the other say enough.
  const size_t max_changed = sides.minus.empty() || sides.plus.empty() ? kHunkContextLines + 2 : kMaxChangedLines;
  for (const Edit edit : script) {
    if (edit == Edit::kSame) {
      if (same_run == kHunkContextLines) {
        stopped = true;
        break;
      }
      out += DiffLine(' ', first + j, table.Line(sides.plus[j]));
      ++i, ++j, ++same_run;
      continue;
    }
    same_run = 0;
    if (++changed > max_changed) {
      stopped = true;
      break;
    }
    if (edit == Edit::kRemoved) {
      out += DiffLine('-', first + i, table.Line(sides.minus[i]));
      ++i;
    } else {
      out += DiffLine('+', first + j, table.Line(sides.plus[j]));
      ++j;
    }
  }
  if (stopped || sides.minus_more || sides.plus_more) {
    out += same_run == kHunkContextLines ? "  ...\n" : "  ... (the difference goes on)\n";
  }
  if (sides.minus.empty() && !sides.minus_more) absl::StrAppend(&out, "  (", minus_name, " ends here)\n");
  if (sides.plus.empty() && !sides.plus_more) absl::StrAppend(&out, "  (", plus_name, " ends here)\n");
  return out;
}

std::vector<uint32_t> HunkSlice(const std::vector<uint32_t>& ops, uint64_t first, size_t length) {
  if (first >= ops.size()) return {};
  const size_t end = static_cast<size_t>(std::min<uint64_t>(ops.size(), first + length));
  return std::vector<uint32_t>(ops.begin() + static_cast<std::ptrdiff_t>(first),
                               ops.begin() + static_cast<std::ptrdiff_t>(end));
}

std::vector<uint32_t> HunkContextBefore(const std::vector<uint32_t>& ops, uint64_t first) {
  const uint64_t begin = first > kHunkContextLines ? first - kHunkContextLines : 0;
  return HunkSlice(ops, begin, static_cast<size_t>(first - begin));
}

}  // namespace collwatch::analyzer
