// The words of a schedule line, shared by the op parser (schedule.h) and the baseline
// parser (baseline.h): the tokenizer, numbers, the dtype and reduce-op words, an op read
// from its words, and text quoted for error messages. Internal to the schedule files.
// Threading: pure functions.
#ifndef COLLWATCH_ANALYZER_SCHEDULE_WORDS_H_
#define COLLWATCH_ANALYZER_SCHEDULE_WORDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "analyzer/schedule.h"

namespace collwatch::analyzer::schedule_internal {

// A word of a line: quoted words keep their spaces and come unescaped.
struct Word {
  std::string text;
  bool quoted = false;
};

// This abseil's StrCat takes its own string_view only.
inline absl::string_view Av(std::string_view text) { return absl::string_view(text.data(), text.size()); }

// Text of a word fit for an error message: escaped, cut at 40 bytes.
std::string Shown(std::string_view text);

// Splits a line into words. '#' outside quotes starts a comment; inside "..." the
// escapes \" \\ \n \t \r \xHH are understood.
absl::StatusOr<std::vector<Word>> SplitWords(std::string_view line);

// A decimal number without sign, spaces or leading '+'; nullopt past `max`.
std::optional<uint64_t> ParseNumber(std::string_view text, uint64_t max);

// The op a line's words describe (FormatScheduleOp's inverse on split words).
absl::StatusOr<ScheduleOp> OpFromWords(const std::vector<Word>& words);

}  // namespace collwatch::analyzer::schedule_internal

#endif  // COLLWATCH_ANALYZER_SCHEDULE_WORDS_H_
