// Text on the dashboard's screen: columns, padding, clipping and the one word wrap every
// view uses (a rank's state, a finding's headline, the connection's story, report.txt's
// prose), so a line too wide for the terminal continues below instead of being cut.
// Threading: pure functions.
#ifndef COLLWATCH_DASHBOARD_SCREEN_TEXT_H_
#define COLLWATCH_DASHBOARD_SCREEN_TEXT_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "dashboard/dashboard_model.h"

namespace collwatch::dashboard {

// Columns `text` takes: one per UTF-8 code point (every glyph we draw is one column wide).
size_t Columns(std::string_view text);

// `text` with spaces after it up to `width` columns.
std::string Pad(std::string text, size_t width);

// Cuts `line` to `width` columns (whole code points). Only for what has no words to wrap
// (a strip, a rule); text goes through WrapLine first.
void Clip(Line* line, size_t width);

// The one wrap: `units` (words, or key hints) in order, joined by `separator`, into lines
// of at most `first_width` columns for the first and `rest_width` for the others. A unit
// is never cut, except one wider than a whole line, which is broken where the line ends.
std::vector<std::string> WrapUnits(const std::vector<std::string>& units, std::string_view separator, int first_width,
                                   int rest_width);

// The words of `text` (split at spaces; runs of spaces count as one), wrapped by WrapUnits.
std::vector<std::string> WrapWords(std::string_view text, int first_width, int rest_width);

// `line` unchanged when it fits `width`; else its last span's words wrapped once (styles
// kept): the first piece after the other spans, the others below after `hang` columns of
// spaces. The last span's leading spaces stay with the spans before it. When too little
// room is left after those spans for a word or two, every word goes below.
std::vector<Line> WrapLine(Line line, int width, int hang);

// A line of plain text (report.txt's), wrapped by WrapLine: its indent and a label column
// ("  ranks 0,2              issued it in ...") stay as they are, and the rest continues
// under the text after the label; prose without a label continues under its own indent.
std::vector<Line> WrapIndented(const std::string& text, Style style, int width);

// A title bar: "── text ──────" to the full width (`dash`: the rule's glyph).
Line Rule(const std::string& text, int width, const std::string& dash);

}  // namespace collwatch::dashboard

#endif  // COLLWATCH_DASHBOARD_SCREEN_TEXT_H_
