// [search]: the axes of a configuration search, read from the scenario file.
#include <algorithm>
#include <set>

#include "common/input_file.hpp"
#include "common/toml_guard.hpp"
#include "common/toml_reader.hpp"
#include "scenario/scenario_overrides.hpp"
#include "memplan/core/search.hpp"
#include "memplan/core/text.hpp"

namespace memplan {
namespace {

constexpr std::string_view kBatchPrefix = "batch.";

// A TOML value as an option value of `key`.
OptionValue option_value(const toml::node& node, const std::string& key, const std::string& file, const std::string& axis) {
  OptionValue value;
  value.key = key;
  value.value_location = location_of(file, node.source());
  if (node.is_integer()) {
    value.type = OptionValue::Type::integer;
    value.integer = node.as_integer()->get();
  } else if (node.is_floating_point()) {
    value.type = OptionValue::Type::floating;
    value.floating = node.as_floating_point()->get();
  } else if (node.is_boolean()) {
    value.type = OptionValue::Type::boolean;
    value.boolean = node.as_boolean()->get();
  } else if (node.is_string()) {
    value.type = OptionValue::Type::string;
    value.text = node.as_string()->get();
  } else {
    fail_at(value.value_location, "[search.axes] \"" + axis + "\" holds " + std::string(describe_type(node)) +
                                      "; an axis lists integers, numbers, booleans or strings");
  }
  return value;
}

// "plugin.option" split, checked against the scenario's components and the
// options the plugin declares.
void check_option(const SearchAxis& axis, const PluginRegistry& registry, const SourceLocation& where,
                  const char* section) {
  const LoadedPlugin* plugin = nullptr;
  for (const auto& loaded : registry.plugins())
    if (loaded->name == axis.plugin) plugin = loaded.get();
  if (plugin == nullptr) return;  // the estimator says which plugin is missing
  std::vector<std::string> declared;
  for (const memplan_option_spec& spec : plugin->options) {
    if (axis.option == spec.name) return;
    declared.emplace_back(spec.name);
  }
  fail_at(where, std::string(section) + " \"" + axis.key + "\": plugin '" + axis.plugin + "' has no option '" +
                     axis.option + "'" + did_you_mean(axis.option, declared) + " Its options: " +
                     join_alternatives(declared, ", ") + ".");
}

void name_axis(SearchAxis& axis, const Scenario& scenario, const SourceLocation& where, const char* section) {
  const size_t dot = axis.key.rfind('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == axis.key.size())
    fail_at(where, std::string(section) + " \"" + axis.key +
                       "\" names no option; write \"<plugin>.<option>\" (e.g. the size of a [[strategy]]) or "
                       "\"batch.micro_batch\"");
  axis.plugin = axis.key.substr(0, dot);
  axis.option = axis.key.substr(dot + 1);
  if (axis.plugin + "." == kBatchPrefix) {
    if (axis.option != "micro_batch")
      fail_at(where, std::string(section) + " \"" + axis.key +
                         "\": of [batch] only micro_batch is searched (grad_accum follows from [search] global_batch)");
    axis.plugin.clear();
    return;
  }
  std::vector<std::string> uses;
  for (const ComponentSpec& component : scenario.components) {
    if (component.use == axis.plugin) return;
    uses.push_back(component.use);
  }
  fail_at(where, std::string(section) + " \"" + axis.key + "\": the scenario uses no plugin '" + axis.plugin +
                     "'" + did_you_mean(axis.plugin, uses) + " Add its table (e.g. [[strategy]] use = \"" +
                     axis.plugin + "\") so that the search can set its options.");
}

}  // namespace

SearchSpace read_search_space(const std::string& file, const Scenario& scenario, const PluginRegistry& registry,
                              const std::vector<std::string>& overrides) {
  toml::table root;
  try {
    root = parse_toml(read_input_file(file, "scenario file"), file);
  } catch (const toml::parse_error& error) {
    fail_at(location_of(file, error.source()), "invalid TOML: " + std::string(error.description()));
  }
  apply_overrides(root, overrides);
  const toml::node* node = root.get("search");
  if (node == nullptr || !node->is_table())
    throw Error(file + ": error: `memplan search` needs a [search] table with the axes to search (docs/search.md)");
  const toml::table& table = *node->as_table();
  TomlReader reader(table, file, "[search]");
  reader.reject_unknown_keys({"gpus", "global_batch", "objective", "top", "fill", "axes"});
  SearchSpace space;
  space.gpus = reader.positive_integer("gpus").value_or(scenario.hardware.count);
  if (space.gpus <= 0)
    fail_at(reader.table_location(), "[search] needs the job's GPUs: give gpus here or [hardware] count");
  space.global_batch = reader.positive_integer("global_batch").value_or(0);
  if (auto objective = reader.choice("objective", {"time", "memory"}))
    space.objective = *objective == "memory" ? SearchObjective::memory : SearchObjective::time;
  space.top = reader.positive_integer("top").value_or(10);
  const toml::node* axes = table.get("axes");
  if (axes == nullptr || !axes->is_table() || axes->as_table()->empty())
    fail_at(reader.table_location(), "[search] needs [search.axes]: \"<plugin>.<option>\" = [values, ...]");
  std::set<std::string> keys;
  for (const auto& [key, values] : *axes->as_table()) {
    SearchAxis axis;
    axis.key = std::string(key.str());
    axis.location = location_of(file, key.source());
    name_axis(axis, scenario, axis.location, "[search.axes]");
    if (!axis.plugin.empty()) check_option(axis, registry, axis.location, "[search.axes]");
    const toml::array* list = values.as_array();
    if (list == nullptr || list->empty())
      fail_at(axis.location, "[search.axes] \"" + axis.key + "\" must list one value or more, e.g. [1, 2, 4]");
    for (const toml::node& value : *list) {
      axis.values.push_back(option_value(value, axis.option, file, axis.key));
      if (axis.plugin.empty() &&
          (axis.values.back().type != OptionValue::Type::integer || axis.values.back().integer < 1))
        fail_at(axis.values.back().value_location, "[search.axes] \"batch.micro_batch\" lists sequences: integers >= 1");
    }
    if (space.combinations > (uint64_t{1} << 40) / axis.values.size())
      fail_at(axis.location, "[search.axes] spans more than 2^40 combinations; narrow the axes or split them");
    space.combinations *= axis.values.size();
    keys.insert(axis.key);
    space.axes.push_back(std::move(axis));
  }
  // The micro-batch varies fastest: consecutive combinations then share a
  // layout, which the search lays out once (TOML tables hold their keys sorted).
  std::stable_partition(space.axes.begin(), space.axes.end(), [](const SearchAxis& axis) { return !axis.plugin.empty(); });
  if (auto fill = reader.string("fill")) {
    SearchAxis axis;
    axis.key = *fill;
    axis.location = reader.value_location("fill");
    name_axis(axis, scenario, axis.location, "[search] fill");
    if (!axis.plugin.empty()) check_option(axis, registry, axis.location, "[search] fill");
    if (axis.plugin.empty() || keys.count(axis.key))
      fail_at(axis.location, "[search] fill = \"" + axis.key +
                                 "\" must be a plugin's size that is not an axis: the search sets it so that the "
                                 "layout uses every GPU (the size of the strategy that replicates the model)");
    space.fill = std::move(axis);
  }
  return space;
}

}  // namespace memplan
