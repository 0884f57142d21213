// Finds plugin libraries, loads them with Boost.DLL and checks them before
// anything runs. Checks run in a fixed order, each with its own message that
// names the library and the fix:
//   1. the file loads (dlopen with RTLD_NOW | RTLD_LOCAL);
//   2. it exports the entry point MEMPLAN_ENTRY_POINT, which returns a descriptor;
//   3. ABI major equals the host's, and ABI minor is not newer than the host's
//      (read first: every ABI version starts with struct_size and the version);
//   4. the descriptor is at least as large as ABI 1.0's;
//   5. name, version, kind, phase, callbacks and option specs are well formed;
//   6. the caller's check of the plugin, if any (bundles: the plugin is the one
//      the manifest lists for this library);
//   7. no plugin of the same name was loaded before (the first one found is kept).
// Callers may add a check 0 that runs before the file is opened (bundles
// re-check the library's sha256 there; see bundle.hpp) and check 6, which
// runs before the plugin takes its name, so a library refused there can
// never shadow another's plugin.
// A library that fails a check is skipped and reported; the others stay usable.
// Libraries are never unloaded while the registry lives.
#pragma once

#include <memplan/plugin_abi.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace memplan {

struct LoadedPlugin {
  memplan_plugin_descriptor descriptor{};  // copied, zero-filled past the plugin's struct_size
  std::vector<memplan_option_spec> options;
  std::string path;  // the library file
  std::string name;
  std::string version;
  std::string summary;
};

class PluginRegistry {
 public:
  PluginRegistry();
  ~PluginRegistry();
  PluginRegistry(const PluginRegistry&) = delete;
  PluginRegistry& operator=(const PluginRegistry&) = delete;

  // Loads every *.so in `folder` (sorted by file name). A missing folder is
  // reported as a diagnostic; returns false in that case.
  bool load_folder(const std::string& folder);
  // Loads one library; returns false and records a diagnostic if it fails a check.
  bool load_library(const std::string& path);
  // Check 0: runs on the absolute path right before the library is opened; a
  // non-empty result rejects the library with that text, and it is never opened.
  using PreloadCheck = std::function<std::string(const std::string& path)>;
  bool load_library(const std::string& path, const PreloadCheck& check);
  // Check 6: runs on the well-formed plugin the library registers, before
  // the name rule; a non-empty result rejects the library with that text.
  using PluginCheck = std::function<std::string(const LoadedPlugin& plugin)>;
  bool load_library(const std::string& path, const PreloadCheck& check, const PluginCheck& plugin_check);
  // Records a rejection found outside the registry (a whole bundle refused).
  void add_diagnostic(std::string diagnostic) { diagnostics_.push_back(std::move(diagnostic)); }

  const LoadedPlugin* find(std::string_view name) const;
  std::vector<std::string> names(int32_t kind = 0) const;  // kind 0: all
  const std::vector<std::unique_ptr<LoadedPlugin>>& plugins() const { return plugins_; }
  // One paragraph per library that was rejected, in load order.
  const std::vector<std::string>& diagnostics() const { return diagnostics_; }

 private:
  struct Libraries;
  std::unique_ptr<Libraries> libraries_;
  std::vector<std::unique_ptr<LoadedPlugin>> plugins_;
  std::vector<std::string> diagnostics_;
  std::vector<std::string> seen_files_;  // canonical paths of every library tried
};

}  // namespace memplan
