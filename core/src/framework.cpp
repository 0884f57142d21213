#include "memplan/core/framework.hpp"

#include <memplan/plugin_abi.h>

#include <filesystem>

#include "component_reader.hpp"
#include "toml_reader.hpp"

namespace memplan {

FrameworkProfile load_framework_profile(const std::string& path) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& error) {
    fail_at(location_of(path, error.source()), "invalid TOML in a framework profile: " +
                                                   std::string(error.description()));
  }
  FrameworkProfile profile;
  profile.file = path;
  profile.name = std::filesystem::path(path).stem().string();
  TomlReader top(root, path, "framework profile '" + profile.name + "'");
  top.reject_unknown_keys({"framework", "defaults", "strategy"});
  const toml::node* header = root.get("framework");
  if (header == nullptr || !header->is_table())
    fail_at(SourceLocation{path, 1, 1}, "a framework profile needs a [framework] table with name and summary");
  TomlReader reader(*header->as_table(), path, "[framework]");
  reader.reject_unknown_keys({"name", "summary", "version", "source", "default"});
  const auto name = reader.string("name");
  if (!name || *name != profile.name)
    fail_at(reader.table_location(), "[framework] name must equal the file name without .toml ('" + profile.name +
                                         "'): a profile is found by its file name");
  profile.summary = reader.string("summary").value_or("");
  if (profile.summary.empty()) reader.fail_key("summary", "must say in one line what the profile models");
  profile.version = reader.string("version").value_or("");
  profile.source = reader.string("source").value_or("");
  profile.is_default = reader.boolean("default").value_or(false);

  if (const toml::node* defaults = root.get("defaults")) {
    if (!defaults->is_table())
      fail_at(location_of(path, defaults->source()), "'defaults' must be tables [defaults.<plugin name>]");
    for (const auto& [plugin, node] : *defaults->as_table()) {
      const std::string plugin_name(plugin.str());
      if (!node.is_table())
        fail_at(location_of(path, node.source()),
                "[defaults." + plugin_name + "] must be a table of that plugin's options");
      const std::string section = "[defaults." + plugin_name + "]";
      if (node.as_table()->contains("use"))
        fail_at(location_of(path, node.as_table()->get("use")->source()),
                "in " + section + ", 'use' is not an option: the table's name is the plugin");
      profile.defaults.emplace_back(plugin_name, read_options(*node.as_table(), path, section));
    }
  }
  if (const toml::node* strategies = root.get("strategy")) {
    if (!strategies->is_array_of_tables())
      fail_at(location_of(path, strategies->source()), "'strategy' must be written as [[strategy]] tables");
    int index = 0;
    for (const toml::node& entry : *strategies->as_array())
      profile.strategies.push_back(read_component(*entry.as_table(), MEMPLAN_KIND_STRATEGY, path,
                                                  "[[strategy]] #" + std::to_string(++index) + " of framework '" +
                                                      profile.name + "'"));
  }
  return profile;
}

}  // namespace memplan
