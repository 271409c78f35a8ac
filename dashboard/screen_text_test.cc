// The one word wrap of the dashboard: widths kept, words never cut (but a word wider than a
// whole line), a line that fits left alone, continuations under their hang or label.
#include "dashboard/screen_text.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_join.h"

namespace collwatch::dashboard {
namespace {

std::vector<std::string> Texts(const std::vector<Line>& lines) {
  std::vector<std::string> texts;
  for (const Line& line : lines) texts.push_back(LineText(line));
  return texts;
}

TEST(ScreenTextTest, WordsWrapWithinTheWidthAndAreNeverCut) {
  const std::string text = "diverged: class 2/2 at seq 11: reduce-scatter 64.0 MiB (16777216 x bfloat16) in bwd/experts.3";
  const std::vector<std::string> lines = WrapWords(text, 30, 40);
  ASSERT_GE(lines.size(), 3u);
  EXPECT_LE(Columns(lines[0]), 30u) << lines[0];
  for (size_t i = 1; i < lines.size(); ++i) EXPECT_LE(Columns(lines[i]), 40u) << lines[i];
  EXPECT_EQ(absl::StrJoin(lines, " "), text) << "every word, in order, none cut";
}

TEST(ScreenTextTest, OnlyAWordWiderThanAWholeLineIsBroken) {
  EXPECT_EQ(WrapWords("a /very/long/path/to/a/file.py b", 10, 10),
            (std::vector<std::string>{"a", "/very/long", "/path/to/a", "/file.py b"}));
  // Too wide for a narrow first line but not for the next: it starts there, whole.
  EXPECT_EQ(WrapWords("reduce-scatter sum", 8, 20), (std::vector<std::string>{"", "reduce-scatter sum"}));
  // Code points, not bytes: "█" is one column.
  EXPECT_EQ(WrapWords("██ ██", 2, 2), (std::vector<std::string>{"██", "██"}));
}

TEST(ScreenTextTest, UnitsKeepTheirSeparatorAndAreBrokenAtTheirWordsOnlyWhenWiderThanALine) {
  EXPECT_EQ(WrapUnits({"<- -> communicator", "up/down finding", "q quit"}, "  ", 40, 40),
            (std::vector<std::string>{"<- -> communicator  up/down finding", "q quit"}));
  EXPECT_EQ(WrapUnits({"4 ranks in 2 processes on 1 node", "0.0 coll/s"}, "  ", 20, 20),
            (std::vector<std::string>{"4 ranks in 2", "processes on 1 node", "0.0 coll/s"}));
}

TEST(ScreenTextTest, ALineThatFitsStaysAsItIsAndALongOneContinuesUnderItsHang) {
  const Line fits{{" 0   ", Style::kNormal}, {"healthy: running", Style::kHealthy}};
  EXPECT_EQ(Texts(WrapLine(fits, 40, 5)), (std::vector<std::string>{" 0   healthy: running"}));
  const std::vector<Line> wrapped =
      WrapLine({{" 0   ", Style::kNormal}, {"diverged: class 1/2 at seq 1: issued it in fwd/vision.patch", Style::kDiverged}},
               40, 5);
  ASSERT_EQ(wrapped.size(), 2u);
  EXPECT_EQ(LineText(wrapped[0]), " 0   diverged: class 1/2 at seq 1:");
  EXPECT_EQ(LineText(wrapped[1]), "     issued it in fwd/vision.patch");
  EXPECT_EQ(wrapped[1].back().style, Style::kDiverged) << "the words keep their style";
  // No room after the first spans: every word goes below.
  const std::vector<Line> below =
      WrapLine({{std::string(35, '.'), Style::kNormal}, {"diverged: class 1/2 at seq 1", Style::kDiverged}}, 40, 3);
  ASSERT_EQ(below.size(), 2u);
  EXPECT_EQ(LineText(below[1]), "   diverged: class 1/2 at seq 1");
}

TEST(ScreenTextTest, ReportLinesKeepTheirLabelColumnAndProseItsIndent) {
  const std::vector<std::string> labelled =
      Texts(WrapIndented("  ranks 0,2              issued it in fwd/vision.patch and then 5 more", Style::kNormal, 60));
  ASSERT_EQ(labelled.size(), 2u);
  EXPECT_EQ(labelled[0], "  ranks 0,2              issued it in fwd/vision.patch and");
  EXPECT_EQ(labelled[1], "                         then 5 more");
  const std::vector<std::string> prose = Texts(
      WrapIndented("  From seq 1 of comm dfeb3ba4, ranks 0,2 issued all-gather where ranks 1,3 issued", Style::kNormal, 40));
  ASSERT_EQ(prose.size(), 3u);
  for (const std::string& line : prose) {
    EXPECT_EQ(line.substr(0, 2), "  ") << line;
    EXPECT_LE(line.size(), 40u) << line;
  }
}

}  // namespace
}  // namespace collwatch::dashboard
