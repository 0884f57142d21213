// How fast `memplan search` sweeps (issue 11: a 70B sweep of a few hundred
// thousand configurations in about a second on the 2-core machine, memory
// flat). The sweep is benchmarks/search-llama2-70b-sweep.toml: Llama-2-70B on
// 512 H100s, 276,480 combinations (most of them invalid layouts, rejected with
// their reason). Rows go to a sink that keeps nothing, as --output streams them.
//
//   Search/threads:1, /threads:2   the whole sweep; items_per_second is
//                                  configurations per second
//
// Run: build/bin/memplan_bench --benchmark_filter=Search
#include <benchmark/benchmark.h>

#include <string>

#include "memplan/core/catalog.hpp"
#include "memplan/core/plugin_registry.hpp"
#include "memplan/core/scenario.hpp"
#include "memplan/core/search.hpp"

namespace {

void Search(benchmark::State& state) {
  const std::string file = std::string(MEMPLAN_BENCH_SOURCE_DIR) + "/benchmarks/search-llama2-70b-sweep.toml";
  const memplan::Catalog catalog = memplan::Catalog::load(MEMPLAN_BENCH_DATA_DIR);
  memplan::PluginRegistry registry;
  registry.load_folder(MEMPLAN_BENCH_PLUGIN_DIR);
  const memplan::Scenario scenario = memplan::load_scenario(file, catalog);
  const memplan::SearchSpace space = memplan::read_search_space(file, scenario, registry);
  memplan::SearchOptions options;
  options.threads = static_cast<int>(state.range(0));
  uint64_t rows = 0, fitting = 0;
  for (auto _ : state) {
    const memplan::SearchSummary summary =
        memplan::run_search(scenario, space, registry, options, [&](const memplan::SearchRow&) { ++rows; });
    fitting = summary.fitting;
  }
  state.SetItemsProcessed(static_cast<int64_t>(rows));
  state.counters["configurations"] = static_cast<double>(space.combinations);
  state.counters["fitting"] = static_cast<double>(fitting);
}
BENCHMARK(Search)->Arg(1)->Arg(2)->ArgName("threads")->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
