// Fuzz target: a GPU catalog file's bytes, as an installed bundle ships them in
// data/gpus.toml (docs/scenario-reference.md, "GPU catalog"; docs/bundles.md,
// "Catalog files"). A bundle is signed by its publisher, not by whoever runs
// memplan, so its catalog is someone else's file; once installed it is read at
// every command that loads the catalog. Per input, what load_installed_catalog
// does with such a file (core/src/model/catalog.cpp):
//
//   1. Catalog::load of the fuzz build's catalog plus a bundle source holding
//      that file: each [name] table's label, memory_gib, cuda_total_gib with
//      its cuda_total_source, nvlink_sharp, source and the performance keys
//      (tflops per math, memory_bandwidth_gbs, gpus_per_node, intra_node_gbs,
//      inter_node_gbs, performance_source), and the rule that a name already
//      in the catalog is an error;
//   2. for each of the bundle's GPUs (the first four), a serving scenario
//      naming it, with vLLM's budget (serving-budget, under the default vllm
//      profile: the CUDA-reported capacity) and under the paper profile (the
//      nominal one), each estimated with its limits.
//
// A memplan::Error is the normal answer to a bad file or to a GPU too small
// for the scenario. A defect: any other exception, a sanitizer report, a
// loaded GPU whose capacity is 0 or above its nominal size, or that differs
// from the nominal size without a cuda_total_source, a scenario whose
// capacity is not the catalog's, and an estimate with a quantity that is not a
// finite number of at least 0.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "defect.hpp"
#include "fuzz_host.hpp"
#include "memplan/core/catalog.hpp"
#include "memplan/core/error.hpp"
#include "memplan/core/estimator.hpp"
#include "memplan/core/limits.hpp"
#include "memplan/core/scenario.hpp"

namespace {

constexpr const char* kCatalogFile = "fuzz-bundle/data/gpus.toml";
constexpr const char* kScenarioFile = MEMPLAN_FUZZ_SOURCE_DIR "/examples/fuzz-input.toml";
constexpr int kGpusEstimated = 4;

// Serving a small model with vLLM's KV budget; %FRAMEWORK% and %GPU% are filled in.
constexpr const char* kServing = R"(name = "fuzz"
mode = "infer"
%FRAMEWORK%[model]
preset = "llama-3.2-1b"
[batch]
micro_batch = 4
seq_len = 4096
[precision]
use = "bf16"
[activations]
use = "inference"
[[strategy]]
use = "serving-budget"
gpu_memory_utilization = 0.9
[hardware]
gpu = "%GPU%"
)";

void check_entry(const memplan::GpuEntry& gpu) {
  if (gpu.memory_bytes == 0 || gpu.nominal_bytes == 0)
    memplan::fuzz::defect("GPU '" + gpu.name + "' loaded with no memory");
  if (gpu.memory_bytes > gpu.nominal_bytes)
    memplan::fuzz::defect("GPU '" + gpu.name + "' loaded with a capacity above its nominal memory");
  if (gpu.cuda_total_source.empty() && gpu.memory_bytes != gpu.nominal_bytes)
    memplan::fuzz::defect("GPU '" + gpu.name + "' has a CUDA total without cuda_total_source");
  const memplan::GpuPerformance& performance = gpu.performance;
  const auto check = [&](double value, const std::string& figure) {
    memplan::fuzz::check_non_negative(value, "the " + figure + " of GPU '" + gpu.name + "'");
  };
  for (double flops : performance.peak_flops) check(flops, "peak FLOP/s");
  check(performance.memory_bandwidth, "memory bandwidth");
  check(static_cast<double>(performance.gpus_per_node), "gpus_per_node");
  check(performance.intra_node_bandwidth, "intra-node bandwidth");
  check(performance.inter_node_bandwidth, "inter-node bandwidth");
}

std::string serving(const std::string& framework, const std::string& gpu) {
  std::string text = kServing;
  text.replace(text.find("%FRAMEWORK%"), 11, framework);
  text.replace(text.find("%GPU%"), 5, gpu);
  return text;
}

void estimate(const std::string& scenario_text, const memplan::Catalog& catalog, uint64_t capacity) {
  const memplan::Scenario scenario = memplan::parse_scenario(scenario_text, kScenarioFile, catalog);
  if (scenario.hardware.memory_bytes != capacity)
    memplan::fuzz::defect("the scenario's GPU holds " + std::to_string(scenario.hardware.memory_bytes) +
                          " bytes, not the catalog's " + std::to_string(capacity));
  memplan::Estimator estimator(scenario, memplan::fuzz::fuzz_host().registry);
  memplan::evaluate_with_limits(estimator);
  const memplan::Breakdown& breakdown = estimator.breakdown();
  memplan::fuzz::check_breakdown(breakdown);
  if (breakdown.memory_fraction > 1) memplan::fuzz::defect("the estimate's memory_fraction is above 1");
}

void load_and_use(std::string_view text) {
  memplan::CatalogSource bundle;
  bundle.origin = "bundle fuzz 1.0.0";
  bundle.remedy = "remove it with `memplan bundle remove fuzz`";
  bundle.gpus = memplan::CatalogFile{kCatalogFile, std::string(text)};
  const memplan::Catalog catalog = memplan::Catalog::load(memplan::fuzz::fuzz_host().catalog.data_dir(), {bundle});
  int estimated = 0;
  for (const memplan::GpuEntry& gpu : catalog.gpus()) {
    if (gpu.origin.empty()) continue;  // a built-in GPU
    check_entry(gpu);
    if (estimated == kGpusEstimated) continue;
    // A name a TOML basic string cannot hold as it is (a quote, a backslash, a control character) is left
    // out: the scenario text here does not escape it.
    if (std::any_of(gpu.name.begin(), gpu.name.end(), [](char c) {
          const auto byte = static_cast<unsigned char>(c);
          return c == '"' || c == '\\' || byte < 0x20 || byte == 0x7f;
        }))
      continue;
    ++estimated;
    estimate(serving("", gpu.name), catalog, gpu.memory_bytes);
    estimate(serving("[framework]\nuse = \"paper\"\n", gpu.name), catalog, gpu.nominal_bytes);
  }
}

}  // namespace

MEMPLAN_FUZZ_HOST_TEXT_TARGET(load_and_use)
