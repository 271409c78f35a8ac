// The baseline file (see baseline.h): MakeBaseline folds, FormatBaseline writes, and
// ParseBaseline reads line by line with a small state machine (comm, ranks, step, end).
// Threading: pure functions over their arguments.
#include "analyzer/baseline.h"

#include <algorithm>
#include <functional>
#include <optional>

#include "absl/strings/str_cat.h"
#include "analyzer/schedule_words.h"

namespace collwatch::analyzer {
namespace {

using schedule_internal::OpFromWords;
using schedule_internal::ParseNumber;
using schedule_internal::Shown;
using schedule_internal::SplitWords;
using schedule_internal::Word;

absl::Status LineError(int line, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("baseline line ", line, ": ", message));
}

// "0-3", "0,2,5-7", "0-14/2" into ranks below `size`; `budget` counts ranks left to take.
absl::StatusOr<std::vector<int32_t>> ParseRankList(std::string_view text, int32_t size, uint64_t* budget) {
  std::vector<int32_t> ranks;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view part = text.substr(begin, end - begin);
    uint64_t first = 0, last = 0, stride = 1;
    const size_t dash = part.find('-');
    const size_t slash = part.find('/');
    const auto bad = [&] {
      return absl::InvalidArgumentError(
          absl::StrCat("bad rank list part ", Shown(part), " (expected R, A-B or A-B/STRIDE)"));
    };
    if (dash == std::string_view::npos) {
      if (slash != std::string_view::npos) return bad();
      const auto value = ParseNumber(part, INT32_MAX);
      if (!value) return bad();
      first = last = *value;
    } else {
      const auto a = ParseNumber(part.substr(0, dash), INT32_MAX);
      const std::string_view rest = part.substr(dash + 1, slash == std::string_view::npos ? std::string_view::npos
                                                                                           : slash - dash - 1);
      const auto b = ParseNumber(rest, INT32_MAX);
      if (!a || !b || *b < *a) return bad();
      first = *a;
      last = *b;
      if (slash != std::string_view::npos) {
        const auto s = ParseNumber(part.substr(slash + 1), INT32_MAX);
        if (!s || *s == 0) return bad();
        stride = *s;
      }
    }
    if (last >= static_cast<uint64_t>(size)) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", last, " is not below the size ", size));
    }
    const uint64_t count = (last - first) / stride + 1;
    if (count > *budget) {
      return absl::InvalidArgumentError(absl::StrCat("the file lists more than ", kMaxBaselineRanks, " ranks in all"));
    }
    *budget -= count;
    for (uint64_t rank = first; rank <= last; rank += stride) ranks.push_back(static_cast<int32_t>(rank));
    begin = end + 1;
  }
  // Lists are written in increasing order (baselines print them so): sorted only when not,
  // which keeps a list of millions of ranks linear.
  if (std::adjacent_find(ranks.begin(), ranks.end(), std::greater_equal<>()) != ranks.end()) {
    std::sort(ranks.begin(), ranks.end());
    if (std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end()) {
      return absl::InvalidArgumentError("a rank appears twice in the list");
    }
  }
  return ranks;
}

// Closes a communicator: its sections must cover each of its ranks once.
absl::Status FinishComm(const BaselineComm& comm) {
  if (comm.sections.empty()) return LineError(comm.line, "communicator without a 'ranks' section");
  // One mark per rank (ParseRankList keeps them below the size): linear in the ranks, where
  // sorting a list of up to kMaxBaselineRanks of them was not.
  std::vector<bool> seen(comm.size, false);
  size_t covered = 0;
  int32_t lowest_twice = -1;
  for (const BaselineSection& section : comm.sections) {
    for (const int32_t rank : section.ranks) {
      if (!seen[rank]) {
        seen[rank] = true;
        ++covered;
      } else if (lowest_twice < 0 || rank < lowest_twice) {
        lowest_twice = rank;
      }
    }
  }
  if (lowest_twice >= 0) {
    return LineError(comm.line, absl::StrCat("rank ", lowest_twice, " is in two 'ranks' sections of comm ", comm.index));
  }
  if (covered != static_cast<size_t>(comm.size)) {
    std::vector<int32_t> missing;
    for (int32_t rank = 0; rank < comm.size && missing.size() < 64; ++rank) {
      if (!seen[rank]) missing.push_back(rank);
    }
    return LineError(comm.line, absl::StrCat("ranks ", ScheduleRanksText(missing), " of comm ", comm.index,
                                             " are in no 'ranks' section"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Baseline> MakeBaseline(const JobSchedule& schedule) {
  if (schedule.comms.empty()) {
    return absl::FailedPreconditionError("the run recorded no NCCL communicator: nothing to make a baseline of");
  }
  Baseline baseline;
  for (const CommSchedule& comm : schedule.comms) {
    if (!comm.absent_ranks.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          CommLabel(comm.index, comm.size, comm.parent), ": ranks ", ScheduleRanksText(comm.absent_ranks),
          " reported nothing; a baseline needs the records of every rank (were some traces lost?)"));
    }
    BaselineComm out;
    out.index = comm.index;
    out.parent = comm.parent;
    out.size = comm.size;
    for (const ClassSchedule& rank_class : comm.classes) {
      BaselineSection section;
      section.ranks = rank_class.ranks;
      section.segments = FoldSchedule(rank_class.ops);
      for (Segment& segment : section.segments) {
        if (segment.steps) segment.repeat = 0;  // any number of steps
      }
      out.sections.push_back(std::move(section));
    }
    baseline.comms.push_back(std::move(out));
  }
  return baseline;
}

std::string FormatBaseline(const Baseline& baseline, const OpTable& table) {
  std::string out = absl::StrCat(
      "# collwatch collective-schedule baseline, written by `collwatch baseline`.\n"
      "# `collwatch check --baseline FILE DIR` fails when a run's collectives differ from it.\n"
      "# Review changes to this file like code. Format and workflow: docs/ci-regression.md\n"
      "# A line is one collective: OP COUNT DTYPE [REDOP] [root=R] \"NVTX REGION\" (- none, ? not reported).\n"
      "# 'step x N' ... 'end': the training step, repeated any number of times (N >= 1).\n"
      "collwatch-baseline ",
      baseline.version, "\n");
  if (baseline.code_lines) {
    out += "# Regions taken from Python call paths name their lines (collwatch baseline --code-lines).\ncode-lines\n";
  }
  for (const BaselineComm& comm : baseline.comms) {
    absl::StrAppend(&out, "\ncomm ", comm.index, " size ", comm.size);
    if (comm.parent > 0) absl::StrAppend(&out, " parent ", comm.parent);
    out += "\n";
    for (const BaselineSection& section : comm.sections) {
      absl::StrAppend(&out, "  ranks ", ScheduleRanksText(section.ranks), "\n");
      for (const Segment& segment : section.segments) {
        const char* indent = "    ";
        if (segment.steps) {
          absl::StrAppend(&out, "    step x ", segment.repeat == 0 ? std::string("N") : absl::StrCat(segment.repeat),
                          "  # ", segment.ops.size(), " collective", segment.ops.size() == 1 ? "" : "s", "\n");
          indent = "      ";
        }
        for (const uint32_t op : segment.ops) absl::StrAppend(&out, indent, table.Line(op), "\n");
        if (segment.steps) out += "    end\n";
      }
    }
  }
  return out;
}

absl::StatusOr<Baseline> ParseBaseline(std::string_view text, OpTable* table) {
  if (text.size() > kMaxBaselineBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("baseline of ", text.size(), " bytes is larger than the ", kMaxBaselineBytes, " bytes allowed"));
  }
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // a UTF-8 byte order mark
  Baseline baseline;
  bool have_version = false;
  uint64_t size_budget = kMaxBaselineRanks;  // sizes in all
  uint64_t list_budget = kMaxBaselineRanks;  // ranks listed in all
  BaselineComm* comm = nullptr;
  BaselineSection* section = nullptr;
  int open_step_line = 0;  // line of the open `step x` (0: none open)
  int last_line = 0;
  size_t begin = 0;
  for (int line_number = 1; begin < text.size(); ++line_number) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(begin, end - begin);
    begin = end + 1;
    last_line = line_number;
    if (line.size() > kMaxBaselineLineBytes) {
      return LineError(line_number, absl::StrCat("line longer than ", kMaxBaselineLineBytes, " bytes"));
    }
    absl::StatusOr<std::vector<Word>> split = SplitWords(line);
    if (!split.ok()) return LineError(line_number, split.status().message());
    const std::vector<Word>& words = *split;
    if (words.empty()) continue;
    const std::string& head = words[0].quoted ? std::string() : words[0].text;

    if (!have_version) {
      if (head != "collwatch-baseline") {
        return LineError(line_number, absl::StrCat("expected 'collwatch-baseline ", kBaselineVersion,
                                                   "' first (is this a collwatch baseline?); found ", Shown(head)));
      }
      const auto version = words.size() == 2 ? ParseNumber(words[1].text, 1'000'000) : std::nullopt;
      if (!version) return LineError(line_number, "'collwatch-baseline' needs one format version number");
      if (*version != static_cast<uint64_t>(kBaselineVersion)) {
        return LineError(line_number, absl::StrCat("format version ", *version, " is not one this collwatch reads (",
                                                   kBaselineVersion, ")"));
      }
      baseline.version = static_cast<int>(*version);
      have_version = true;
      continue;
    }

    if (head == "code-lines") {
      if (!baseline.comms.empty()) return LineError(line_number, "'code-lines' belongs before the first 'comm'");
      if (words.size() != 1) return LineError(line_number, "'code-lines' takes nothing after it");
      baseline.code_lines = true;
      continue;
    }

    if (head == "comm") {
      if (open_step_line != 0) {
        return LineError(line_number, absl::StrCat("'comm' inside the step opened on line ", open_step_line,
                                                   " (an 'end' is missing)"));
      }
      if (comm != nullptr) {
        if (absl::Status status = FinishComm(*comm); !status.ok()) return status;
      }
      // comm INDEX size SIZE [parent INDEX]
      const bool shape = (words.size() == 4 || words.size() == 6) && words[2].text == "size" &&
                         (words.size() == 4 || words[4].text == "parent");
      if (!shape) return LineError(line_number, "expected 'comm INDEX size SIZE [parent INDEX]'");
      const int expected_index = static_cast<int>(baseline.comms.size()) + 1;
      const auto index = ParseNumber(words[1].text, INT32_MAX);
      if (!index || *index != static_cast<uint64_t>(expected_index)) {
        return LineError(line_number, absl::StrCat("communicators are numbered in order: expected comm ",
                                                   expected_index, ", found ", Shown(words[1].text)));
      }
      const auto size = ParseNumber(words[3].text, kMaxBaselineRanks);
      if (!size || *size == 0) {
        return LineError(line_number, absl::StrCat("size ", Shown(words[3].text), " is not a number from 1 to ",
                                                    kMaxBaselineRanks));
      }
      if (*size > size_budget) {
        return LineError(line_number, absl::StrCat("the communicators' sizes add up to more than ",
                                                   kMaxBaselineRanks, " ranks"));
      }
      size_budget -= *size;
      BaselineComm next;
      next.index = expected_index;
      next.size = static_cast<int32_t>(*size);
      next.line = line_number;
      if (words.size() == 6) {
        const auto parent = ParseNumber(words[5].text, INT32_MAX);
        if (!parent || *parent == 0 || *parent >= static_cast<uint64_t>(expected_index)) {
          return LineError(line_number,
                           absl::StrCat("parent ", Shown(words[5].text), " must name an earlier communicator",
                                        expected_index > 1 ? absl::StrCat(" (1 to ", expected_index - 1, ")") : ""));
        }
        next.parent = static_cast<int>(*parent);
      }
      baseline.comms.push_back(std::move(next));
      comm = &baseline.comms.back();
      section = nullptr;
      continue;
    }
    if (head == "ranks") {
      if (comm == nullptr) return LineError(line_number, "'ranks' before any 'comm' line");
      if (open_step_line != 0) {
        return LineError(line_number, absl::StrCat("'ranks' inside the step opened on line ", open_step_line,
                                                   " (an 'end' is missing)"));
      }
      if (words.size() != 2 || words[1].quoted) {
        return LineError(line_number, "expected 'ranks LIST' (e.g. 0-3 or 0,2)");
      }
      absl::StatusOr<std::vector<int32_t>> ranks = ParseRankList(words[1].text, comm->size, &list_budget);
      if (!ranks.ok()) return LineError(line_number, ranks.status().message());
      BaselineSection next;
      next.ranks = std::move(*ranks);
      next.line = line_number;
      comm->sections.push_back(std::move(next));
      section = &comm->sections.back();
      continue;
    }
    if (head == "step") {
      if (section == nullptr) return LineError(line_number, "'step' outside a 'ranks' section");
      if (open_step_line != 0) {
        return LineError(line_number, absl::StrCat("a step inside the step opened on line ", open_step_line));
      }
      if (words.size() != 3 || words[1].text != "x") {
        return LineError(line_number, "expected 'step x N' or 'step x COUNT'");
      }
      for (const Segment& segment : section->segments) {
        if (segment.steps) return LineError(line_number, "a 'ranks' section has one step at most");
      }
      Segment step;
      step.steps = true;
      if (words[2].text == "N") {
        step.repeat = 0;
      } else {
        const auto count = ParseNumber(words[2].text, kMaxStepRepeat);
        if (!count || *count == 0) {
          return LineError(line_number, absl::StrCat("step count ", Shown(words[2].text),
                                                     " is neither N nor a number from 1 to ", kMaxStepRepeat));
        }
        step.repeat = *count;
      }
      section->segments.push_back(std::move(step));
      open_step_line = line_number;
      continue;
    }
    if (head == "end") {
      if (open_step_line == 0) return LineError(line_number, "'end' without a 'step x N' to close");
      if (words.size() != 1) return LineError(line_number, "'end' stands alone");
      if (section->segments.back().ops.empty()) {
        return LineError(line_number, absl::StrCat("the step opened on line ", open_step_line, " has no collectives"));
      }
      open_step_line = 0;
      continue;
    }
    if (head == "collwatch-baseline") return LineError(line_number, "a second 'collwatch-baseline' line");
    // Otherwise a collective.
    absl::StatusOr<ScheduleOp> op = OpFromWords(words);
    if (!op.ok()) return LineError(line_number, op.status().message());
    if (section == nullptr) return LineError(line_number, "a collective outside a 'ranks' section");
    if (section->segments.empty() || (section->segments.back().steps && open_step_line == 0)) {
      section->segments.emplace_back();
    }
    Segment& segment = section->segments.back();
    segment.ops.push_back(table->Intern(*std::move(op)));
    segment.lines.push_back(line_number);
  }
  if (!have_version) return absl::InvalidArgumentError("empty baseline: no 'collwatch-baseline' line");
  if (open_step_line != 0) {
    return LineError(last_line, absl::StrCat("the file ends inside the step opened on line ", open_step_line,
                                             " (an 'end' is missing)"));
  }
  if (comm == nullptr) return LineError(last_line, "no 'comm' section: the baseline checks nothing");
  if (absl::Status status = FinishComm(*comm); !status.ok()) return status;
  return baseline;
}

}  // namespace collwatch::analyzer
