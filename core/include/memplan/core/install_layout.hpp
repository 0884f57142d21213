// Where memplan finds its built-in plugins and data files: relative to the
// executable, so the build tree (build/bin/memplan) and an installed prefix
// (<prefix>/bin/memplan) both work without any environment variable.
//   <exe dir>/../lib/memplan/plugins   built-in plugin libraries
//   <exe dir>/../share/memplan         gpus.toml, models/*.toml
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "memplan/core/plugin_registry.hpp"
#include "memplan/core/scenario.hpp"

namespace memplan {

struct InstallLayout {
  std::filesystem::path plugin_dir;
  std::filesystem::path data_dir;
};

InstallLayout layout_beside(const std::filesystem::path& executable);
std::filesystem::path current_executable();

// MEMPLAN_PLUGIN_PATH, split at ':' (empty entries skipped).
std::vector<std::string> plugin_path_from_environment();

// Loads plugins in precedence order: built-ins, then MEMPLAN_PLUGIN_PATH, then
// the scenario's [plugins] search_path (a missing scenario folder is an error
// at its file:line:column). Names already taken are refused, so a plugin
// folder can never silently replace a built-in.
void load_plugins(PluginRegistry& registry, const InstallLayout& layout, const Scenario* scenario);

}  // namespace memplan
