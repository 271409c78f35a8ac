// The words of a schedule line (see schedule_words.h): a hand-written tokenizer that
// never recurses and caps nothing itself (the baseline parser caps line lengths).
// Threading: pure functions over their arguments.
#include "analyzer/schedule_words.h"

#include <cstdint>
#include <iterator>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analyzer/finding.h"

namespace collwatch::analyzer::schedule_internal {
namespace {

using ring::ApiFn;

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A collective by its name (ring/ring_names.h); the other entry points are not schedule ops.
std::optional<ApiFn> CollectiveByName(std::string_view name) {
  const std::optional<ApiFn> fn = OpByName(name);
  return fn && ring::IsCollective(*fn) ? fn : std::nullopt;
}

}  // namespace

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

// ---- Op words --------------------------------------------------------------------------

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
  const std::optional<uint8_t> dtype = words[2].quoted ? std::nullopt : DtypeByName(words[2].text);
  if (!dtype) {
    return absl::InvalidArgumentError(absl::StrCat("unknown dtype ", Shown(words[2].text),
                                                   " (e.g. float32, bfloat16, int64, none, dtype=N)"));
  }
  op.dtype = *dtype;
  size_t i = 3;
  for (; i + 1 < words.size(); ++i) {
    const Word& word = words[i];
    if (word.quoted) return absl::InvalidArgumentError("the quoted region must be the last word");
    // "none" is how a missing reduce op is written elsewhere; on a line it is simply absent.
    if (const std::optional<int32_t> redop = RedOpByName(word.text); redop && *redop != ring::kUnset) {
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

}  // namespace collwatch::analyzer::schedule_internal
