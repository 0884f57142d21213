// The allocator's `step_lengths` option: a run's micro-batch lengths in the
// order it trains on them, whole numbers of tokens separated by commas,
// spaces, tabs or new lines (plugin options are scalars: a TOML list of
// integers reaches the plugin as its comma-separated text, a string as
// written).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace memplan::plugins {

// A run can hold no more steps than this: a longer list is a mistake (a whole
// dataset's token counts where its steps were meant), and the walk over it
// runs at each evaluation of a search.
inline constexpr size_t kMaxListedSteps = 10'000'000;
// No sequence is this long; the bound keeps the digits' sum inside int64.
inline constexpr int64_t kMaxStepTokens = 1'000'000'000;

// Parses `text` into `steps` (cleared first). Returns the empty string, or
// what is wrong and where (the step's position, 1-based, and its text).
inline std::string parse_step_lengths(std::string_view text, std::vector<int64_t>& steps) {
  steps.clear();
  const auto separator = [](char c) { return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  size_t at = 0;
  while (at < text.size()) {
    if (separator(text[at])) {
      ++at;
      continue;
    }
    size_t end = at;
    while (end < text.size() && !separator(text[end])) ++end;
    const std::string_view word = text.substr(at, end - at);
    // At most 24 bytes of the step's text, cut where a UTF-8 character starts.
    size_t shown = std::min<size_t>(word.size(), 24);
    while (shown < word.size() && shown > 0 && (static_cast<unsigned char>(word[shown]) & 0xC0) == 0x80) --shown;
    const std::string where = "step " + std::to_string(steps.size() + 1) + " ('" + std::string(word.substr(0, shown)) +
                              (shown < word.size() ? "...'" : "'") + ")";
    for (const char c : word)
      if (c < '0' || c > '9')
        return where + " is not a whole number of tokens (digits only; steps are separated by commas, spaces or "
                       "new lines)";
    int64_t tokens = 0;
    for (const char c : word) {
      tokens = tokens * 10 + (c - '0');
      if (tokens > kMaxStepTokens)
        return where + " is above " + std::to_string(kMaxStepTokens) + " tokens, longer than any sequence";
    }
    if (tokens < 1) return where + " has no tokens; every step has at least 1";
    if (steps.size() == kMaxListedSteps)
      return "more than " + std::to_string(kMaxListedSteps) +
             " steps: list the micro-batches of the run on one GPU, not the dataset's rows";
    steps.push_back(tokens);
    at = end;
  }
  if (steps.empty()) return "lists no step: give each micro-batch's tokens in order, e.g. [1876, 1414, 1287]";
  return {};
}

}  // namespace memplan::plugins
