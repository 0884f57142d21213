// One component table of a scenario ([precision], [optimizer], [activations],
// [[strategy]]) and its plugin options as located values. Framework profiles
// (framework.hpp) carry the same shapes, located in the profile's file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memplan/core/error.hpp"

namespace memplan {

struct OptionValue {
  enum class Type { integer, floating, boolean, string };
  std::string key;
  Type type = Type::integer;
  int64_t integer = 0;
  double floating = 0;
  bool boolean = false;
  std::string text;
  bool list = false;  // a list of strings, passed to the plugin as its comma-separated text
  SourceLocation key_location;
  SourceLocation value_location;
};

// The value as a scenario would spell it (strings unquoted): what a search row
// and explain's changes print.
std::string option_value_text(const OptionValue& value);

// One component table: [precision], [optimizer], [activations] or one [[strategy]].
struct ComponentSpec {
  int32_t kind = 0;     // MEMPLAN_KIND_*
  std::string section;  // "[optimizer]", "[[strategy]] #2", for messages
  std::string use;      // the plugin's name
  SourceLocation use_location;
  SourceLocation table_location;
  std::vector<OptionValue> options;  // every key but `use`
};

}  // namespace memplan
