// Fuzz target: a Hugging Face config.json to an estimate, along the path
// `[model] hf_config = "config.json"` takes in `memplan run`
// (core/src/scenario/scenario.cpp, read_model): read_hf_config on the file's bytes,
// validate_model, then the estimator over the model's parameter inventory,
// once as a training and once as an inference scenario, so both the
// training and the KV-cache plugins see every architecture the reader accepts.
//
// A memplan::Error is the normal answer to bad input (it names the file, the
// line and column of invalid JSON, the field and the fix). Any other
// exception, nlohmann-json's own included, is a defect: the CLI would print
// it without saying which file or field.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "defect.hpp"
#include "fuzz_host.hpp"
#include "model/hf_config.hpp"
#include "memplan/core/error.hpp"
#include "memplan/core/estimator.hpp"
#include "memplan/core/scenario.hpp"
#include "model/model_reader.hpp"

namespace {

constexpr const char* kScenarioFile = MEMPLAN_FUZZ_SOURCE_DIR "/examples/fuzz-input.toml";
constexpr const char* kConfigFile = MEMPLAN_FUZZ_SOURCE_DIR "/examples/config.json";

// The scenarios the config's model is estimated in. The preset only stands
// in until the fuzzed model replaces it: what the CLI would get from a
// scenario whose [model] table is `hf_config = "config.json"` and nothing else.
constexpr const char* kTraining = R"(mode = "train"
[model]
preset = "llama-2-7b"
[batch]
micro_batch = 2
seq_len = 4096
[precision]
use = "mixed-bf16"
[optimizer]
use = "adamw"
[activations]
use = "megatron"
[hardware]
gpu = "h100-sxm-80gb"
)";

constexpr const char* kInference = R"(mode = "infer"
[model]
preset = "llama-2-7b"
[batch]
micro_batch = 8
seq_len = 8192
[precision]
use = "bf16"
[activations]
use = "inference"
[hardware]
gpu = "h100-sxm-80gb"
)";

const std::vector<memplan::Scenario>& scenarios() {
  static const std::vector<memplan::Scenario> parsed = [] {
    const memplan::Catalog& catalog = memplan::fuzz::fuzz_host().catalog;
    return std::vector<memplan::Scenario>{memplan::parse_scenario(kTraining, kScenarioFile, catalog),
                                          memplan::parse_scenario(kInference, kScenarioFile, catalog)};
  }();
  return parsed;
}

void estimate(std::string_view json) {
  const memplan::ModelSpec model = memplan::read_hf_config(json, kConfigFile);
  // The [model] table that named the config, with no key of its own.
  const toml::table model_table;
  memplan::validate_model(model, memplan::TomlReader(model_table, kScenarioFile, "[model]"));
  for (const memplan::Scenario& base : scenarios()) {
    memplan::Scenario scenario = base;
    scenario.model = model;
    memplan::Estimator estimator(scenario, memplan::fuzz::fuzz_host().registry);
    estimator.evaluate();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  scenarios();  // fail at start, not at the first input, when the build is incomplete
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  memplan::fuzz::refusal_is_an_error(estimate, std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
