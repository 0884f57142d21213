// Typed, located reads from toml++ tables: every error names the file,
// line and column of the offending key or value.
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "memplan/core/error.hpp"

namespace memplan {

SourceLocation location_of(const std::string& file, const toml::source_region& region);

class TomlReader {
 public:
  // `section` names the table in messages, e.g. "[model]".
  TomlReader(const toml::table& table, std::string file, std::string section)
      : table_(table), file_(std::move(file)), section_(std::move(section)) {}

  // Rejects keys not in `allowed`, suggesting the closest one.
  void reject_unknown_keys(std::span<const std::string_view> allowed) const;
  void reject_unknown_keys(std::initializer_list<std::string_view> allowed) const {
    reject_unknown_keys(std::span<const std::string_view>(allowed.begin(), allowed.size()));
  }

  std::optional<int64_t> integer(std::string_view key) const;
  std::optional<int64_t> positive_integer(std::string_view key) const;
  std::optional<double> number(std::string_view key) const;  // integer or float
  std::optional<double> positive_number(std::string_view key) const;
  // A GPU memory size in GiB, 1 MiB to 2^20 GiB, as bytes.
  std::optional<uint64_t> memory_gib_bytes(std::string_view key) const;
  std::optional<bool> boolean(std::string_view key) const;
  std::optional<std::string> string(std::string_view key) const;
  // One of `accepted`, or an error listing them.
  std::optional<std::string> choice(std::string_view key, std::initializer_list<std::string_view> accepted) const;

  bool contains(std::string_view key) const { return table_.contains(key); }
  SourceLocation key_location(std::string_view key) const;
  SourceLocation value_location(std::string_view key) const;
  SourceLocation table_location() const { return location_of(file_, table_.source()); }
  const std::string& file() const { return file_; }
  const std::string& section() const { return section_; }
  [[noreturn]] void fail_key(std::string_view key, const std::string& message) const;

 private:
  [[noreturn]] void wrong_type(std::string_view key, std::string_view expected) const;

  const toml::table& table_;
  std::string file_;
  std::string section_;
};

// "an integer", "a string", ... for messages.
std::string_view describe_type(const toml::node& node);

// A day as a TOML local date (2024-10-24) or a string, as "YYYY-MM-DD" text
// (the string unchecked: is_iso_date says whether it is a day); "" for a value
// of another type.
std::string day_text(const toml::node& node);

}  // namespace memplan
