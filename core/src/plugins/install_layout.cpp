#include "memplan/core/install_layout.hpp"

#define BOOST_DLL_USE_STD_FS
#include <boost/dll/runtime_symbol_info.hpp>
#include <cstdlib>
#include <unordered_set>

#include "memplan/core/requirement.hpp"

namespace memplan {

InstallLayout layout_beside(const std::filesystem::path& executable) {
  const std::filesystem::path prefix = executable.parent_path().parent_path();
  return InstallLayout{prefix / "lib" / "memplan" / "plugins", prefix / "share" / "memplan"};
}

std::filesystem::path current_executable() { return boost::dll::program_location(); }

std::vector<std::string> plugin_path_from_environment() {
  std::vector<std::string> folders;
  const char* value = std::getenv("MEMPLAN_PLUGIN_PATH");
  if (value == nullptr) return folders;
  std::string text(value);
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(':', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) folders.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return folders;
}

std::filesystem::path plugin_index_dir_from_environment() {
  if (const char* cache = std::getenv("MEMPLAN_CACHE_DIR"); cache != nullptr)
    return cache[0] == '\0' ? std::filesystem::path() : std::filesystem::path(cache) / "plugin-index";
  // XDG Base Directory: a relative XDG_CACHE_HOME is invalid and ignored.
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache != nullptr && cache[0] == '/')
    return std::filesystem::path(cache) / "memplan" / "plugin-index";
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] != '\0')
    return std::filesystem::path(home) / ".cache" / "memplan" / "plugin-index";
  return {};
}

std::vector<std::string> distinct_folders(const std::vector<std::string>& folders) {
  // Repeated text is dropped before any file system call: a search path that
  // names one folder 200,000 times then costs one canonical lookup, not
  // 200,000 folder scans (issue 14).
  std::unordered_set<std::string> seen_text;
  std::unordered_set<std::string> seen_canonical;
  std::vector<std::string> distinct;
  for (const std::string& folder : folders) {
    if (!seen_text.insert(folder).second) continue;
    std::error_code error;
    const std::filesystem::path canonical = std::filesystem::weakly_canonical(folder, error);
    if (seen_canonical.insert(error ? folder : canonical.string()).second) distinct.push_back(folder);
  }
  return distinct;
}

namespace {

void check_bundle_requirements(const Scenario& scenario, const std::vector<InstalledPackage>& installed) {
  for (const BundleRequirementSpec& spec : scenario.bundles) {
    std::string why;
    const auto requirement = parse_requirement(spec.text, why);
    if (!requirement) fail_at(spec.location, "in [plugins], 'bundles' entry " + why);
    const InstalledPackage* found = nullptr;
    for (const InstalledPackage& package : installed)
      if (package.name == requirement->name) found = &package;
    const std::string needs = "[plugins] bundles requires '" + spec.text + "'";
    if (found == nullptr)
      fail_at(spec.location, needs + ", but no bundle named '" + requirement->name + "' is installed; install it with "
                             "`memplan bundle install DIR` (`memplan bundle list` shows what is installed)");
    if (!found->loaded)
      fail_at(spec.location, needs + ", but the installed bundle '" + requirement->name + "' was refused: " +
                                 found->refusal);
    const auto version = parse_version(found->version);
    if (!version || !satisfies(*version, *requirement))
      fail_at(spec.location, needs + ", but version " + found->version + " of '" + requirement->name +
                                 "' is installed; install a version " + requirement->op + " " +
                                 requirement->version.text);
  }
}

}  // namespace

void load_plugins(PluginRegistry& registry, const InstallLayout& layout, const Scenario* scenario,
                  const PluginLoadOptions& options) {
  if (!options.index_dir.empty()) registry.use_index(options.index_dir);
  registry.load_folder(layout.plugin_dir.string());
  for (const std::string& folder : distinct_folders(plugin_path_from_environment())) registry.load_folder(folder);

  std::vector<InstalledPackage> installed;
  if (options.installed) installed = options.installed(registry);

  if (scenario == nullptr) return;
  for (const std::string& folder : distinct_folders(scenario->search_path)) {
    std::error_code error;
    if (!std::filesystem::is_directory(folder, error))
      fail_at(scenario->search_path_location,
              "[plugins] search_path names " + folder + ", which is not a folder; create it or fix the path "
              "(relative paths start at the scenario file's folder)");
    registry.load_folder(folder);
  }
  check_bundle_requirements(*scenario, installed);
  for (const ComponentSpec& component : scenario->components) registry.find(component.use);
}

}  // namespace memplan
