#include "scenario/scenario_overrides.hpp"

#include <cctype>
#include <string_view>

#include "memplan/core/error.hpp"
#include "common/toml_guard.hpp"

namespace memplan {
namespace {

[[noreturn]] void refuse(const std::string& override_text, const std::string& why) {
  throw Error("--set " + override_text + ": error: " + why);
}

bool bare_key(std::string_view key) {
  if (key.empty()) return false;
  for (char c : key)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

// The value as TOML, parsed as the right-hand side of a one-line document
// whose source is the override itself; a string when it is not TOML.
toml::table parse_value(const std::string& override_text, const std::string& value) {
  const std::string source = "--set " + override_text;
  try {
    return parse_toml("v = " + value, source);
  } catch (const toml::parse_error&) {
  }
  std::string quoted = "v = \"";
  for (char c : value) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) refuse(override_text, "the value holds a control character");
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  try {
    return parse_toml(quoted + "\"", source);
  } catch (const toml::parse_error& error) {
    refuse(override_text, "the value is neither TOML nor a string memplan can read: " + std::string(error.description()));
  }
}

void apply(toml::table& root, const std::string& override_text) {
  const size_t equals = override_text.find('=');
  if (equals == std::string::npos || equals == 0)
    refuse(override_text, "needs the form key.path=value, e.g. --set batch.micro_batch=4");
  const std::string path = override_text.substr(0, equals);
  std::vector<std::string> keys;
  for (size_t start = 0;;) {
    const size_t dot = path.find('.', start);
    keys.push_back(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  toml::table* table = &root;
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    const std::string& key = keys[i];
    if (!bare_key(key)) refuse(override_text, "'" + key + "' is not a key: use letters, digits, '_' and '-'");
    toml::node* node = table->get(key);
    if (node == nullptr) {
      table = table->insert_or_assign(key, toml::table{}).first->second.as_table();
      continue;
    }
    if (toml::table* next = node->as_table()) {
      table = next;
      continue;
    }
    toml::array* array = node->as_array();
    if (array == nullptr || !array->is_array_of_tables())
      refuse(override_text, "'" + key + "' is a value, not a table, so it has no key '" + keys[i + 1] + "'");
    // [[strategy]] #N: the element N, counted from 1.
    const std::string& index_text = keys[++i];
    size_t index = 0;
    for (char c : index_text) {
      if (!std::isdigit(static_cast<unsigned char>(c)) || index > 1'000'000) {
        index = 0;
        break;
      }
      index = index * 10 + static_cast<size_t>(c - '0');
    }
    if (index == 0 || index > array->size())
      refuse(override_text, "'" + key + "' is an array of " + std::to_string(array->size()) +
                                " tables; name one by its number, from 1 to " + std::to_string(array->size()) +
                                " (e.g. " + key + ".1.size=2)");
    if (i + 1 >= keys.size()) refuse(override_text, "name a key inside " + key + "." + index_text);
    table = array->get(index - 1)->as_table();
  }
  const std::string& last = keys.back();
  if (!bare_key(last)) refuse(override_text, "'" + last + "' is not a key: use letters, digits, '_' and '-'");
  toml::table parsed = parse_value(override_text, override_text.substr(equals + 1));
  // Moved in with its source region, so errors point at the override.
  parsed.get("v")->visit([&](auto& value) { table->insert_or_assign(last, std::move(value)); });
}

}  // namespace

void apply_overrides(toml::table& root, const std::vector<std::string>& overrides) {
  for (const std::string& override_text : overrides) apply(root, override_text);
}

}  // namespace memplan
