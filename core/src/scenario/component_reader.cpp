#include "scenario/component_reader.hpp"

#include <memplan/plugin_abi.h>

#include <cmath>
#include <cstdio>

#include "memplan/core/scenario.hpp"

namespace memplan {

std::vector<OptionValue> read_options(const toml::table& table, const std::string& file,
                                      const std::string& section) {
  std::vector<OptionValue> options;
  for (const auto& [key, node] : table) {
    if (key.str() == "use") continue;
    OptionValue option;
    option.key = std::string(key.str());
    option.key_location = location_of(file, key.source());
    option.value_location = location_of(file, node.source());
    if (node.is_integer()) {
      option.type = OptionValue::Type::integer;
      option.integer = node.as_integer()->get();
    } else if (node.is_floating_point()) {
      option.type = OptionValue::Type::floating;
      option.floating = node.as_floating_point()->get();
      if (!std::isfinite(option.floating))
        fail_at(option.value_location, "in " + section + ", '" + option.key + "' must be a finite number");
    } else if (node.is_boolean()) {
      option.type = OptionValue::Type::boolean;
      option.boolean = node.as_boolean()->get();
    } else if (node.is_string()) {
      option.type = OptionValue::Type::string;
      option.text = node.as_string()->get();
    } else if (const toml::array* list = node.as_array();
               list != nullptr && !list->empty() &&
               (list->is_homogeneous(toml::node_type::string) || list->is_homogeneous(toml::node_type::integer))) {
      // The option ABI has no list type: a list of strings or of integers
      // reaches a string option as its comma-separated text (targets =
      // ["q", "v"] is "q,v"; step_lengths = [1876, 1414] is "1876,1414").
      option.type = OptionValue::Type::string;
      option.list = true;
      for (const toml::node& element : *list) {
        std::string text;
        if (const auto* integer = element.as_integer()) {
          text = std::to_string(integer->get());
        } else {
          text = element.as_string()->get();
          if (text.find(',') != std::string::npos)
            fail_at(location_of(file, element.source()), "in " + section + ", an element of '" + option.key +
                                                             "' holds a comma; list each entry separately");
        }
        option.text += (option.text.empty() ? "" : ",") + text;
      }
    } else {
      fail_at(option.value_location, "in " + section + ", '" + option.key + "' is " +
                                         std::string(describe_type(node)) +
                                         "; a plugin option is an integer, a float, a boolean, a string, or a list "
                                         "of strings or of integers (for example [\"q\", \"v\"] or [512, 1024])");
    }
    options.push_back(std::move(option));
  }
  return options;
}

ComponentSpec read_component(const toml::table& table, int32_t kind, const std::string& file,
                             const std::string& section) {
  TomlReader reader(table, file, section);
  ComponentSpec component;
  component.kind = kind;
  component.section = section;
  component.table_location = reader.table_location();
  auto use = reader.string("use");
  if (!use)
    fail_at(component.table_location,
            section + " needs 'use = \"<plugin name>\"'; `memplan plugins` lists the " +
                std::string(kind_name(kind)) + " plugins");
  component.use = *use;
  component.use_location = reader.value_location("use");
  component.options = read_options(table, file, section);
  return component;
}

void read_strategies(const toml::table& root, const std::string& file, const std::string& suffix,
                     std::vector<ComponentSpec>& out) {
  const toml::node* node = root.get("strategy");
  if (node == nullptr) return;
  if (!node->is_array_of_tables())
    fail_at(location_of(file, node->source()), "'strategy' must be written as [[strategy]] tables");
  int index = 0;
  for (const toml::node& entry : *node->as_array())
    out.push_back(read_component(*entry.as_table(), MEMPLAN_KIND_STRATEGY, file,
                                 "[[strategy]] #" + std::to_string(++index) + suffix));
}

std::string option_value_text(const OptionValue& value) {
  switch (value.type) {
    case OptionValue::Type::integer: return std::to_string(value.integer);
    case OptionValue::Type::floating: {
      char buffer[32];
      std::snprintf(buffer, sizeof buffer, "%g", value.floating);
      return buffer;
    }
    case OptionValue::Type::boolean: return value.boolean ? "true" : "false";
    case OptionValue::Type::string: return value.text;
  }
  return "";
}

}  // namespace memplan
