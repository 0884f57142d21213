// Small text helpers shared by error messages and reporters.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace memplan {

// Levenshtein distance, for "did you mean" suggestions.
size_t edit_distance(std::string_view a, std::string_view b);

// The candidates closest to `word` (at most three, within a distance that
// scales with the word's length), best first.
std::vector<std::string> closest_names(std::string_view word, std::span<const std::string> candidates);

// "a, b or c"
std::string join_alternatives(std::span<const std::string> words, std::string_view last_separator = " or ");

// ". Did you mean 'x'?", or just "." when nothing is close: it ends a sentence.
std::string did_you_mean(std::string_view word, std::span<const std::string> candidates);

// The length (1 to 4) of the well-formed UTF-8 sequence that starts at
// text[at], or 0 when the bytes there are not one (RFC 3629: no overlong
// form, no surrogate, nothing above U+10FFFF, no truncated sequence).
size_t utf8_sequence_length(std::string_view text, size_t at);

// A JSON string literal (RFC 8259): quoted, with quotes, backslashes and
// control characters (C0, DEL, C1) escaped as \uXXXX, and each byte that is
// not part of well-formed UTF-8 replaced by U+FFFD (written \ufffd), so the
// output is valid UTF-8 whatever bytes a file name holds.
std::string json_string(std::string_view text);

// `text` made safe to print on a terminal, for one line of output: each
// control character (C0 but tab, DEL, C1) and each byte that is not part of
// well-formed UTF-8 is shown as \xNN, so no escape sequence from a scenario
// name or a file name reaches the terminal. Backslashes are left as they are.
std::string terminal_text(std::string_view text);

// Bytes in binary units with the unit spelled out: "12.50 GiB".
std::string format_gib(double bytes);

}  // namespace memplan
