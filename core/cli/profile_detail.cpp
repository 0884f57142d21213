#include "profile_detail.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <memplan/plugin_abi.h>

#include "terminal_output.hpp"

namespace memplan::cli {
namespace {

using OptionTables = std::vector<std::pair<std::string, std::vector<OptionValue>>>;

// Profile texts come from files (bundles' too): printed with control characters escaped.
void print_line(const std::string& line) { cli::print_line(std::cout, line); }

std::string join(const std::vector<std::string>& words, const std::string& separator) {
  std::string text;
  for (const std::string& word : words) text += (text.empty() ? "" : separator) + word;
  return text;
}

// Values are written as the profile file writes them, so that a line can be
// copied into a scenario's table to override it.
std::string quoted(const std::string& text) {
  std::string literal = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') literal += '\\';
    literal += c;
  }
  return literal + "\"";
}

std::string quoted_list(const std::vector<std::string>& words) {
  std::vector<std::string> literals;
  for (const std::string& word : words) literals.push_back(quoted(word));
  // Appended, not "[" + ...: GCC 12 warns falsely (-Wrestrict) on a literal plus a temporary string.
  std::string list = "[";
  list += join(literals, ", ");
  return list + "]";
}

std::string number_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

std::string toml_value(const OptionValue& value) {
  if (value.type == OptionValue::Type::floating) {
    // %g drops the point of a whole number, which TOML would read as an integer.
    const std::string text = option_value_text(value);
    return text.find_first_of(".eni") == std::string::npos ? text + ".0" : text;
  }
  if (value.type != OptionValue::Type::string) return option_value_text(value);
  if (!value.list) return quoted(value.text);
  // A list of strings is held as its comma-separated text (OptionValue::list).
  std::vector<std::string> words;
  for (size_t start = 0; !value.text.empty() && start <= value.text.size();) {
    const size_t comma = std::min(value.text.find(',', start), value.text.size());
    words.push_back(value.text.substr(start, comma - start));
    start = comma + 1;
  }
  return quoted_list(words);
}

bool before(const SourceLocation& a, const SourceLocation& b) {
  return std::tie(a.file, a.line, a.column) < std::tie(b.file, b.line, b.column);
}

// toml++ hands a table's keys over sorted by name; the file's order is the
// one its author grouped and explained them in.
std::vector<OptionValue> in_file_order(std::vector<OptionValue> options) {
  std::stable_sort(options.begin(), options.end(),
                   [](const OptionValue& a, const OptionValue& b) { return before(a.key_location, b.key_location); });
  return options;
}

OptionTables in_file_order(OptionTables tables) {
  for (auto& table : tables) table.second = in_file_order(std::move(table.second));
  std::stable_sort(tables.begin(), tables.end(), [](const auto& a, const auto& b) {
    if (a.second.empty() || b.second.empty()) return !a.second.empty() && b.second.empty();
    return before(a.second.front().key_location, b.second.front().key_location);
  });
  return tables;
}

void print_defaults(const std::string& prefix, const OptionTables& tables, const std::string& indent) {
  for (const auto& [plugin, options] : in_file_order(tables)) {
    print_line(indent + "[" + prefix + "." + plugin + "]");
    for (const OptionValue& option : options) print_line(indent + "  " + option.key + " = " + toml_value(option));
  }
}

// A reading is held as the option "<option>=<generic value>" whose text is the
// framework's value (FrameworkReadings); shown as the file writes it:
// <option> = { <generic value> = "<the framework's value>", ... }.
void print_readings(const std::string& prefix, const FrameworkReadings& readings, const std::string& indent) {
  for (const auto& [plugin, values] : in_file_order(readings)) {
    print_line(indent + "[" + prefix + "." + plugin + "]");
    std::vector<std::pair<std::string, std::string>> options;  // option, its "generic = value" entries
    for (const OptionValue& value : values) {
      const size_t equals = value.key.find('=');
      const std::string option = value.key.substr(0, equals);
      const std::string entry = value.key.substr(equals + 1) + " = " + quoted(value.text);
      auto same = std::find_if(options.begin(), options.end(), [&](const auto& seen) { return seen.first == option; });
      if (same == options.end()) options.emplace_back(option, entry);
      else same->second += ", " + entry;
    }
    for (const auto& [option, entries] : options) print_line(indent + "  " + option + " = { " + entries + " }");
  }
}

// Which scenarios without [framework] get this profile, as the catalog decides it.
std::string default_for(const FrameworkProfile& profile, const Catalog& catalog) {
  std::vector<std::string> modes;
  if (catalog.default_framework(MEMPLAN_MODE_TRAIN) == &profile) modes.push_back("\"train\"");
  if (catalog.default_framework(MEMPLAN_MODE_INFER) == &profile) modes.push_back("\"infer\"");
  if (modes.empty()) return "none";
  return "scenarios of mode " + join(modes, " and ") + " without a [framework] table";
}

std::vector<std::string> alias_names(const FrameworkProfile& profile, bool shares_versions) {
  std::vector<std::string> names;
  for (const FrameworkProfile::Alias& alias : profile.aliases)
    if (alias.shares_versions == shares_versions) names.push_back(alias.name);
  return names;
}

// A block's GPU conditions, as the file writes them; "" when it holds on any GPU.
std::string gpu_conditions(const FrameworkVersionDefaults& block) {
  std::vector<std::string> conditions;
  if (block.gpu_memory_gib_at_least > 0)
    conditions.push_back("gpu_memory_gib_at_least = " + number_text(block.gpu_memory_gib_at_least));
  if (!block.gpu_name_contains.empty())
    conditions.push_back("gpu_name_contains = " + quoted_list(block.gpu_name_contains));
  if (!block.gpu_name_excludes.empty())
    conditions.push_back("gpu_name_excludes = " + quoted_list(block.gpu_name_excludes));
  if (block.gpu_compute_capability_at_least > 0)
    conditions.push_back("gpu_compute_capability_at_least = " + number_text(block.gpu_compute_capability_at_least));
  if (block.gpu_compute_capability_below > 0)
    conditions.push_back("gpu_compute_capability_below = " + number_text(block.gpu_compute_capability_below));
  return join(conditions, ", ");
}

void print_strategies(const FrameworkProfile& profile) {
  if (profile.strategies.empty()) {
    print_line("strategies: none");
    return;
  }
  print_line("strategies (runtime components it adds, unless the scenario has a [[strategy]] of the same use or "
             "[framework] exclude names it):");
  for (const ComponentSpec& strategy : profile.strategies) {
    std::vector<std::string> options;
    for (const OptionValue& option : in_file_order(strategy.options))
      options.push_back(option.key + " = " + toml_value(option));
    print_line("  " + strategy.use + (options.empty() ? "" : ": " + join(options, ", ")));
  }
}

void print_since(const FrameworkProfile& profile) {
  if (profile.since.empty()) {
    print_line("since: none");
    return;
  }
  print_line("since (dated blocks in file order; a scenario gets a block's defaults when its [framework] version or "
             "date is at or after the block's, or when it names neither):");
  for (const FrameworkVersionDefaults& block : profile.since) {
    // Version "0" blocks are a base profile's, resolved into this one (inherit_profile): they hold at every version.
    if (block.version == "0") print_line("  version 0 (every version)");
    else print_line("  version " + block.version + (block.released.empty() ? "" : ", released " + block.released));
    if (!block.note.empty()) print_line("    note: " + block.note);
    if (const std::string conditions = gpu_conditions(block); !conditions.empty())
      print_line("    only on GPUs where: " + conditions);
    if (!block.with_strategy.empty())
      print_line("    only in scenarios with one of the strategies: with_strategy = " + quoted_list(block.with_strategy));
    print_defaults("since.defaults", block.defaults, "    ");
    print_readings("since.readings", block.readings, "    ");
  }
}

}  // namespace

void print_framework_profile(const FrameworkProfile& profile, const Catalog& catalog) {
  print_line("framework " + profile.name + " " + profile.version);
  print_line("file: " + profile.file);
  print_line("from: " + (profile.origin.empty() ? std::string("built-in") : profile.origin));
  print_line("summary: " + profile.summary);
  if (!profile.source.empty()) print_line("source: " + profile.source);
  const std::vector<std::string> aliases = alias_names(profile, true), built_on_it = alias_names(profile, false);
  print_line("aliases: " + (aliases.empty() ? std::string("none") : join(aliases, ", ")));
  if (!built_on_it.empty())
    print_line("built on it (software with version numbers of its own): " + join(built_on_it, ", "));
  print_line("default for: " + default_for(profile, catalog));
  if (!profile.extends.empty())
    print_line("extends: " + profile.extends + " " +
               (profile.extends_version.empty() ? std::string("(its latest)") : profile.extends_version) +
               ": its defaults are shown below, and its [[since]] blocks up to that version as version 0 blocks");
  print_line(std::string("gpu capacity: ") +
             (profile.nominal_capacity.value_or(false) ? "nominal (the catalog's memory_gib)"
                                                       : "cuda-total (what CUDA reports: the catalog's cuda_total_gib)"));
  if (profile.defaults.empty()) {
    print_line("defaults: none");
  } else {
    print_line("defaults (applied when the scenario uses that plugin and does not set the option):");
    print_defaults("defaults", profile.defaults, "  ");
  }
  if (!profile.readings.empty()) {
    print_line("readings (a generic option value, and the value this framework computes in its place):");
    print_readings("readings", profile.readings, "  ");
  }
  print_strategies(profile);
  print_since(profile);
}

}  // namespace memplan::cli
