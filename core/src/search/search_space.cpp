// [search]: the axes of a configuration search, read from the scenario file.
#include <algorithm>
#include <cstdio>
#include <map>
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
constexpr std::string_view kHardwarePrefix = "hardware.";

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
    axis.target = SearchAxis::Target::micro_batch;
    return;
  }
  if (axis.plugin + "." == kHardwarePrefix) {
    if (axis.option != "gpu" && axis.option != "count")
      fail_at(where, std::string(section) + " \"" + axis.key +
                         "\": of [hardware] only gpu and count are searched (--set changes the other keys for a "
                         "whole search)");
    axis.target = axis.option == "gpu" ? SearchAxis::Target::hardware_gpu : SearchAxis::Target::hardware_count;
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

// A hardware axis's values: catalog GPU names, or GPU counts >= 1.
void check_hardware_axis(const SearchAxis& axis, const Scenario& scenario, const Catalog* catalog) {
  if (catalog == nullptr)
    fail_at(axis.location, "[search.axes] \"" + axis.key + "\": hardware axes need the GPU catalog (read_search_space "
                           "with a Catalog)");
  const std::vector<std::string> names = catalog->gpu_names();
  for (const OptionValue& value : axis.values) {
    if (axis.target == SearchAxis::Target::hardware_count) {
      if (value.type != OptionValue::Type::integer || value.integer < 1)
        fail_at(value.value_location, "[search.axes] \"hardware.count\" lists the job's GPUs: integers >= 1");
      continue;
    }
    if (value.type != OptionValue::Type::string || catalog->find_gpu(value.text) == nullptr)
      fail_at(value.value_location, "[search.axes] \"hardware.gpu\" lists " +
                                        (value.type == OptionValue::Type::string ? "'" + value.text + "', which names "
                                                                                   "no GPU in the catalog"
                                                                                 : std::string("a value that is not a GPU's name")) +
                                        (value.type == OptionValue::Type::string ? did_you_mean(value.text, names)
                                                                                 : std::string(".")) +
                                        " Known GPUs: " + join_alternatives(names, ", ") + ".");
  }
  if (axis.target == SearchAxis::Target::hardware_gpu && scenario.hardware.gpu.empty() &&
      scenario.hardware.memory_bytes > 0)
    fail_at(axis.location, "[search.axes] \"hardware.gpu\": the scenario gives [hardware] memory_gib, which a GPU of "
                           "the catalog would replace; remove memory_gib (or the axis)");
  // A CUDA total is one GPU's reading: every GPU of the axis has its own (the catalog's cuda_total_gib).
  if (axis.target == SearchAxis::Target::hardware_gpu && !scenario.hardware.cuda_total_location.file.empty())
    fail_at(axis.location, "[search.axes] \"hardware.gpu\": the scenario gives [hardware] cuda_total_gib (" +
                               scenario.hardware.cuda_total_location.str() +
                               "), measured on one GPU, which would stand for every GPU of the axis; remove "
                               "cuda_total_gib (or the axis)");
}

// [search.usd_per_gpu_hour]: "<catalog GPU>" = USD, user inputs.
std::vector<std::pair<std::string, double>> read_prices(const toml::table& search, const std::string& file,
                                                        const Catalog* catalog) {
  std::vector<std::pair<std::string, double>> prices;
  const toml::node* node = search.get("usd_per_gpu_hour");
  if (node == nullptr) return prices;
  const SourceLocation where = location_of(file, node->source());
  if (!node->is_table())
    fail_at(where, "[search] usd_per_gpu_hour must be a table of prices per GPU type, e.g. "
                   "[search.usd_per_gpu_hour] \"h100-sxm-80gb\" = 2.5 (USD per GPU-hour, your own prices)");
  if (catalog == nullptr) fail_at(where, "[search.usd_per_gpu_hour] names GPUs: it needs the GPU catalog");
  const std::vector<std::string> names = catalog->gpu_names();
  for (const auto& [key, value] : *node->as_table()) {
    const std::string name(key.str());
    const SourceLocation at = location_of(file, key.source());
    if (catalog->find_gpu(name) == nullptr)
      fail_at(at, "[search.usd_per_gpu_hour] \"" + name + "\" names no GPU in the catalog" + did_you_mean(name, names) +
                      " Known GPUs: " + join_alternatives(names, ", ") + ".");
    double price = 0;
    if (value.is_integer()) price = static_cast<double>(value.as_integer()->get());
    else if (value.is_floating_point()) price = value.as_floating_point()->get();
    else fail_at(at, "[search.usd_per_gpu_hour] \"" + name + "\" must be a number: USD per GPU-hour");
    if (!(price > 0) || price > 1e9) {
      char text[32];
      std::snprintf(text, sizeof text, "%g", price);
      fail_at(location_of(file, value.source()),
              "[search.usd_per_gpu_hour] \"" + name + "\" must be a price in USD per GPU-hour above 0 and at most "
              "1e9, not " + std::string(text));
    }
    prices.emplace_back(name, price);
  }
  return prices;
}

SearchSpace read_space(const std::string& file, const Scenario& scenario, const PluginRegistry& registry,
                       const Catalog* catalog, const std::vector<std::string>& overrides) {
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
  reader.reject_unknown_keys({"gpus", "global_batch", "objective", "top", "fill", "axes", "usd_per_gpu_hour"});
  SearchSpace space;
  space.global_batch = reader.positive_integer("global_batch").value_or(0);
  if (auto objective = reader.choice("objective", {"time", "memory", "cost"}))
    space.objective = *objective == "memory" ? SearchObjective::memory
                      : *objective == "cost" ? SearchObjective::cost
                                             : SearchObjective::time;
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
      if (axis.target == SearchAxis::Target::micro_batch &&
          (axis.values.back().type != OptionValue::Type::integer || axis.values.back().integer < 1))
        fail_at(axis.values.back().value_location, "[search.axes] \"batch.micro_batch\" lists sequences: integers >= 1");
    }
    if (axis.target == SearchAxis::Target::hardware_gpu || axis.target == SearchAxis::Target::hardware_count)
      check_hardware_axis(axis, scenario, catalog);
    if (space.combinations > (uint64_t{1} << 40) / axis.values.size())
      fail_at(axis.location, "[search.axes] spans more than 2^40 combinations; narrow the axes or split them");
    space.combinations *= axis.values.size();
    keys.insert(axis.key);
    space.axes.push_back(std::move(axis));
  }
  // The hardware axes vary slowest (each of their combinations is a scenario
  // of its own, an estimator per thread), the micro-batch fastest:
  // consecutive combinations then share a layout, which the search lays out
  // once (TOML tables hold their keys sorted).
  auto rank = [](const SearchAxis& axis) {
    switch (axis.target) {
      case SearchAxis::Target::hardware_count:
      case SearchAxis::Target::hardware_gpu: return 0;
      case SearchAxis::Target::plugin: return 1;
      case SearchAxis::Target::micro_batch: return 2;
    }
    return 1;
  };
  std::stable_sort(space.axes.begin(), space.axes.end(),
                   [&](const SearchAxis& a, const SearchAxis& b) { return rank(a) < rank(b); });
  const bool count_axis = keys.count("hardware.count") > 0;
  if (count_axis && reader.contains("gpus"))
    reader.fail_key("gpus", "and the axis \"hardware.count\" both give the job's GPUs; keep one of them");
  space.gpus = reader.positive_integer("gpus").value_or(scenario.hardware.count);
  if (space.gpus <= 0 && !count_axis)
    fail_at(reader.table_location(), "[search] needs the job's GPUs: give gpus here, [hardware] count, or an axis "
                                     "\"hardware.count\"");
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

  // Prices: [search.usd_per_gpu_hour] per GPU type, else [budget] usd_per_gpu_hour.
  const std::vector<std::pair<std::string, double>> prices = read_prices(table, file, catalog);
  space.budget_tokens = scenario.budget_tokens;
  std::string unpriced;  // the first GPU the search runs on without a price
  auto price_of = [&](const std::string& gpu) {
    for (const auto& [name, price] : prices)
      if (name == gpu) return price;
    if (scenario.usd_per_gpu_hour > 0) return scenario.usd_per_gpu_hour;
    if (unpriced.empty()) unpriced = gpu.empty() ? std::string("the scenario's GPU") : gpu;
    return 0.0;
  };

  // One scenario per combination of the hardware axes, as --set would make it.
  size_t hardware_axes = 0;
  while (hardware_axes < space.axes.size() && rank(space.axes[hardware_axes]) == 0) ++hardware_axes;
  for (size_t a = hardware_axes; a < space.axes.size(); ++a) space.per_hardware *= space.axes[a].values.size();
  if (hardware_axes == 0) {
    space.usd_per_gpu_hour = price_of(scenario.hardware.gpu);
  } else {
    const uint64_t combinations = space.combinations / space.per_hardware;
    const SearchAxis* count_axis_of = nullptr;  // the world-size rule's message points at the axis
    for (const SearchAxis& axis : space.axes)
      if (axis.target == SearchAxis::Target::hardware_count) count_axis_of = &axis;
    std::map<std::string, Scenario> by_gpu;  // each GPU's scenario, loaded once whatever the counts
    for (uint64_t h = 0; h < combinations; ++h) {
      SearchHardware hardware;
      hardware.gpu = scenario.hardware.gpu;
      hardware.gpus = space.gpus;
      uint64_t rest = h;
      for (size_t a = hardware_axes; a-- > 0;) {
        const SearchAxis& axis = space.axes[a];
        const OptionValue& value = axis.values[rest % axis.values.size()];
        rest /= axis.values.size();
        if (axis.target == SearchAxis::Target::hardware_gpu) hardware.gpu = value.text;
        else hardware.gpus = value.integer;
      }
      if (keys.count("hardware.gpu")) {
        auto loaded = by_gpu.find(hardware.gpu);
        if (loaded == by_gpu.end()) {
          std::vector<std::string> with_gpu = overrides;
          with_gpu.push_back("hardware.gpu=\"" + hardware.gpu + "\"");
          loaded = by_gpu.emplace(hardware.gpu, load_scenario(file, *catalog, with_gpu)).first;
        }
        hardware.scenario = loaded->second;
      } else {
        hardware.scenario = scenario;
      }
      hardware.scenario.hardware.count = hardware.gpus;
      if (count_axis_of != nullptr) hardware.scenario.hardware.count_location = count_axis_of->location;
      hardware.usd_per_gpu_hour = price_of(hardware.gpu);
      space.hardware.push_back(std::move(hardware));
    }
  }
  space.priced = unpriced.empty();
  if (space.objective == SearchObjective::cost && !space.priced) {
    if (unpriced == "the scenario's GPU")
      reader.fail_key("objective", "= \"cost\" needs the price of a GPU-hour, and the scenario's GPU has no name in "
                                   "the catalog ([hardware] memory_gib): add usd_per_gpu_hour to [budget] (with tokens; "
                                   "your own price in USD)");
    reader.fail_key("objective", "= \"cost\" needs the price of a GPU-hour of " + unpriced +
                                     ": add a table [search.usd_per_gpu_hour] with your price per GPU type (\"" +
                                     unpriced + "\" = USD per GPU-hour), or usd_per_gpu_hour to [budget] (with tokens: "
                                     "then the run's cost is ranked)");
  }
  return space;
}

}  // namespace

SearchSpace read_search_space(const std::string& file, const Scenario& scenario, const PluginRegistry& registry,
                              const std::vector<std::string>& overrides) {
  return read_space(file, scenario, registry, nullptr, overrides);
}

SearchSpace read_search_space(const std::string& file, const Scenario& scenario, const PluginRegistry& registry,
                              const Catalog& catalog, const std::vector<std::string>& overrides) {
  return read_space(file, scenario, registry, &catalog, overrides);
}

}  // namespace memplan
