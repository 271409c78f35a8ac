// Strings from outside collwatch (paths, job ids, tokens, names in rings and dumps) made
// safe where they go: JSON (valid UTF-8), a terminal (no control sequences), gRPC metadata
// (printable ASCII). One place, so every writer treats them alike. Threading: pure functions.
#ifndef COLLWATCH_FILES_SAFE_TEXT_H_
#define COLLWATCH_FILES_SAFE_TEXT_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "nlohmann/json.hpp"

namespace collwatch {

// The length of the well-formed UTF-8 sequence at text[at] (1 to 4), or 0 when the byte
// there starts none (overlong forms, surrogates and code points past U+10FFFF start none).
size_t Utf8SequenceLength(std::string_view text, size_t at);

// `text` with every byte that starts no well-formed UTF-8 sequence replaced by U+FFFD (what
// JSON and protobuf strings must hold).
std::string ValidUtf8(std::string_view text);

// Whether '\n' and '\t' reach the terminal as they are (a whole report's text) or are
// escaped too (one name: a line break in it could forge a line of output).
enum class LineEnds { kEscape, kKeep };

// `text` for a terminal or a text file: control characters (C0, DEL, C1 such as U+009B,
// a CSI) and bytes that are not UTF-8 shown as \xNN, never written raw; the rest kept.
std::string TerminalText(std::string_view text, LineEnds line_ends = LineEnds::kEscape);

// The JSON text of `json` (indent as nlohmann's dump: -1 one line). Strings that are not
// UTF-8 have their bad bytes replaced by U+FFFD, as JSON requires: it never throws.
std::string SafeJsonText(const nlohmann::json& json, int indent = -1);

// What keeps `value` from being a gRPC metadata value collwatch sends as a token (one
// printable ASCII word: no control character, no whitespace), in words such as "holds a
// line break (byte 4)"; empty when it may be sent.
std::string MetadataValueProblem(std::string_view value);

}  // namespace collwatch

#endif  // COLLWATCH_FILES_SAFE_TEXT_H_
