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

namespace {

// The first letter of each dash-separated part: a name like
// "some-long-name" is "sln". People write parallelisms and other names this way.
std::string initials(std::string_view name) {
  std::string out;
  for (size_t i = 0; i < name.size(); ++i)
    if (i == 0 || name[i - 1] == '-') out += name[i];
  return out;
}

}  // namespace

std::vector<std::string> closest_names(std::string_view word, std::span<const std::string> candidates) {
  // Allow roughly one edit per three characters: catches typos and
  // transpositions without suggesting unrelated short names. A word that is
  // a candidate's initials ranks first, then prefixes, then by distance.
  const size_t limit = std::max<size_t>(2, word.size() / 3);
  std::vector<std::pair<size_t, std::string>> scored;
  for (const std::string& candidate : candidates) {
    const bool acronym = word.size() >= 2 && candidate.find('-') != std::string::npos && initials(candidate) == word;
    const bool prefix = !word.empty() && candidate.starts_with(word);
    const size_t distance = edit_distance(word, candidate);
    if (acronym)
      scored.emplace_back(0, candidate);
    else if (distance <= limit || prefix)
      scored.emplace_back(prefix ? 1 : distance + 1, candidate);
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

size_t utf8_sequence_length(std::string_view text, size_t at) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80) return 1;
  // The second byte's range excludes overlong forms (E0, F0), surrogates
  // (ED) and code points above U+10FFFF (F4): RFC 3629, section 4.
  size_t length = 0;
  unsigned char low = 0x80, high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) low = 0xa0;
    if (lead == 0xed) high = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) low = 0x90;
    if (lead == 0xf4) high = 0x8f;
  } else {
    return 0;
  }
  if (at + length > text.size() || byte(at + 1) < low || byte(at + 1) > high) return 0;
  for (size_t i = 2; i < length; ++i)
    if (byte(at + i) < 0x80 || byte(at + i) > 0xbf) return 0;
  return length;
}

namespace {

// U+0080-U+009F, encoded C2 80 to C2 9F: 8-bit terminal controls (U+009B is CSI).
bool is_c1_control(std::string_view text, size_t at, size_t length) {
  return length == 2 && static_cast<unsigned char>(text[at]) == 0xc2 && static_cast<unsigned char>(text[at + 1]) < 0xa0;
}

std::string json_escape(unsigned code_point) {  // "\u001b"
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "\\u%04x", code_point);
  return buffer;
}

std::string byte_escape(unsigned char byte) {  // "\x1b"
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "\\x%02x", static_cast<unsigned>(byte));
  return buffer;
}

}  // namespace

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size();) {
    const size_t length = utf8_sequence_length(text, i);
    if (length == 0) {
      out += "\\ufffd";
      ++i;
      continue;
    }
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (is_c1_control(text, i, length)) {
      out += json_escape(static_cast<unsigned char>(text[i + 1]));
    } else if (length > 1) {
      out.append(text.substr(i, length));
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      out += json_escape(c);
    } else {
      out.push_back(static_cast<char>(c));
    }
    i += length;
  }
  return out + "\"";
}

std::string terminal_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t length = utf8_sequence_length(text, i);
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const bool control = length == 1 && ((c < 0x20 && c != '\t') || c == 0x7f);
    if (length == 0 || control || is_c1_control(text, i, length)) {
      // One byte at a time: an invalid byte alone, a C1 control's two bytes in turn.
      out += byte_escape(c);
      ++i;
      continue;
    }
    out.append(text.substr(i, length));
    i += length;
  }
  return out;
}

std::string format_gib(double bytes) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buffer;
}

}  // namespace memplan
