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
// Libraries are never unloaded, not even when the registry goes: see the
// destructor.
//
// With an index (use_index), a folder whose libraries are all known from an
// earlier run is read without opening them: each library's plugin is
// registered by name and kind, and opened, with every check above, the first
// time find() asks for it (plugin_index.hpp says when an index is trusted).
// Rejected libraries are opened on every run, so their warnings stay.
#pragma once

#include <memplan/plugin_abi.h>

#include <cstdint>
#include <filesystem>
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
  uint64_t discovered = 0;  // position in the search order; plugins() keeps this order
};

class PluginRegistry {
 public:
  PluginRegistry();
  ~PluginRegistry();
  PluginRegistry(const PluginRegistry&) = delete;
  PluginRegistry& operator=(const PluginRegistry&) = delete;

  // Keeps one index file per plugin folder in `index_dir` (created when
  // needed); folders loaded afterwards open only the libraries asked for.
  void use_index(std::filesystem::path index_dir);

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
  void add_diagnostic(std::string diagnostic);

  // The plugin of that name; opens its library if the index named it and
  // it is not open yet (then a library that no longer passes its checks is
  // reported in diagnostics() and nothing is returned).
  const LoadedPlugin* find(std::string_view name) const;
  // Names in search order, opened or not; kind 0: all.
  std::vector<std::string> names(int32_t kind = 0) const;
  // Every plugin, in search order: opens every library not open yet.
  const std::vector<std::unique_ptr<LoadedPlugin>>& plugins() const;
  // One paragraph per library that was rejected, in load order.
  const std::vector<std::string>& diagnostics() const;
  // How many libraries were opened (tests and benchmarks of the index).
  size_t opened_library_count() const;

 private:
  // Behind a pointer so that const lookups can open an indexed library:
  // opening is invisible to callers except through time.
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace memplan
