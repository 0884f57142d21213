#include "memplan/core/install_layout.hpp"

#define BOOST_DLL_USE_STD_FS
#include <boost/dll/runtime_symbol_info.hpp>
#include <cstdlib>

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

void load_plugins(PluginRegistry& registry, const InstallLayout& layout, const Scenario* scenario) {
  registry.load_folder(layout.plugin_dir.string());
  for (const std::string& folder : plugin_path_from_environment()) registry.load_folder(folder);
  if (scenario == nullptr) return;
  for (const std::string& folder : scenario->search_path) {
    std::error_code error;
    if (!std::filesystem::is_directory(folder, error))
      fail_at(scenario->search_path_location,
              "[plugins] search_path names " + folder + ", which is not a folder; create it or fix the path "
              "(relative paths start at the scenario file's folder)");
    registry.load_folder(folder);
  }
}

}  // namespace memplan
