// A string option that lists names, "a, b,c": the one splitting rule the
// plugins share (lora's targets, freeze's trainable parts, quantized's parts
// and modules), and the layer indices such lists name.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace memplan::support {

// The fields between commas, each without surrounding blanks (spaces, tabs).
// Empty fields are kept ("a,,b", a trailing comma), so a caller can refuse
// them or skip them as its option's rule says.
inline std::vector<std::string_view> comma_fields(std::string_view text) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    std::string_view field = text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    while (!field.empty() && (field.front() == ' ' || field.front() == '\t')) field.remove_prefix(1);
    while (!field.empty() && (field.back() == ' ' || field.back() == '\t')) field.remove_suffix(1);
    fields.push_back(field);
    if (comma == std::string_view::npos) return fields;
    start = comma + 1;
  }
}

// A layer index written in such a list ("layers.3", "0-2"): decimal digits only, at most nine; nothing otherwise.
inline std::optional<int64_t> parse_index(std::string_view text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

}  // namespace memplan::support
