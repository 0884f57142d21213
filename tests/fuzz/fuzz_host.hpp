// What the scenario and config.json fuzz targets share with `memplan run`:
// the catalog and the built-in plugins of the build the fuzzer belongs to,
// found beside the executable as the CLI finds them (install_layout.hpp), and
// loaded once per process, as `memplan run` loads them once per run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "defect.hpp"
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

// The libFuzzer entry points of a target that reads each input as one text with `check` against the fuzz
// host: the host is loaded at start (a build without its plugins or catalog fails then, not at the first
// input), and a memplan::Error is the refusal bad input should get (refusal_is_an_error).
#define MEMPLAN_FUZZ_HOST_TEXT_TARGET(check)                                                                \
  extern "C" int LLVMFuzzerInitialize(int*, char***) {                                                      \
    memplan::fuzz::fuzz_host();                                                                             \
    return 0;                                                                                               \
  }                                                                                                         \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {                                 \
    memplan::fuzz::refusal_is_an_error(check, std::string_view(reinterpret_cast<const char*>(data), size)); \
    return 0;                                                                                               \
  }
