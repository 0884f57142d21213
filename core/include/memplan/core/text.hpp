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

// A JSON string literal: quoted, with quotes, backslashes and control characters escaped.
std::string json_string(std::string_view text);

// Bytes in binary units with the unit spelled out: "12.50 GiB".
std::string format_gib(double bytes);

}  // namespace memplan
