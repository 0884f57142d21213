#include "memplan/core/text.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace memplan {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      size_t substitution = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitution});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::vector<std::string> closest_names(std::string_view word, std::span<const std::string> candidates) {
  // Allow roughly one edit per three characters: catches typos and
  // transpositions without suggesting unrelated short names.
  const size_t limit = std::max<size_t>(2, word.size() / 3);
  std::vector<std::pair<size_t, std::string>> scored;
  for (const std::string& candidate : candidates) {
    size_t distance = edit_distance(word, candidate);
    bool prefix = !word.empty() && candidate.starts_with(word);
    if (distance <= limit || prefix) scored.emplace_back(prefix ? 0 : distance, candidate);
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> best;
  for (size_t i = 0; i < scored.size() && i < 3; ++i) best.push_back(scored[i].second);
  return best;
}

std::string join_alternatives(std::span<const std::string> words, std::string_view last_separator) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += (i + 1 == words.size()) ? std::string(last_separator) : std::string(", ");
    out += words[i];
  }
  return out;
}

std::string did_you_mean(std::string_view word, std::span<const std::string> candidates) {
  std::vector<std::string> best = closest_names(word, candidates);
  if (best.empty()) return ".";
  for (std::string& name : best) name = "'" + name + "'";
  return ". Did you mean " + join_alternatives(best) + "?";
}

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(c));
          out += buffer;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string format_gib(double bytes) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buffer;
}

}  // namespace memplan
