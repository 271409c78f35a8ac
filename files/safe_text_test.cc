// Outside strings made safe: escape sequences and bad UTF-8 never reach a terminal raw,
// JSON is always valid UTF-8, tokens are single printable ASCII words. Threading: one thread.
#include "files/safe_text.h"

#include <string>

#include "gtest/gtest.h"

namespace collwatch {
namespace {

TEST(SafeTextTest, TerminalTextEscapesControlSequencesAndBadUtf8) {
  EXPECT_EQ(TerminalText("fwd/\x1b[2J\x1b]0;pwn\x07"), "fwd/\\x1b[2J\\x1b]0;pwn\\x07");
  EXPECT_EQ(TerminalText(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(TerminalText("del\x7f"), "del\\x7f");
  EXPECT_EQ(TerminalText("csi\xc2\x9b" "2J"), "csi\\xc2\\x9b2J");  // U+009B, an 8-bit CSI
  EXPECT_EQ(TerminalText("o\xff" "2"), "o\\xff2");
  EXPECT_EQ(TerminalText("\xe0\x80\xaf"), "\\xe0\\x80\\xaf");  // an overlong '/'
  EXPECT_EQ(TerminalText("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(TerminalText("cut \xe2\x82"), "cut \\xe2\\x82");
}

TEST(SafeTextTest, TerminalTextKeepsPrintableUtf8AndLineEndsWhenAsked) {
  EXPECT_EQ(TerminalText("Grüße 名前 \xf0\x9f\x98\x80 \xc2\xa0"), "Grüße 名前 \xf0\x9f\x98\x80 \xc2\xa0");
  EXPECT_EQ(TerminalText("a\nb\tc"), "a\\x0ab\\x09c");
  EXPECT_EQ(TerminalText("a\nb\tc\r", LineEnds::kKeep), "a\nb\tc\\x0d");
}

TEST(SafeTextTest, SafeJsonTextReplacesBadUtf8AndNeverThrows) {
  const nlohmann::json json = {{"out", "/tmp/o\xff" "2"}, {"k\xfe", "ok"}};
  std::string text;
  ASSERT_NO_THROW(text = SafeJsonText(json));
  const nlohmann::json parsed = nlohmann::json::parse(text);
  EXPECT_EQ(parsed["out"], "/tmp/o\xef\xbf\xbd" "2");
  EXPECT_EQ(parsed["k\xef\xbf\xbd"], "ok");
  EXPECT_EQ(SafeJsonText({{"a", 1}}, 2), "{\n  \"a\": 1\n}");
}

TEST(SafeTextTest, MetadataValueProblemNamesWhatIsWrong) {
  EXPECT_EQ(MetadataValueProblem("0f3a-token_like.this~"), "");
  EXPECT_EQ(MetadataValueProblem(""), "is empty");
  EXPECT_EQ(MetadataValueProblem("  \t"), "is only whitespace");
  EXPECT_EQ(MetadataValueProblem("abc\ndef"), "holds a line break (byte 4)");
  EXPECT_EQ(MetadataValueProblem("abc def"), "holds whitespace (byte 4)");
  EXPECT_EQ(MetadataValueProblem("ab\x01"), "holds byte 0x01 (byte 3), not printable ASCII");
  EXPECT_EQ(MetadataValueProblem("t\xc3\xa9"), "holds byte 0xc3 (byte 2), not printable ASCII");
}

// One rule of well-formed UTF-8 for every writer (JSON, protobuf strings, terminals).
TEST(SafeTextTest, ValidUtf8ReplacesEachBadByteAndKeepsTheRest) {
  EXPECT_EQ(ValidUtf8("fwd/caf\xc3\xa9"), "fwd/caf\xc3\xa9");
  EXPECT_EQ(ValidUtf8("a\xff" "b"), "a\xef\xbf\xbd" "b");
  EXPECT_EQ(ValidUtf8("\xc0\xaf"), "\xef\xbf\xbd\xef\xbf\xbd") << "an overlong '/' is two bad bytes";
  EXPECT_EQ(ValidUtf8("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd") << "a surrogate";
  EXPECT_EQ(ValidUtf8("\xe2\x82"), "\xef\xbf\xbd\xef\xbf\xbd") << "cut short";
  EXPECT_EQ(Utf8SequenceLength("\xf0\x9f\x98\x80", 0), 4u);
  EXPECT_EQ(Utf8SequenceLength("\xf4\x90\x80\x80", 0), 0u) << "past U+10FFFF";
}

}  // namespace
}  // namespace collwatch
