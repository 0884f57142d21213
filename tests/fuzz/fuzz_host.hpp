// What the scenario and config.json fuzz targets share with `memplan run`:
// the catalog and the built-in plugins of the build the fuzzer belongs to,
// found beside the executable as the CLI finds them (install_layout.hpp), and
// loaded once per process, as `memplan run` loads them once per run.
#pragma once

#include "memplan/core/catalog.hpp"
#include "memplan/core/plugin_registry.hpp"

namespace memplan::fuzz {

struct FuzzHost {
  Catalog catalog;
  PluginRegistry registry;
};

// Loads on the first call; exits with a message when the build's plugins or
// catalog are missing or a plugin is rejected: a fuzzer without them would
// run, find nothing and look green.
const FuzzHost& fuzz_host();

}  // namespace memplan::fuzz
