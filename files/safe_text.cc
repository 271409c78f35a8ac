// UTF-8 is checked by hand (the rules of RFC 3629: no overlong forms, no surrogates, no
// code point past U+10FFFF) so that the escaping needs no locale. Threading: see safe_text.h.
#include "files/safe_text.h"

#include <cstddef>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace collwatch {
namespace {

void AppendEscaped(std::string_view bytes, std::string* out) {
  for (const char c : bytes) absl::StrAppendFormat(out, "\\x%02x", static_cast<unsigned char>(c));
}

}  // namespace

size_t Utf8SequenceLength(std::string_view text, size_t at) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned char low = 0x80, high = 0xbf;  // the second byte's range
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) low = 0xa0;   // overlong
    if (lead == 0xed) high = 0x9f;  // surrogates
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) low = 0x90;   // overlong
    if (lead == 0xf4) high = 0x8f;  // past U+10FFFF
  } else {
    return 0;
  }
  if (at + length > text.size()) return 0;
  if (byte(at + 1) < low || byte(at + 1) > high) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (byte(at + i) < 0x80 || byte(at + i) > 0xbf) return 0;
  }
  return length;
}

std::string ValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const size_t length = Utf8SequenceLength(text, at);
    if (length == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
      ++at;
    } else {
      out.append(text.substr(at, length));
      at += length;
    }
  }
  return out;
}

std::string TerminalText(std::string_view text, LineEnds line_ends) {
  std::string out;
  out.reserve(text.size());
  size_t at = 0;
  while (at < text.size()) {
    const size_t length = Utf8SequenceLength(text, at);
    const std::string_view sequence = text.substr(at, length == 0 ? 1 : length);
    const auto lead = static_cast<unsigned char>(sequence[0]);
    const bool kept_line_end = line_ends == LineEnds::kKeep && (lead == '\n' || lead == '\t');
    const bool c0_or_del = length == 1 && (lead < 0x20 || lead == 0x7f) && !kept_line_end;
    // U+0080..U+009F, encoded as 0xc2 0x80..0x9f: 8-bit controls, CSI and OSC among them.
    const bool c1 = length == 2 && lead == 0xc2 && static_cast<unsigned char>(sequence[1]) <= 0x9f;
    if (length == 0 || c0_or_del || c1) {
      AppendEscaped(sequence, &out);
    } else {
      out.append(sequence);
    }
    at += sequence.size();
  }
  return out;
}

std::string SafeJsonText(const nlohmann::json& json, int indent) {
  return json.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string MetadataValueProblem(std::string_view value) {
  if (value.empty()) return "is empty";
  const bool only_whitespace = value.find_first_not_of(" \t\n\r\v\f") == std::string_view::npos;
  if (only_whitespace) return "is only whitespace";
  for (size_t i = 0; i < value.size(); ++i) {
    const auto byte = static_cast<unsigned char>(value[i]);
    if (byte == '\n' || byte == '\r') return absl::StrCat("holds a line break (byte ", i + 1, ")");
    if (byte == ' ' || byte == '\t') return absl::StrCat("holds whitespace (byte ", i + 1, ")");
    if (byte < 0x21 || byte > 0x7e) {
      return absl::StrFormat("holds byte 0x%02x (byte %d), not printable ASCII", byte, i + 1);
    }
  }
  return "";
}

}  // namespace collwatch
