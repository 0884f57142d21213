// Where memplan finds its built-in plugins and data files: relative to the
// executable, so the build tree (build/bin/memplan) and an installed prefix
// (<prefix>/bin/memplan) both work without any environment variable.
//   <exe dir>/../lib/memplan/plugins   built-in plugin libraries
//   <exe dir>/../share/memplan         gpus.toml, models/*.toml
#pragma once

#include <filesystem>
#include <functional>
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

// `folders` with repeats removed, first-seen order kept; two names of one
// folder (through a link, or "a/../a") count once, by canonical path.
std::vector<std::string> distinct_folders(const std::vector<std::string>& folders);

// A package of plugins installed apart from the search folders (a bundle in
// the user's store), as its loader reports it. A scenario's [plugins] bundles
// requirements are checked against these.
struct InstalledPackage {
  std::string name;
  std::string version;
  bool loaded = false;  // passed its checks; its libraries went to the registry
  std::string refusal;  // why not
};
// Loads installed packages into the registry. The command line passes the
// bundle store's (bundle::installed_bundles_source in memplan/bundle); the
// core knows packages only through this.
using InstalledPackageSource = std::function<std::vector<InstalledPackage>(PluginRegistry&)>;

struct PluginLoadOptions {
  // Empty: no installed packages (only built-ins, MEMPLAN_PLUGIN_PATH and
  // the scenario's search path).
  InstalledPackageSource installed;
  // Where the plugin index lives (PluginRegistry::use_index); empty: no
  // index, every library of every folder is opened.
  std::filesystem::path index_dir;
};

// The plugin index folder for this user: $MEMPLAN_CACHE_DIR/plugin-index,
// else $XDG_CACHE_HOME/memplan/plugin-index, else
// ~/.cache/memplan/plugin-index; empty (no index) when MEMPLAN_CACHE_DIR is
// set to the empty string, or no HOME is known.
std::filesystem::path plugin_index_dir_from_environment();

// Loads plugins in precedence order: built-ins, then MEMPLAN_PLUGIN_PATH, then
// the installed packages (options.installed: bundles are each verified, and
// each library's sha256 is re-checked right before it is opened), then the
// scenario's [plugins] search_path (a missing scenario folder is an error at
// its file:line:column; each folder is read once, however often the path
// names it). Names already taken are refused, so nothing can silently
// replace a built-in, and a scenario's folder cannot shadow an installed,
// verified bundle. Then the scenario's [plugins] bundles requirements are
// checked against the installed packages (errors at file:line:column), and
// the libraries of the plugins the scenario names are opened, so that any
// warning about them is in the registry's diagnostics on return.
void load_plugins(PluginRegistry& registry, const InstallLayout& layout, const Scenario* scenario,
                  const PluginLoadOptions& options = {});

}  // namespace memplan
