#include "fuzz_host.hpp"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "memplan/core/error.hpp"
#include "memplan/core/install_layout.hpp"

namespace memplan::fuzz {

namespace {

[[noreturn]] void unusable(const std::string& why) {
  std::fprintf(stderr, "memplan fuzz target: cannot start: %s\n", why.c_str());
  std::exit(2);
}

FuzzHost* load_host() {
  const InstallLayout layout = layout_beside(current_executable());
  try {
    // Never freed: plugin libraries stay loaded until the process ends, as in
    // `memplan run`, and the host is reachable from here, so no leak is reported.
    auto* host = new FuzzHost{Catalog::load(layout.data_dir), PluginRegistry()};
    if (!host->registry.load_folder(layout.plugin_dir.string()) || host->registry.plugins().empty())
      unusable("no plugins in " + layout.plugin_dir.string() + "; build the fuzz build's plugins (cmake --build)");
    for (const std::string& diagnostic : host->registry.diagnostics())
      unusable("a built-in plugin was rejected: " + diagnostic);
    return host;
  } catch (const std::exception& error) {
    unusable(std::string(error.what()) + " (catalog " + layout.data_dir.string() + ")");
  }
}

}  // namespace

const FuzzHost& fuzz_host() {
  static const FuzzHost* host = load_host();
  return *host;
}

}  // namespace memplan::fuzz
