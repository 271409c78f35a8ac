// Schedules, the repeating step, the baseline file and the diffs (see schedule.h).
// Threading: pure functions over their arguments.
#include "analyzer/schedule.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <optional>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analyzer/finding.h"
#include "analyzer/process_ranks.h"

namespace collwatch::analyzer {
namespace {

using ring::ApiFn;

// ---- Words of a baseline line --------------------------------------------------------

// A word of a line: quoted words keep their spaces and come unescaped.
struct Word {
  std::string text;
  bool quoted = false;
};

// This abseil's StrCat takes its own string_view only.
absl::string_view Av(std::string_view text) { return absl::string_view(text.data(), text.size()); }

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Text of a word fit for an error message: escaped, cut at 40 bytes.
std::string Shown(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < 40; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f || c == '\\' || c == '\'') {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > 40) out += "...";
  return absl::StrCat("'", out, "'");
}

// Splits a line into words. '#' outside quotes starts a comment; inside "..." the
// escapes \" \\ \n \t \r \xHH are understood.
absl::StatusOr<std::vector<Word>> SplitWords(std::string_view line) {
  std::vector<Word> words;
  size_t i = 0;
  while (i < line.size()) {
    if (IsBlank(line[i])) {
      ++i;
      continue;
    }
    if (line[i] == '#') break;
    Word word;
    if (line[i] == '"') {
      word.quoted = true;
      ++i;
      bool closed = false;
      while (i < line.size()) {
        const char c = line[i++];
        if (c == '"') {
          closed = true;
          break;
        }
        if (c != '\\') {
          word.text += c;
          continue;
        }
        if (i >= line.size()) break;
        const char escape = line[i++];
        switch (escape) {
          case '"': word.text += '"'; break;
          case '\\': word.text += '\\'; break;
          case 'n': word.text += '\n'; break;
          case 't': word.text += '\t'; break;
          case 'r': word.text += '\r'; break;
          case 'x': {
            const int high = i < line.size() ? HexValue(line[i]) : -1;
            const int low = i + 1 < line.size() ? HexValue(line[i + 1]) : -1;
            if (high < 0 || low < 0) return absl::InvalidArgumentError("\\x needs two hex digits");
            word.text += static_cast<char>(high * 16 + low);
            i += 2;
            break;
          }
          default:
            return absl::InvalidArgumentError(
                absl::StrCat("unknown escape ", Shown(std::string("\\") + escape), " in a quoted region"));
        }
      }
      if (!closed) return absl::InvalidArgumentError("a quoted region has no closing '\"'");
      if (i < line.size() && !IsBlank(line[i]) && line[i] != '#') {
        return absl::InvalidArgumentError("text right after a quoted region (a space is missing)");
      }
    } else {
      while (i < line.size() && !IsBlank(line[i]) && line[i] != '#' && line[i] != '"') word.text += line[i++];
      if (i < line.size() && line[i] == '"') {
        return absl::InvalidArgumentError(absl::StrCat("a '\"' inside the word ", Shown(word.text)));
      }
    }
    words.push_back(std::move(word));
  }
  return words;
}

// A decimal number without sign, spaces or leading '+'; nullopt past `max`.
std::optional<uint64_t> ParseNumber(std::string_view text, uint64_t max) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  uint64_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto digit = static_cast<uint64_t>(c - '0');
    if (value > (max - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

// ---- One op --------------------------------------------------------------------------

std::string QuoteRegion(std::string_view region) {
  if (region.empty()) return "-";
  std::string out = "\"";
  for (const char ch : region) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          absl::StrAppendFormat(&out, "\\x%02x", c);
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

std::string DtypeWord(uint8_t dtype) {
  if (dtype == ring::kNoDtype) return "none";
  const std::string_view name = DtypeName(dtype);
  return name != "none" ? std::string(name) : absl::StrCat("dtype=", dtype);
}

std::string RedopWord(int32_t redop) {
  const std::string_view name = RedOpName(redop);
  return name != "custom" ? std::string(name) : absl::StrCat("redop=", redop);
}

constexpr ApiFn kCollectiveFns[] = {ApiFn::kAllReduce, ApiFn::kBroadcast,     ApiFn::kBcast,
                                    ApiFn::kReduce,    ApiFn::kAllGather,     ApiFn::kReduceScatter,
                                    ApiFn::kAlltoAll,  ApiFn::kGather,        ApiFn::kScatter};
constexpr std::string_view kRedopNames[] = {"sum", "prod", "max", "min", "avg"};

std::optional<ApiFn> CollectiveByName(std::string_view name) {
  for (const ApiFn fn : kCollectiveFns) {
    if (OpName(fn) == name) return fn;
  }
  return std::nullopt;
}

std::optional<uint8_t> DtypeByWord(std::string_view word) {
  if (word == "none") return ring::kNoDtype;
  for (int dtype = 0; dtype < 255; ++dtype) {
    const std::string_view name = DtypeName(static_cast<uint8_t>(dtype));
    if (name == "none") break;
    if (name == word) return static_cast<uint8_t>(dtype);
  }
  if (word.starts_with("dtype=")) {
    if (const auto value = ParseNumber(word.substr(6), 255)) return static_cast<uint8_t>(*value);
  }
  return std::nullopt;
}

absl::StatusOr<ScheduleOp> OpFromWords(const std::vector<Word>& words) {
  if (words.empty()) return absl::InvalidArgumentError("empty collective line");
  if (words[0].quoted) return absl::InvalidArgumentError("a line cannot start with a quoted region");
  ScheduleOp op;
  if (words[0].text == "?") {
    if (words.size() != 1) return absl::InvalidArgumentError("'?' (a collective not reported) stands alone");
    return op;
  }
  const std::optional<ApiFn> fn = CollectiveByName(words[0].text);
  if (!fn) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown collective ", Shown(words[0].text),
        " (expected all-reduce, broadcast, bcast, reduce, all-gather, reduce-scatter, all-to-all, gather, "
        "scatter or ?)"));
  }
  op.fn = *fn;
  if (words.size() < 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(words[0].text, " needs COUNT DTYPE [REDOP] [root=R] REGION (\"NAME\" or - for none)"));
  }
  const std::optional<uint64_t> count =
      words[1].quoted ? std::nullopt : ParseNumber(words[1].text, std::numeric_limits<uint64_t>::max());
  if (!count) return absl::InvalidArgumentError(absl::StrCat("count ", Shown(words[1].text), " is not a number"));
  op.count = *count;
  const std::optional<uint8_t> dtype = words[2].quoted ? std::nullopt : DtypeByWord(words[2].text);
  if (!dtype) {
    return absl::InvalidArgumentError(absl::StrCat("unknown dtype ", Shown(words[2].text),
                                                   " (e.g. float32, bfloat16, int64, none, dtype=N)"));
  }
  op.dtype = *dtype;
  size_t i = 3;
  for (; i + 1 < words.size(); ++i) {
    const Word& word = words[i];
    if (word.quoted) return absl::InvalidArgumentError("the quoted region must be the last word");
    std::optional<int32_t> redop;
    for (size_t r = 0; r < std::size(kRedopNames); ++r) {
      if (word.text == kRedopNames[r]) redop = static_cast<int32_t>(r);
    }
    if (word.text.starts_with("redop=")) {
      if (const auto value = ParseNumber(std::string_view(word.text).substr(6), INT32_MAX)) {
        redop = static_cast<int32_t>(*value);
      }
    }
    if (redop) {
      if (op.redop != ring::kUnset) return absl::InvalidArgumentError("two reduce ops on one line");
      op.redop = *redop;
      continue;
    }
    if (word.text.starts_with("root=")) {
      const auto value = ParseNumber(std::string_view(word.text).substr(5), INT32_MAX);
      if (!value) return absl::InvalidArgumentError(absl::StrCat("bad root ", Shown(word.text)));
      if (op.root != ring::kUnset) return absl::InvalidArgumentError("two roots on one line");
      op.root = static_cast<int32_t>(*value);
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat("unexpected ", Shown(word.text),
                                                   " (expected a reduce op such as sum, root=R, or the region)"));
  }
  const Word& region = words[i];
  if (region.quoted) {
    op.region = region.text;
  } else if (region.text != "-") {
    return absl::InvalidArgumentError(
        absl::StrCat("the line must end with the region in quotes, or - for none; found ", Shown(region.text)));
  }
  return op;
}

ScheduleOp OpOfCall(const JobModel& model, const Call& call) {
  ScheduleOp op;
  op.fn = call.fn;
  op.count = call.count;
  op.dtype = call.dtype;
  op.redop = call.redop;
  op.root = call.root_or_peer;
  op.region = std::string(model.RegionName(call.region));
  return op;
}

// ---- Communicators across runs --------------------------------------------------------

// Keys that match communicators across runs: the n-th communicator of its size among its
// parent's children (roots: among the roots), in creation order.
std::vector<std::string> MatchKeys(const std::vector<std::pair<int, int32_t>>& parent_and_size) {
  std::vector<std::string> keys(parent_and_size.size());
  std::map<std::string, int> seen;
  for (size_t i = 0; i < parent_and_size.size(); ++i) {
    const auto [parent, size] = parent_and_size[i];
    const std::string parent_key =
        parent > 0 && static_cast<size_t>(parent) <= i ? keys[static_cast<size_t>(parent) - 1] : "";
    const std::string stem = absl::StrCat(parent_key, "/", size);
    keys[i] = absl::StrCat(stem, "#", seen[stem]++);
  }
  return keys;
}

std::vector<int32_t> Intersect(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  std::vector<int32_t> out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

std::string Ranks(const std::vector<int32_t>& ranks) {
  return RankListText(ranks, std::numeric_limits<size_t>::max());
}

// ---- The repeating step --------------------------------------------------------------

struct Repeat {
  size_t start = 0;
  size_t period = 0;
  size_t times = 0;
  uint64_t hidden() const { return times < 2 ? 0 : static_cast<uint64_t>(times - 1) * period; }
};

bool Better(const Repeat& a, const Repeat& b) {
  return std::tuple(a.hidden(), b.start, b.period) > std::tuple(b.hidden(), a.start, a.period);
}

// Every period up to this length is tried; longer schedules try likely periods only.
constexpr size_t kFullScanLength = 4096;
constexpr size_t kSmallPeriods = 64;
constexpr size_t kGapCandidates = 256;
constexpr size_t kRecentOccurrences = 8;

// Likely periods of a long schedule: short ones, and the most frequent distances between
// an op and its last few occurrences (a step of period p puts each of its ops exactly p
// after the same op of the step before, at most `kRecentOccurrences` occurrences back
// unless one op fills most of the step).
std::vector<size_t> CandidatePeriods(const std::vector<uint32_t>& ops) {
  const size_t n = ops.size();
  std::vector<size_t> periods;
  if (n <= kFullScanLength) {
    for (size_t p = 1; p <= n / 2; ++p) periods.push_back(p);
    return periods;
  }
  for (size_t p = 1; p <= kSmallPeriods && p <= n / 2; ++p) periods.push_back(p);
  std::vector<uint32_t> gap_count(n / 2 + 1, 0);
  struct Recent {
    std::array<size_t, kRecentOccurrences> positions{};
    size_t seen = 0;
  };
  std::unordered_map<uint32_t, Recent> recent;  // op -> its last occurrences (a ring)
  for (size_t i = 0; i < n; ++i) {
    Recent& entry = recent[ops[i]];
    for (size_t k = 0; k < std::min(entry.seen, kRecentOccurrences); ++k) {
      const size_t gap = i - entry.positions[k];
      if (gap > kSmallPeriods && gap <= n / 2) ++gap_count[gap];
    }
    entry.positions[entry.seen++ % kRecentOccurrences] = i;
  }
  std::vector<std::pair<uint32_t, size_t>> ranked;
  for (size_t gap = kSmallPeriods + 1; gap < gap_count.size(); ++gap) {
    if (gap_count[gap] > 0) ranked.emplace_back(gap_count[gap], gap);
  }
  const size_t keep = std::min(ranked.size(), kGapCandidates);
  std::partial_sort(
      ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(keep), ranked.end(),
      [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  for (size_t i = 0; i < keep; ++i) periods.push_back(ranked[i].second);
  return periods;
}

// The best repeat with period p: each maximal run where ops[i] == ops[i + p].
void ScanPeriod(const std::vector<uint32_t>& ops, size_t p, Repeat* best) {
  const size_t n = ops.size();
  size_t i = 0;
  while (i + p < n) {
    if (ops[i] != ops[i + p]) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j + p < n && ops[j] == ops[j + p]) ++j;
    const Repeat candidate{i, p, (j - i + p) / p};
    if (Better(candidate, *best)) *best = candidate;
    i = j + 1;
  }
}

// ---- Expanding a pattern ----------------------------------------------------------------

// Where a position of an expanded schedule comes from.
struct Where {
  size_t segment = 0;
  uint64_t iteration = 0;  // of a step segment
  size_t line = 0;         // index in the segment's ops
};

uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max() / 2;
  if (a != 0 && b > kMax / a) return kMax;
  return a * b;
}

// Segments taken counts[i] times each, in order, read position by position.
class Expansion {
 public:
  Expansion(const std::vector<Segment>& segments, std::vector<uint64_t> counts)
      : segments_(segments), counts_(std::move(counts)) {
    for (size_t i = 0; i < segments_.size(); ++i) {
      size_ = std::min(size_ + SaturatingMul(counts_[i], segments_[i].ops.size()),
                       std::numeric_limits<uint64_t>::max() / 2);
    }
  }
  uint64_t size() const { return size_; }
  uint64_t count(size_t segment) const { return counts_[segment]; }
  const std::vector<Segment>& segments() const { return segments_; }

  Where Locate(uint64_t position) const {
    Where where;
    for (size_t i = 0; i < segments_.size(); ++i) {
      const uint64_t length = segments_[i].ops.size();
      const uint64_t span = SaturatingMul(counts_[i], length);
      if (position < span) {
        where.segment = i;
        where.iteration = position / length;
        where.line = static_cast<size_t>(position % length);
        return where;
      }
      position -= span;
    }
    where.segment = segments_.size();
    return where;
  }
  uint32_t At(uint64_t position) const {
    const Where where = Locate(position);
    return segments_[where.segment].ops[where.line];
  }
  std::vector<uint32_t> Window(uint64_t first, size_t length) const {
    std::vector<uint32_t> out;
    for (uint64_t i = first; i < size_ && out.size() < length; ++i) out.push_back(At(i));
    return out;
  }

  // "step 2 of 3, line 12 of 58" / "before the steps, line 3" / "after the steps, line 1";
  // without `with_counts` the number of steps is left out ("step 2, line 12 of 58").
  std::string Describe(const Where& where, bool with_counts, bool with_file_line) const {
    if (where.segment >= segments_.size()) return "past the end";
    const Segment& segment = segments_[where.segment];
    bool after_steps = false, any_steps = false;
    for (size_t i = 0; i < segments_.size(); ++i) {
      any_steps |= segments_[i].steps;
      if (i < where.segment) after_steps |= segments_[i].steps;
    }
    std::string text;
    if (segment.steps) {
      text = absl::StrCat("step ", where.iteration + 1,
                          with_counts ? absl::StrCat(" of ", counts_[where.segment]) : std::string(), ", line ",
                          where.line + 1, " of ", segment.ops.size());
    } else if (any_steps) {
      text = absl::StrFormat("%s, line %d", after_steps ? "after the steps" : "before the steps", where.line + 1);
    } else {
      text = absl::StrFormat("line %d of %d", where.line + 1, segment.ops.size());
    }
    if (with_file_line && where.line < segment.lines.size()) {
      absl::StrAppend(&text, "; baseline line ", segment.lines[where.line]);
    }
    return text;
  }

 private:
  const std::vector<Segment>& segments_;
  std::vector<uint64_t> counts_;
  uint64_t size_ = 0;
};

// The first position where `expected` and `actual` differ; nullopt when equal.
std::optional<uint64_t> FirstDifference(const Expansion& expected, const std::vector<uint32_t>& actual) {
  const uint64_t common = std::min<uint64_t>(expected.size(), actual.size());
  for (uint64_t i = 0; i < common; ++i) {
    if (expected.At(i) != actual[i]) return i;
  }
  if (expected.size() == actual.size()) return std::nullopt;
  return common;
}

// ---- Rendering a difference ------------------------------------------------------------

constexpr size_t kContextLines = 3;
constexpr size_t kDiffWindow = 64;
constexpr size_t kMaxChangedLines = 24;

enum class Edit : char { kSame = ' ', kRemoved = '-', kAdded = '+' };

// Longest-common-subsequence edit script of two short windows. Where both readings keep
// as much in common, the second side is taken to have inserted (a run that does extra
// work, then what was expected) rather than to have skipped; within each block of
// changes, removals are listed before additions, as in unified diffs.
std::vector<Edit> EditScript(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  const size_t na = a.size(), nb = b.size();
  std::vector<uint32_t> lcs((na + 1) * (nb + 1), 0);
  auto at = [&](size_t i, size_t j) -> uint32_t& { return lcs[i * (nb + 1) + j]; };
  for (size_t i = na; i-- > 0;) {
    for (size_t j = nb; j-- > 0;) {
      at(i, j) = a[i] == b[j] ? at(i + 1, j + 1) + 1 : std::max(at(i + 1, j), at(i, j + 1));
    }
  }
  std::vector<Edit> script;
  size_t i = 0, j = 0;
  while (i < na || j < nb) {
    if (i < na && j < nb && a[i] == b[j]) {
      script.push_back(Edit::kSame);
      ++i, ++j;
    } else if (j >= nb || (i < na && at(i + 1, j) > at(i, j + 1))) {
      script.push_back(Edit::kRemoved);
      ++i;
    } else {
      script.push_back(Edit::kAdded);
      ++j;
    }
  }
  for (size_t begin = 0; begin < script.size();) {
    size_t end = begin;
    while (end < script.size() && script[end] != Edit::kSame) ++end;
    std::stable_partition(script.begin() + static_cast<std::ptrdiff_t>(begin),
                          script.begin() + static_cast<std::ptrdiff_t>(end),
                          [](Edit e) { return e == Edit::kRemoved; });
    begin = end + 1;
  }
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
    if (a.dtype != b.dtype) what.push_back(absl::StrCat("dtype ", DtypeWord(a.dtype), " -> ", DtypeWord(b.dtype)));
    if (a.redop != b.redop) what.push_back(absl::StrCat("reduce op ", RedopWord(a.redop), " -> ", RedopWord(b.redop)));
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

// A hunk: the header, the two lines that differ first, then the context before `first`
// (equal on both sides) and the edit script of the two windows from `first`, until three
// equal lines follow the last change.
struct HunkSides {
  std::vector<uint32_t> context;  // positions first - context.size() .. first - 1
  std::vector<uint32_t> minus;    // from first
  std::vector<uint32_t> plus;     // from first
  bool minus_more = false;        // the sequence goes on past the window
  bool plus_more = false;
};

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
  const size_t max_changed = sides.minus.empty() || sides.plus.empty() ? kContextLines + 2 : kMaxChangedLines;
  for (const Edit edit : script) {
    if (edit == Edit::kSame) {
      if (same_run == kContextLines) {
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
    out += same_run == kContextLines ? "  ...\n" : "  ... (the difference goes on)\n";
  }
  if (sides.minus.empty() && !sides.minus_more) absl::StrAppend(&out, "  (", minus_name, " ends here)\n");
  if (sides.plus.empty() && !sides.plus_more) absl::StrAppend(&out, "  (", plus_name, " ends here)\n");
  return out;
}

std::vector<uint32_t> Slice(const std::vector<uint32_t>& ops, uint64_t first, size_t length) {
  if (first >= ops.size()) return {};
  const size_t end = static_cast<size_t>(std::min<uint64_t>(ops.size(), first + length));
  return std::vector<uint32_t>(ops.begin() + static_cast<std::ptrdiff_t>(first),
                               ops.begin() + static_cast<std::ptrdiff_t>(end));
}

std::vector<uint32_t> ContextBefore(const std::vector<uint32_t>& ops, uint64_t first) {
  const uint64_t begin = first > kContextLines ? first - kContextLines : 0;
  return Slice(ops, begin, static_cast<size_t>(first - begin));
}

// ---- Baseline parsing -------------------------------------------------------------------

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
  std::sort(ranks.begin(), ranks.end());
  if (std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end()) {
    return absl::InvalidArgumentError("a rank appears twice in the list");
  }
  return ranks;
}

// Closes a communicator: its sections must cover each of its ranks once.
absl::Status FinishComm(const BaselineComm& comm) {
  if (comm.sections.empty()) return LineError(comm.line, "communicator without a 'ranks' section");
  std::vector<int32_t> all;
  for (const BaselineSection& section : comm.sections) {
    all.insert(all.end(), section.ranks.begin(), section.ranks.end());
  }
  std::sort(all.begin(), all.end());
  if (const auto twice = std::adjacent_find(all.begin(), all.end()); twice != all.end()) {
    return LineError(comm.line, absl::StrCat("rank ", *twice, " is in two 'ranks' sections of comm ", comm.index));
  }
  if (all.size() != static_cast<size_t>(comm.size)) {
    std::vector<int32_t> missing;
    size_t k = 0;
    for (int32_t rank = 0; rank < comm.size && missing.size() < 64; ++rank) {
      if (k < all.size() && all[k] == rank) {
        ++k;
      } else {
        missing.push_back(rank);
      }
    }
    return LineError(comm.line, absl::StrCat("ranks ", Ranks(missing), " of comm ", comm.index,
                                             " are in no 'ranks' section"));
  }
  return absl::OkStatus();
}

}  // namespace

// ---- Ops ------------------------------------------------------------------------------

std::string FormatScheduleOp(const ScheduleOp& op) {
  if (op.fn == ApiFn::kNone) return "?";
  std::string line = absl::StrCat(Av(OpName(op.fn)), " ", op.count, " ", DtypeWord(op.dtype));
  if (op.redop != ring::kUnset) absl::StrAppend(&line, " ", RedopWord(op.redop));
  if (op.root != ring::kUnset) absl::StrAppend(&line, " root=", op.root);
  absl::StrAppend(&line, " ", QuoteRegion(op.region));
  return line;
}

absl::StatusOr<ScheduleOp> ParseScheduleOp(std::string_view line) {
  absl::StatusOr<std::vector<Word>> words = SplitWords(line);
  if (!words.ok()) return words.status();
  return OpFromWords(*words);
}

uint32_t OpTable::Intern(ScheduleOp op) {
  if (ignore_regions_) op.region.clear();
  auto [it, inserted] = ids_.try_emplace(FormatScheduleOp(op), static_cast<uint32_t>(ops_.size()));
  if (inserted) ops_.push_back(std::move(op));
  return it->second;
}

// ---- Schedules --------------------------------------------------------------------------

std::vector<CommIndex> CommsInCreationOrder(const JobModel& model) {
  const std::vector<Comm>& comms = model.comms();
  // Per process, the first call it made on each of its communicators.
  std::vector<std::map<CommIndex, uint32_t>> first_call(model.process_count());
  for (CommIndex c = 0; c < comms.size(); ++c) {
    for (const CommRank& rank : comms[c].ranks) {
      if (!rank.present || rank.process >= first_call.size()) continue;
      uint32_t first = rank.init_call;
      for (const uint32_t index : rank.collectives) {
        if (index != kNoCall) {
          first = std::min(first, index);
          break;
        }
      }
      if (!rank.p2p.empty()) first = std::min(first, rank.p2p.front());
      auto [it, inserted] = first_call[rank.process].try_emplace(c, first);
      if (!inserted) it->second = std::min(it->second, first);
    }
  }
  // Per process, the ordinal of each communicator among those it created.
  std::vector<std::map<CommIndex, uint32_t>> ordinal(model.process_count());
  for (size_t p = 0; p < first_call.size(); ++p) {
    std::vector<std::pair<uint32_t, CommIndex>> order;
    for (const auto& [comm, call] : first_call[p]) order.emplace_back(call, comm);
    std::sort(order.begin(), order.end());
    for (size_t k = 0; k < order.size(); ++k) ordinal[p][order[k].second] = static_cast<uint32_t>(k);
  }
  const std::vector<std::vector<int32_t>> ranks_of = RanksOfProcesses(model);
  auto rank_key = [&](ProcessId process) -> int64_t {
    const std::vector<int32_t>& ranks = ranks_of[process];
    return ranks.empty() ? (int64_t{1} << 32) + process : ranks.front();
  };
  using Key = std::tuple<uint32_t, int64_t, int32_t, CommIndex>;
  std::vector<Key> keys;
  for (CommIndex c = 0; c < comms.size(); ++c) {
    std::optional<ProcessId> lowest;
    for (const CommRank& rank : comms[c].ranks) {
      if (rank.present && rank.process < model.process_count() &&
          (!lowest || rank_key(rank.process) < rank_key(*lowest))) {
        lowest = rank.process;
      }
    }
    if (!lowest) {
      keys.emplace_back(UINT32_MAX, INT64_MAX, comms[c].nranks, c);
    } else {
      keys.emplace_back(ordinal[*lowest][c], rank_key(*lowest), comms[c].nranks, c);
    }
  }
  std::sort(keys.begin(), keys.end());
  std::vector<CommIndex> order;
  for (const Key& key : keys) order.push_back(std::get<3>(key));
  return order;
}

JobSchedule ExtractSchedule(const JobModel& model, OpTable* table) {
  JobSchedule schedule;
  const std::vector<Comm>& comms = model.comms();
  const std::vector<CommIndex> order = CommsInCreationOrder(model);
  std::vector<int> index_of(comms.size(), 0);
  for (size_t i = 0; i < order.size(); ++i) index_of[order[i]] = static_cast<int>(i) + 1;
  // Ops of this model by fingerprint: each distinct call formatted once.
  struct FingerprintHash {
    size_t operator()(const Fingerprint& f) const { return static_cast<size_t>(HashOf(f)); }
  };
  std::unordered_map<Fingerprint, uint32_t, FingerprintHash> ids;
  const uint32_t not_reported = table->Intern(ScheduleOp{});

  for (size_t i = 0; i < order.size(); ++i) {
    const Comm& comm = comms[order[i]];
    CommSchedule out;
    out.index = static_cast<int>(i) + 1;
    out.size = comm.nranks;
    out.id = comm.id;
    if (comm.parent_id != 0) {
      if (const Comm* parent = model.FindComm(comm.parent_id)) {
        out.parent = index_of[static_cast<size_t>(parent - comms.data())];
      }
    }
    std::map<std::vector<uint32_t>, size_t> class_of;
    for (size_t r = 0; r < comm.ranks.size(); ++r) {
      const CommRank& rank = comm.ranks[r];
      if (!rank.present) {
        out.absent_ranks.push_back(static_cast<int32_t>(r));
        continue;
      }
      std::vector<uint32_t> ops;
      ops.reserve(rank.collectives.size());
      for (const uint32_t index : rank.collectives) {
        if (index == kNoCall) {
          ops.push_back(not_reported);
          continue;
        }
        const Call& call = model.call(rank.process, index);
        const Fingerprint fingerprint = FingerprintOf(call);
        auto it = ids.find(fingerprint);
        if (it == ids.end()) it = ids.emplace(fingerprint, table->Intern(OpOfCall(model, call))).first;
        ops.push_back(it->second);
      }
      auto [it, inserted] = class_of.try_emplace(std::move(ops), out.classes.size());
      if (inserted) out.classes.push_back(ClassSchedule{{}, it->first});
      out.classes[it->second].ranks.push_back(static_cast<int32_t>(r));
    }
    schedule.comms.push_back(std::move(out));
  }
  return schedule;
}

std::string CommLabel(int index, int32_t size, int parent) {
  return parent > 0 ? absl::StrFormat("comm %d (size %d, split from comm %d)", index, size, parent)
                    : absl::StrFormat("comm %d (size %d)", index, size);
}

// ---- Folding --------------------------------------------------------------------------

std::vector<Segment> FoldSchedule(const std::vector<uint32_t>& ops) {
  std::vector<Segment> segments;
  if (ops.empty()) return segments;
  Repeat best;
  for (const size_t period : CandidatePeriods(ops)) ScanPeriod(ops, period, &best);
  // Two lines hidden at least: "a a" stays as it is, "a b a b" or "a a a" folds.
  if (best.hidden() < 2) {
    segments.push_back(Segment{ops, false, 1, {}});
    return segments;
  }
  const auto begin = ops.begin();
  const auto step_begin = begin + static_cast<std::ptrdiff_t>(best.start);
  const auto step_end = step_begin + static_cast<std::ptrdiff_t>(best.period);
  const auto steps_end = step_begin + static_cast<std::ptrdiff_t>(best.period * best.times);
  if (best.start > 0) segments.push_back(Segment{std::vector<uint32_t>(begin, step_begin), false, 1, {}});
  segments.push_back(Segment{std::vector<uint32_t>(step_begin, step_end), true, best.times, {}});
  if (steps_end != ops.end()) segments.push_back(Segment{std::vector<uint32_t>(steps_end, ops.end()), false, 1, {}});
  return segments;
}

// ---- Baseline ---------------------------------------------------------------------------

absl::StatusOr<Baseline> MakeBaseline(const JobSchedule& schedule) {
  if (schedule.comms.empty()) {
    return absl::FailedPreconditionError("the run recorded no NCCL communicator: nothing to make a baseline of");
  }
  Baseline baseline;
  for (const CommSchedule& comm : schedule.comms) {
    if (!comm.absent_ranks.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          CommLabel(comm.index, comm.size, comm.parent), ": ranks ", Ranks(comm.absent_ranks),
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
  for (const BaselineComm& comm : baseline.comms) {
    absl::StrAppend(&out, "\ncomm ", comm.index, " size ", comm.size);
    if (comm.parent > 0) absl::StrAppend(&out, " parent ", comm.parent);
    out += "\n";
    for (const BaselineSection& section : comm.sections) {
      absl::StrAppend(&out, "  ranks ", Ranks(section.ranks), "\n");
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

// ---- Check ------------------------------------------------------------------------------

namespace {

// A run's class against one baseline section: empty when it matches, else the hunk.
std::string CheckClass(const BaselineSection& section, const std::vector<uint32_t>& actual,
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
  std::optional<Expansion> best;
  uint64_t best_first = 0;
  for (const uint64_t steps : step_counts) {
    std::vector<uint64_t> counts;
    for (size_t i = 0; i < segments.size(); ++i) counts.push_back(step_segment == i ? steps : 1);
    Expansion expansion(segments, std::move(counts));
    const std::optional<uint64_t> first = FirstDifference(expansion, actual);
    if (!first) return "";
    // The furthest match wins; at a tie, the length nearer the run's (a dropped collective
    // is then shown as such, not as a missing step).
    const auto distance = [&](const Expansion& e) {
      return e.size() > actual.size() ? e.size() - actual.size() : actual.size() - e.size();
    };
    if (!best || *first > best_first || (*first == best_first && distance(expansion) < distance(*best))) {
      best.emplace(expansion);
      best_first = *first;
    }
  }
  const Expansion& expected = *best;
  HunkSides sides;
  sides.context = ContextBefore(actual, best_first);
  sides.minus = expected.Window(best_first, kDiffWindow);
  sides.plus = Slice(actual, best_first, kDiffWindow);
  sides.minus_more = best_first + sides.minus.size() < expected.size();
  sides.plus_more = best_first + sides.plus.size() < actual.size();
  const std::string where = best_first < expected.size()
                                ? expected.Describe(expected.Locate(best_first), /*with_counts=*/false, true)
                                : "past the baseline's end";
  const std::string header =
      absl::StrCat(comm_name, ", ranks ", Ranks(ranks), ": collective ", best_first + 1, " differs (", where, ")");
  return RenderHunk(table, best_first, sides, header, "the baseline", "the run");
}

CommCheck CheckComm(const BaselineComm& expected, const CommSchedule* actual, const OpTable& table) {
  CommCheck check;
  check.name = CommLabel(expected.index, expected.size, expected.parent);
  if (actual == nullptr) {
    check.message = absl::StrCat(check.name, ": not in the run (no communicator of size ", expected.size,
                                 expected.parent > 0 ? absl::StrCat(" split from comm ", expected.parent) : "",
                                 " was created in that order)\n");
    return check;
  }
  std::string message;
  if (!actual->absent_ranks.empty()) {
    absl::StrAppend(&message, check.name, ": ranks ", Ranks(actual->absent_ranks),
                    " reported nothing in the run (lost traces, or the ranks never joined)\n");
  }
  for (const BaselineSection& section : expected.sections) {
    for (const ClassSchedule& rank_class : actual->classes) {
      const std::vector<int32_t> ranks = Intersect(section.ranks, rank_class.ranks);
      if (ranks.empty()) continue;
      message += CheckClass(section, rank_class.ops, ranks, check.name, table);
    }
  }
  check.passed = message.empty();
  check.message = std::move(message);
  return check;
}

std::string XmlEscape(std::string_view text) {
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      case '\n': out += "&#10;"; break;
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
  const std::vector<std::string> expected_keys = MatchKeys(expected_shapes);
  const std::vector<std::string> actual_keys = MatchKeys(actual_shapes);
  std::map<std::string, size_t> actual_by_key;
  for (size_t i = 0; i < actual_keys.size(); ++i) actual_by_key[actual_keys[i]] = i;
  std::vector<bool> matched(run.comms.size(), false);
  for (size_t i = 0; i < baseline.comms.size(); ++i) {
    const CommSchedule* actual = nullptr;
    if (auto it = actual_by_key.find(expected_keys[i]); it != actual_by_key.end()) {
      actual = &run.comms[it->second];
      matched[it->second] = true;
    }
    result.comms.push_back(CheckComm(baseline.comms[i], actual, table));
  }
  for (size_t i = 0; i < run.comms.size(); ++i) {
    if (matched[i]) continue;
    const CommSchedule& comm = run.comms[i];
    CommCheck extra;
    extra.name = CommLabel(comm.index, comm.size, comm.parent);
    size_t collectives = 0;
    for (const ClassSchedule& rank_class : comm.classes) collectives = std::max(collectives, rank_class.ops.size());
    extra.message = absl::StrCat(extra.name, ": a communicator the baseline does not have (", collectives,
                                 " collectives); if it is meant to be there, make the baseline again\n");
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

std::string CheckJunitXml(const CheckResult& result, std::string_view suite_name) {
  size_t failures = 0;
  for (const CommCheck& comm : result.comms) failures += comm.passed ? 0 : 1;
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  absl::StrAppend(&out, "<testsuites name=\"collwatch check\" tests=\"", result.comms.size(), "\" failures=\"",
                  failures, "\">\n");
  absl::StrAppend(&out, "  <testsuite name=\"", XmlEscape(suite_name), "\" tests=\"", result.comms.size(),
                  "\" failures=\"", failures, "\" errors=\"0\" skipped=\"0\">\n");
  for (const CommCheck& comm : result.comms) {
    absl::StrAppend(&out, "    <testcase classname=\"collwatch.schedule\" name=\"", XmlEscape(comm.name), "\"");
    if (comm.passed) {
      out += "/>\n";
      continue;
    }
    absl::StrAppend(&out, ">\n      <failure type=\"ScheduleChanged\" message=\"", XmlEscape(comm.message), "\">",
                    XmlEscape(comm.message), "</failure>\n    </testcase>\n");
  }
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

// ---- Diff of two runs ------------------------------------------------------------------

ScheduleDiff DiffSchedules(const JobSchedule& a, const JobSchedule& b, const OpTable& table,
                           std::string_view label_a_in, std::string_view label_b_in) {
  // The runs are A and B in the hunks; the header names them.
  const absl::string_view label_a = "A", label_b = "B";
  ScheduleDiff diff;
  std::string out = absl::StrCat("--- A: ", Av(label_a_in), "\n+++ B: ", Av(label_b_in), "\n");
  std::vector<std::pair<int, int32_t>> shapes_a, shapes_b;
  for (const CommSchedule& comm : a.comms) shapes_a.emplace_back(comm.parent, comm.size);
  for (const CommSchedule& comm : b.comms) shapes_b.emplace_back(comm.parent, comm.size);
  const std::vector<std::string> keys_a = MatchKeys(shapes_a);
  const std::vector<std::string> keys_b = MatchKeys(shapes_b);
  std::map<std::string, size_t> b_by_key;
  for (size_t i = 0; i < keys_b.size(); ++i) b_by_key[keys_b[i]] = i;
  std::vector<bool> b_matched(b.comms.size(), false);

  for (size_t i = 0; i < a.comms.size(); ++i) {
    const CommSchedule& comm_a = a.comms[i];
    const std::string name = CommLabel(comm_a.index, comm_a.size, comm_a.parent);
    auto it = b_by_key.find(keys_a[i]);
    if (it == b_by_key.end()) {
      diff.identical = false;
      absl::StrAppend(&out, "@@ ", name, ": only in ", label_a, " @@\n");
      continue;
    }
    b_matched[it->second] = true;
    const CommSchedule& comm_b = b.comms[it->second];
    const std::string name_b = CommLabel(comm_b.index, comm_b.size, comm_b.parent);
    const std::string both = name == name_b ? name : absl::StrCat(name, " (", name_b, " in ", label_b, ")");
    if (comm_a.absent_ranks != comm_b.absent_ranks) {
      diff.identical = false;
      absl::StrAppend(&out, "@@ ", both, ": ranks reporting nothing: ", Ranks(comm_a.absent_ranks), " in ", label_a,
                      ", ", Ranks(comm_b.absent_ranks), " in ", label_b, " @@\n");
    }
    if (comm_a.classes.size() > 1 || comm_b.classes.size() > 1) {
      auto classes = [](const CommSchedule& comm) {
        std::vector<std::string> parts;
        for (const ClassSchedule& rank_class : comm.classes) parts.push_back(Ranks(rank_class.ranks));
        return absl::StrJoin(parts, " | ");
      };
      absl::StrAppend(&out, "# ", both, ": ranks that issued different schedules within a run: ", label_a, ": ",
                      classes(comm_a), "; ", label_b, ": ", classes(comm_b), "\n");
    }
    // Compare each pair of classes that share ranks, through the lowest shared rank.
    for (const ClassSchedule& class_a : comm_a.classes) {
      for (const ClassSchedule& class_b : comm_b.classes) {
        const std::vector<int32_t> ranks = Intersect(class_a.ranks, class_b.ranks);
        if (ranks.empty()) continue;
        const std::vector<uint32_t>& ops_a = class_a.ops;
        const std::vector<uint32_t>& ops_b = class_b.ops;
        if (ops_a == ops_b) continue;
        diff.identical = false;
        const auto mismatch = std::mismatch(ops_a.begin(), ops_a.end(), ops_b.begin(), ops_b.end());
        const auto first = static_cast<uint64_t>(mismatch.first - ops_a.begin());
        HunkSides sides;
        sides.context = ContextBefore(ops_a, first);
        sides.minus = Slice(ops_a, first, kDiffWindow);
        sides.plus = Slice(ops_b, first, kDiffWindow);
        sides.minus_more = first + sides.minus.size() < ops_a.size();
        sides.plus_more = first + sides.plus.size() < ops_b.size();
        // Where in A's step the difference falls.
        const std::vector<Segment> folded = FoldSchedule(ops_a);
        std::vector<uint64_t> counts;
        for (const Segment& segment : folded) counts.push_back(segment.repeat);
        const Expansion expansion(folded, std::move(counts));
        const std::string where =
            first < ops_a.size()
                ? absl::StrCat(" (", label_a, ": ", expansion.Describe(expansion.Locate(first), true, false), ")")
                : "";
        const std::string header =
            absl::StrCat(both, ", ranks ", Ranks(ranks), ": first difference at collective ", first + 1, where);
        out += RenderHunk(table, first, sides, header, label_a, label_b);
      }
    }
  }
  for (size_t i = 0; i < b.comms.size(); ++i) {
    if (b_matched[i]) continue;
    diff.identical = false;
    absl::StrAppend(&out, "@@ ", CommLabel(b.comms[i].index, b.comms[i].size, b.comms[i].parent), ": only in ",
                    label_b, " @@\n");
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
