// Columns, clipping and the word wrap. Threading: see screen_text.h.
#include "dashboard/screen_text.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace collwatch::dashboard {
namespace {

// Fewer columns than this left after a line's first spans, and its words all go below.
constexpr int kMinFirstColumns = 12;
// A continuation keeps at least this many columns for its words, whatever the hang asks.
constexpr int kMinRestColumns = 20;

// Bytes of the first `columns` code points of `text`.
size_t BytesOfColumns(std::string_view text, size_t columns) {
  size_t bytes = 0;
  for (size_t taken = 0; bytes < text.size() && taken < columns; ++taken) {
    ++bytes;
    while (bytes < text.size() && (static_cast<unsigned char>(text[bytes]) & 0xC0) == 0x80) ++bytes;
  }
  return bytes;
}

}  // namespace

size_t Columns(std::string_view text) {
  size_t columns = 0;
  for (char c : text) columns += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  return columns;
}

std::string Pad(std::string text, size_t width) {
  const size_t columns = Columns(text);
  if (columns < width) text.append(width - columns, ' ');
  return text;
}

void Clip(Line* line, size_t width) {
  size_t used = 0;
  for (size_t i = 0; i < line->size(); ++i) {
    std::string& text = (*line)[i].text;
    const size_t columns = Columns(text);
    if (used + columns <= width) {
      used += columns;
      continue;
    }
    text.resize(BytesOfColumns(text, width - used));
    line->resize(i + 1);
    return;
  }
}

Line Rule(const std::string& text, int width, const std::string& dash) {
  std::string bar = absl::StrCat(dash, dash, " ", text, " ");
  while (Columns(bar) < static_cast<size_t>(width)) bar += dash;
  return {{bar, Style::kTitle}};
}

std::vector<std::string> WrapUnits(const std::vector<std::string>& units, std::string_view separator, int first_width,
                                   int rest_width) {
  std::vector<std::string> lines;
  // No room on the first line: it stays empty and every unit goes below.
  if (first_width <= 0) lines.emplace_back();
  const size_t rest = static_cast<size_t>(std::max(rest_width, 1));
  const auto limit = [&] { return lines.empty() ? static_cast<size_t>(first_width) : rest; };
  const size_t separator_columns = Columns(separator);
  std::string current;
  size_t current_columns = 0;
  for (std::string_view unit : units) {
    size_t columns = Columns(unit);
    if (columns == 0) continue;
    if (!current.empty() && current_columns + separator_columns + columns > limit()) {
      lines.push_back(std::move(current));
      current.clear();
      current_columns = 0;
    }
    if (!current.empty()) {
      current.append(separator).append(unit);
      current_columns += separator_columns + columns;
      continue;
    }
    // A unit of words wider than a whole line: its own words wrapped, from this line on.
    if (columns > rest && unit.find(' ') != std::string_view::npos) {
      std::vector<std::string> pieces = WrapWords(unit, static_cast<int>(limit()), static_cast<int>(rest));
      current = std::move(pieces.back());
      current_columns = Columns(current);
      pieces.pop_back();
      for (std::string& piece : pieces) lines.push_back(std::move(piece));
      continue;
    }
    // A unit too wide for the first line that fits the next ones starts there, whole.
    if (lines.empty() && columns > limit() && columns <= rest) lines.emplace_back();
    // Only a unit wider than a whole line is broken, where the line ends.
    while (columns > limit()) {
      const size_t bytes = BytesOfColumns(unit, limit());
      lines.emplace_back(unit.substr(0, bytes));
      unit.remove_prefix(bytes);
      columns = Columns(unit);
    }
    current = std::string(unit);
    current_columns = columns;
  }
  if (!current.empty()) lines.push_back(std::move(current));
  return lines;
}

std::vector<std::string> WrapWords(std::string_view text, int first_width, int rest_width) {
  const std::vector<std::string> words = absl::StrSplit(absl::string_view(text.data(), text.size()), ' ', absl::SkipEmpty());
  return WrapUnits(words, " ", first_width, rest_width);
}

std::vector<Line> WrapLine(Line line, int width, int hang) {
  size_t columns = 0;
  for (const Span& span : line) columns += Columns(span.text);
  if (line.empty() || columns <= static_cast<size_t>(std::max(width, 0))) return {std::move(line)};
  Span words = std::move(line.back());
  line.pop_back();
  const size_t lead = std::min(words.text.find_first_not_of(' '), words.text.size());
  if (lead > 0) line.push_back({words.text.substr(0, lead), Style::kNormal});
  words.text.erase(0, lead);
  size_t before = 0;
  for (const Span& span : line) before += Columns(span.text);
  const int first = width - static_cast<int>(before) >= kMinFirstColumns ? width - static_cast<int>(before) : 0;
  hang = std::clamp(hang, 0, std::max(0, width - kMinRestColumns));
  const std::vector<std::string> pieces = WrapWords(words.text, first, width - hang);
  std::vector<Line> lines;
  lines.push_back(std::move(line));
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].empty()) continue;  // the first line kept no room for words
    if (i == 0) {
      lines.front().push_back({pieces[i], words.style});
    } else {
      lines.push_back({{std::string(static_cast<size_t>(hang), ' '), Style::kNormal}, {pieces[i], words.style}});
    }
  }
  return lines;
}

std::vector<Line> WrapIndented(const std::string& text, Style style, int width) {
  const size_t indent = std::min(text.find_first_not_of(' '), text.size());
  // A label column: a run of two spaces or more after the line's first words, with the
  // value after it within the screen's first half.
  if (const size_t gap = text.find("  ", indent); gap != std::string::npos && indent < text.size()) {
    const size_t value = text.find_first_not_of(' ', gap);
    const size_t label_columns = value == std::string::npos ? 0 : Columns(std::string_view(text).substr(0, value));
    if (value != std::string::npos && label_columns <= static_cast<size_t>(std::max(width, 0)) / 2) {
      return WrapLine({{text.substr(0, value), style}, {text.substr(value), style}}, width,
                      static_cast<int>(label_columns));
    }
  }
  // Prose: it continues under its own indent (a line without one, two columns in).
  return WrapLine({{text, style}}, width, indent == 0 ? 2 : static_cast<int>(Columns(text.substr(0, indent))));
}

}  // namespace collwatch::dashboard
