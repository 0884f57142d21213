// How long one evaluation of a configured scenario takes: the unit of work of
// a configuration search (issue 10's goal: a million per second on two
// cores, 500,000 per core). Three examples of the repository: the 70B
// TP8/PP4/DP4/ZeRO-1 training job, Mixtral 8x7B (TP2/PP4/DP8, ZeRO-1) and
// Llama-3.1-70B served on 4 GPUs; and a LoRA run at varying lengths (the
// allocator's length_* options: an expectation and sampled quantiles per
// micro-batch and sequence length).
//
//   Evaluate/<example>           every plugin, as `memplan run` does
//   SweepMicroBatch/<example>    evaluate_at over micro-batch 1..8: plugins before
//                                the first that reads micro_batch or seq_len run
//                                once (incremental evaluation), as the size
//                                solver and a search over batch sizes do
//   .../threads:2                one estimator per thread, both cores
//   ReconfigureAndEvaluate       change two strategies' sizes without the scenario file, evaluate
//   ParseAndConfigure/<example>  the one-time cost: parse, create every plugin, evaluate
//   ListedOrder/<steps>          the varying-lengths example with the run's own order (the
//                                allocator's step_lengths, <steps> micro-batches): evaluate_at
//                                over micro-batch 1..32, more than the allocator remembers (16),
//                                so each evaluation walks the list again (its steps longer
//                                than all before, kept when the option is read)
//   ParseListedOrder/<steps>     the one-time cost of the same scenario: the list read
//                                as TOML, joined, parsed by the plugin, one evaluation
//
// Run: build/bin/memplan_bench (items_per_second is evaluations per second,
// summed over the threads; allocs_per_eval, on one thread, is operator new
// calls per timed evaluation, counted by tests/support/allocation_counter.cpp).
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>
#include <string>

#include "allocation_counter.hpp"
#include "memplan/core/catalog.hpp"
#include "memplan/core/estimator.hpp"
#include "memplan/core/plugin_registry.hpp"
#include "memplan/core/scenario.hpp"

namespace {

// Heap allocations per timed iteration, reported on single-threaded runs (the
// count is the process's, so two threads would each see both).
class AllocationsPerIteration {
 public:
  explicit AllocationsPerIteration(benchmark::State& state) : state_(state), before_(memplan::testing::allocation_count()) {}
  ~AllocationsPerIteration() {
    if (state_.threads() == 1 && state_.iterations() > 0)
      state_.counters["allocs_per_eval"] =
          static_cast<double>(memplan::testing::allocation_count() - before_) / static_cast<double>(state_.iterations());
  }

 private:
  benchmark::State& state_;
  uint64_t before_;
};

const char* const kExamples[] = {"llama2-70b-tp8-pp4-dp4-zero1", "mixtral-8x7b-tp2-pp4-dp8-zero1",
                                 "infer-llama-3.1-70b-bf16-tp4", "train-overhead-allocator-varying-lengths"};

struct Fixture {
  memplan::Catalog catalog = memplan::Catalog::load(MEMPLAN_BENCH_DATA_DIR);
  memplan::PluginRegistry registry;
  Fixture() { registry.load_folder(MEMPLAN_BENCH_PLUGIN_DIR); }
};

Fixture& fixture() {
  static Fixture instance;
  return instance;
}

std::string example_path(int64_t index) {
  return std::string(MEMPLAN_BENCH_EXAMPLES_DIR) + "/" + kExamples[index] + ".toml";
}

std::string example_text(int64_t index) {
  std::ifstream in(example_path(index));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void Evaluate(benchmark::State& state) {
  const memplan::Scenario scenario = memplan::load_scenario(example_path(state.range(0)), fixture().catalog);
  memplan::Estimator estimator(scenario, fixture().registry);
  estimator.evaluate();  // the first evaluation checks after each plugin; the timed ones are the steady state
  estimator.evaluate();
  {
    const AllocationsPerIteration allocations(state);
    for (auto _ : state) benchmark::DoNotOptimize(estimator.evaluate().peak);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(kExamples[state.range(0)]);
}
BENCHMARK(Evaluate)->DenseRange(0, 3)->Threads(1)->Threads(2)->UseRealTime();

void SweepMicroBatch(benchmark::State& state) {
  const memplan::Scenario scenario = memplan::load_scenario(example_path(state.range(0)), fixture().catalog);
  memplan::Estimator estimator(scenario, fixture().registry);
  const int64_t seq_len = scenario.seq_len;
  for (int64_t warm = 1; warm <= 8; ++warm) estimator.evaluate_at(warm, seq_len);  // buffers sized for 8
  int64_t micro_batch = 0;
  {
    const AllocationsPerIteration allocations(state);
    for (auto _ : state) {
      micro_batch = micro_batch % 8 + 1;
      benchmark::DoNotOptimize(estimator.evaluate_at(micro_batch, seq_len).peak);
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(kExamples[state.range(0)]);
}
BENCHMARK(SweepMicroBatch)->DenseRange(0, 3)->Threads(1)->Threads(2)->UseRealTime();

// A configuration search's step between layouts: tensor parallelism 8 <-> 4
// (data parallelism 4 <-> 8, the same 128 GPUs) by Estimator::set_option,
// which runs the two plugins' create() again on the estimator's tables (no
// TOML), then one evaluation, checked after each plugin as the first
// evaluation of a configuration is.
void ReconfigureAndEvaluate(benchmark::State& state) {
  const memplan::Scenario scenario = memplan::load_scenario(example_path(0), fixture().catalog);
  memplan::Estimator estimator(scenario, fixture().registry);
  const size_t tp = *estimator.find_plugin("tensor-parallel");
  const size_t dp = *estimator.find_plugin("data-parallel");
  memplan::OptionValue size;
  size.key = "size";
  size.type = memplan::OptionValue::Type::integer;
  int64_t tp_size = 8;
  for (auto _ : state) {
    tp_size = tp_size == 8 ? 4 : 8;
    size.integer = tp_size;
    estimator.set_option(tp, size);
    size.integer = 32 / tp_size;
    estimator.set_option(dp, size);
    benchmark::DoNotOptimize(estimator.evaluate().peak);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(kExamples[0]);
}
BENCHMARK(ReconfigureAndEvaluate);

void ParseAndConfigure(benchmark::State& state) {
  const std::string text = example_text(state.range(0));
  for (auto _ : state) {
    const memplan::Scenario scenario = memplan::parse_scenario(text, example_path(state.range(0)), fixture().catalog);
    memplan::Estimator estimator(scenario, fixture().registry);
    benchmark::DoNotOptimize(estimator.evaluate().peak);
  }
  state.SetLabel(kExamples[state.range(0)]);
}
BENCHMARK(ParseAndConfigure)->DenseRange(0, 2);

// The varying-lengths example with `steps` listed lengths in place of the
// length_* options: lengths in [91, 2048] from a fixed linear congruential
// sequence (the same text every run), seq_len 2048.
std::string listed_order_text(int64_t steps) {
  std::string text = example_text(3);
  const std::string options = "length_min = 91\nlength_mean = 3234.4\nlength_sd = 2547.5\nrun_samples = 1200\n";
  std::string list = "step_lengths = [";
  uint64_t state = 12345;
  for (int64_t i = 0; i < steps; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    list += std::to_string(91 + static_cast<int64_t>((state >> 33) % 1958)) + (i + 1 < steps ? ", " : "]\n");
  }
  text.replace(text.find(options), options.size(), list);
  return text;
}

void ListedOrder(benchmark::State& state) {
  const memplan::Scenario scenario =
      memplan::parse_scenario(listed_order_text(state.range(0)), example_path(3), fixture().catalog);
  memplan::Estimator estimator(scenario, fixture().registry);
  for (int64_t warm = 1; warm <= 32; ++warm) estimator.evaluate_at(warm, scenario.seq_len);  // buffers sized for 32
  int64_t micro_batch = 0;
  for (auto _ : state) {
    micro_batch = micro_batch % 32 + 1;
    benchmark::DoNotOptimize(estimator.evaluate_at(micro_batch, scenario.seq_len).peak);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(ListedOrder)->Arg(1'000)->Arg(100'000)->ArgName("steps");

void ParseListedOrder(benchmark::State& state) {
  const std::string text = listed_order_text(state.range(0));
  for (auto _ : state) {
    const memplan::Scenario scenario = memplan::parse_scenario(text, example_path(3), fixture().catalog);
    memplan::Estimator estimator(scenario, fixture().registry);
    benchmark::DoNotOptimize(estimator.evaluate().peak);
  }
}
BENCHMARK(ParseListedOrder)->Arg(1'000)->Arg(100'000)->ArgName("steps")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
