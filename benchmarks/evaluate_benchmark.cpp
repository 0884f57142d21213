// How long one evaluation of a configured scenario takes: the unit of work of
// a configuration search (the goal is a million per second on two cores).
// Also measures the one-time costs: parsing a scenario and configuring plugins.
// Run: build/bin/memplan_bench
#include <benchmark/benchmark.h>

#include "memplan/core/catalog.hpp"
#include "memplan/core/estimator.hpp"
#include "memplan/core/plugin_registry.hpp"
#include "memplan/core/scenario.hpp"

namespace {

// Every phase in use: precision, layout (TP + SP, PP, DP, recompute),
// optimizer, sharding, activations.
constexpr const char* kScenario = R"(
name = "llama2-70b-3d"
mode = "train"
[model]
preset = "llama-2-70b"
[batch]
micro_batch = 1
seq_len = 4096
grad_accum = 32
[precision]
use = "mixed-bf16"
[optimizer]
use = "adamw"
[activations]
use = "megatron"
flash_attention = true
dropout = false
[[strategy]]
use = "tensor-parallel"
size = 8
sequence_parallel = true
[[strategy]]
use = "pipeline-parallel"
size = 4
[[strategy]]
use = "data-parallel"
size = 4
[[strategy]]
use = "zero"
stage = 1
[[strategy]]
use = "recompute"
policy = "selective"
[hardware]
gpu = "h100-sxm-80gb"
count = 128
)";

struct Fixture {
  memplan::Catalog catalog = memplan::Catalog::load(MEMPLAN_BENCH_DATA_DIR);
  memplan::PluginRegistry registry;
  Fixture() { registry.load_folder(MEMPLAN_BENCH_PLUGIN_DIR); }
};

Fixture& fixture() {
  static Fixture instance;
  return instance;
}

void EvaluateConfiguredScenario(benchmark::State& state) {
  const memplan::Scenario scenario = memplan::parse_scenario(kScenario, "bench.toml", fixture().catalog);
  memplan::Estimator estimator(scenario, fixture().registry);
  for (auto _ : state) benchmark::DoNotOptimize(estimator.evaluate().peak);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(EvaluateConfiguredScenario);

void ParseAndConfigureScenario(benchmark::State& state) {
  for (auto _ : state) {
    const memplan::Scenario scenario = memplan::parse_scenario(kScenario, "bench.toml", fixture().catalog);
    memplan::Estimator estimator(scenario, fixture().registry);
    benchmark::DoNotOptimize(estimator.evaluate().peak);
  }
}
BENCHMARK(ParseAndConfigureScenario);

}  // namespace

BENCHMARK_MAIN();
