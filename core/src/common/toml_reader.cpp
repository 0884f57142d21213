#include "common/toml_reader.hpp"

#include <cstdio>

#include <cmath>
#include <vector>

#include "memplan/core/text.hpp"

namespace memplan {

SourceLocation location_of(const std::string& file, const toml::source_region& region) {
  // A value set on the command line (--set) carries its own source: the override.
  const std::string& where = region.path && !region.path->empty() ? *region.path : file;
  return SourceLocation{where, static_cast<uint32_t>(region.begin.line), static_cast<uint32_t>(region.begin.column)};
}

std::string day_text(const toml::node& node) {
  if (const auto* date = node.as_date()) {
    char text[16];
    std::snprintf(text, sizeof text, "%04d-%02d-%02d", static_cast<int>(date->get().year),
                  static_cast<int>(date->get().month), static_cast<int>(date->get().day));
    return text;
  }
  return node.is_string() ? node.as_string()->get() : std::string();
}

std::string_view describe_type(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::string: return "a string";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date or time";
  }
}

SourceLocation TomlReader::key_location(std::string_view key) const {
  for (const auto& [k, node] : table_)
    if (k.str() == key) return location_of(file_, k.source());
  return table_location();
}

SourceLocation TomlReader::value_location(std::string_view key) const {
  const toml::node* node = table_.get(key);
  return node != nullptr ? location_of(file_, node->source()) : table_location();
}

void TomlReader::fail_key(std::string_view key, const std::string& message) const {
  fail_at(value_location(key), "in " + section_ + ", '" + std::string(key) + "' " + message);
}

void TomlReader::wrong_type(std::string_view key, std::string_view expected) const {
  fail_key(key, "must be " + std::string(expected) + ", not " + std::string(describe_type(*table_.get(key))));
}

void TomlReader::reject_unknown_keys(std::span<const std::string_view> allowed) const {
  std::vector<std::string> names(allowed.begin(), allowed.end());
  for (const auto& [key, node] : table_) {
    bool known = false;
    for (std::string_view name : allowed) known = known || key.str() == name;
    if (known) continue;
    fail_at(location_of(file_, key.source()), "unknown key '" + std::string(key.str()) + "' in " + section_ +
                                                  did_you_mean(key.str(), names) +
                                                  " Accepted keys: " + join_alternatives(names, ", ") + ".");
  }
}

std::optional<int64_t> TomlReader::integer(std::string_view key) const {
  const toml::node* node = table_.get(key);
  if (node == nullptr) return std::nullopt;
  if (!node->is_integer()) wrong_type(key, "an integer");
  return node->as_integer()->get();
}

std::optional<int64_t> TomlReader::positive_integer(std::string_view key) const {
  std::optional<int64_t> value = integer(key);
  if (value && *value < 1) fail_key(key, "must be a positive integer, got " + std::to_string(*value));
  return value;
}

std::optional<double> TomlReader::number(std::string_view key) const {
  const toml::node* node = table_.get(key);
  if (node == nullptr) return std::nullopt;
  double value = 0;
  if (node->is_integer())
    value = static_cast<double>(node->as_integer()->get());
  else if (node->is_floating_point())
    value = node->as_floating_point()->get();
  else
    wrong_type(key, "a number");
  if (!std::isfinite(value)) fail_key(key, "must be a finite number");
  return value;
}

std::optional<double> TomlReader::positive_number(std::string_view key) const {
  std::optional<double> value = number(key);
  if (value && *value <= 0) fail_key(key, "must be greater than zero");
  return value;
}

std::optional<uint64_t> TomlReader::memory_gib_bytes(std::string_view key) const {
  std::optional<double> gib = positive_number(key);
  if (!gib) return std::nullopt;
  if (*gib < 1.0 / 1024 || *gib > 1024.0 * 1024)
  {
    char value[32];
    std::snprintf(value, sizeof value, "%g", *gib);
    fail_key(key, std::string("must be between 1/1024 GiB (1 MiB) and 1048576 GiB, got ") + value);
  }
  return static_cast<uint64_t>(std::llround(*gib * 1024.0 * 1024.0 * 1024.0));
}

std::optional<bool> TomlReader::boolean(std::string_view key) const {
  const toml::node* node = table_.get(key);
  if (node == nullptr) return std::nullopt;
  if (!node->is_boolean()) wrong_type(key, "a boolean (true or false)");
  return node->as_boolean()->get();
}

std::optional<std::string> TomlReader::string(std::string_view key) const {
  const toml::node* node = table_.get(key);
  if (node == nullptr) return std::nullopt;
  if (!node->is_string()) wrong_type(key, "a string");
  return node->as_string()->get();
}

std::optional<std::string> TomlReader::choice(std::string_view key,
                                              std::initializer_list<std::string_view> accepted) const {
  std::optional<std::string> value = string(key);
  if (!value) return value;
  std::vector<std::string> names;
  for (std::string_view name : accepted) {
    if (*value == name) return value;
    names.emplace_back("\"" + std::string(name) + "\"");
  }
  fail_key(key, "must be " + join_alternatives(names) + ", not \"" + *value + "\"");
}

}  // namespace memplan
