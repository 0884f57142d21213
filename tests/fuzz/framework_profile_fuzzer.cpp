// Fuzz target: a framework profile's bytes, as an installed bundle ships
// them in data/frameworks/<name>.toml (docs/frameworks.md, docs/bundles.md).
// A bundle is signed by its publisher, not by whoever runs memplan, so its
// profiles are someone else's file like a scenario; once installed they are
// read at every command that loads the catalog. Per input, what
// load_installed_catalog does with one such file (core/src/model/catalog.cpp):
//
//   1. parse_framework_profile: [framework] (name, aliases, extends,
//      extends_version), [defaults.<plugin>], [readings.<plugin>],
//      [[since]] with its GPU conditions and [since.readings.<plugin>], and
//      [[strategy]] tables;
//   2. what it accepts, Catalog::load of the fuzz build's catalog plus a
//      bundle source holding that file: the rule that a bundle's profile is
//      never a default, the name clash with the built-in profiles,
//      check_framework_names on its aliases, resolve_extends against the
//      built-in profiles (and itself) and inherit_profile;
//   3. what loads, a fixed training scenario with [framework] use = "fuzz"
//      (apply_framework: the profile's defaults, readings with their
//      warnings, and strategies) and a fixed serving scenario at a version,
//      both estimated with the built-in plugins; then, for a profile whose
//      [[since]] blocks give released days, version_on over a run of days
//      (never older for a later day) and the serving scenario at a date.
//
// A memplan::Error is the normal answer to a bad profile or to a scenario the
// profile's defaults make invalid. A defect: any other exception, a sanitizer
// report, a loaded profile that its own name or an alias does not find, and
// an estimate with a quantity that is not a finite number of at least 0.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "defect.hpp"
#include "fuzz_host.hpp"
#include "memplan/core/catalog.hpp"
#include "memplan/core/error.hpp"
#include "memplan/core/estimator.hpp"
#include "memplan/core/framework.hpp"
#include "memplan/core/limits.hpp"
#include "memplan/core/scenario.hpp"

namespace {

// A profile's name is its file's stem, so every accepted input is named "fuzz"
// (the seeds are the built-in profiles renamed: tests/fuzz/make_seeds.cmake).
constexpr const char* kProfileFile = "fuzz-bundle/data/frameworks/fuzz.toml";
constexpr const char* kScenarioFile = MEMPLAN_FUZZ_SOURCE_DIR "/examples/fuzz-input.toml";

// LoRA on a Llama under FSDP on two GPUs, with the generic cross-entropy
// value that profiles read their framework's way ([readings.megatron]).
constexpr const char* kTraining = R"(mode = "train"
[framework]
use = "fuzz"
[model]
preset = "llama-3.2-1b"
[batch]
micro_batch = 2
seq_len = 2048
[precision]
use = "bf16"
[optimizer]
use = "adamw"
[activations]
use = "megatron"
cross_entropy = "unfused"
[[strategy]]
use = "lora"
rank = 16
alpha = 32
targets = "q,k,v,mlp"
[[strategy]]
use = "fsdp"
[[strategy]]
use = "data-parallel"
size = 2
[hardware]
gpu = "h100-sxm-80gb"
count = 2
)";

// The serving side of profiles ([defaults.inference], GPU-conditional
// [[since]] blocks) at a named version.
constexpr const char* kServing = R"(mode = "infer"
[framework]
use = "fuzz"
version = "0.8.0"
[model]
preset = "llama-3.2-1b"
[batch]
micro_batch = 4
seq_len = 4096
[precision]
use = "bf16"
[activations]
use = "inference"
[hardware]
gpu = "h100-sxm-80gb"
)";

void estimate(std::string_view scenario_text, const memplan::Catalog& catalog, bool with_limits) {
  const memplan::Scenario scenario = memplan::parse_scenario(scenario_text, kScenarioFile, catalog);
  memplan::Estimator estimator(scenario, memplan::fuzz::fuzz_host().registry);
  if (with_limits) memplan::evaluate_with_limits(estimator);
  else estimator.evaluate();
  memplan::fuzz::check_breakdown(estimator.breakdown());
}

void load_and_use(std::string_view text) {
  const memplan::FrameworkProfile parsed = memplan::parse_framework_profile(text, kProfileFile);

  memplan::CatalogSource bundle;
  bundle.origin = "bundle fuzz 1.0.0";
  bundle.remedy = "remove it with `memplan bundle remove fuzz`";
  bundle.frameworks.push_back(memplan::CatalogFile{kProfileFile, std::string(text)});
  const memplan::Catalog catalog =
      memplan::Catalog::load(memplan::fuzz::fuzz_host().catalog.data_dir(), {bundle});

  // The catalog found no clash, so each name the profile answers to is its own.
  const memplan::FrameworkProfile* loaded = catalog.find_framework(parsed.name);
  if (loaded == nullptr || loaded->file != kProfileFile)
    memplan::fuzz::defect("the catalog loaded the bundle's profile but find_framework(\"" + parsed.name +
                          "\") does not find it");
  for (const memplan::FrameworkProfile::Alias& alias : parsed.aliases)
    if (catalog.find_framework(alias.name) != loaded)
      memplan::fuzz::defect("the catalog loaded the bundle's profile but its alias '" + alias.name +
                            "' finds another profile or none");

  estimate(kTraining, catalog, true);
  estimate(kServing, catalog, false);

  // A later day never gives an older version (released days are in version order).
  if (loaded->undated_block() == nullptr) {
    std::string earlier = loaded->version_on("1990-01-01");
    for (const char* day : {"2020-06-30", "2023-01-01", "2025-06-01", "2099-12-31"}) {
      const std::string version = loaded->version_on(day);
      if (memplan::compare_versions(version, earlier) < 0)
        memplan::fuzz::defect("version_on(\"" + std::string(day) + "\") is " + version +
                              ", older than an earlier day's " + earlier);
      earlier = version;
    }
  }
  // The same serving scenario at a day ([framework] date): the version of that day, from the profile's
  // [[since]] released days. Last: a profile with an undated block, or none dated, refuses the date.
  std::string dated = kServing;
  dated.replace(dated.find("version = \"0.8.0\""), std::string("version = \"0.8.0\"").size(), "date = 2025-06-01");
  estimate(dated, catalog, false);
}

}  // namespace

MEMPLAN_FUZZ_HOST_TEXT_TARGET(load_and_use)
