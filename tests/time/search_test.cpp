// `memplan search` (run_search): its rows against fresh evaluations of each
// configuration (brute force), shards against the whole sweep, the ranking
// and the Pareto front.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "memplan/core/estimator.hpp"
#include "memplan/core/explain.hpp"
#include "memplan/core/search.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

// Llama-2-7B on 8 H100s: 4 x 3 x 2 x 2 = 48 combinations; data parallelism fills the GPUs left,
// grad_accum follows from 64 sequences per step.
constexpr const char* kScenario =
    "name = \"search\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nmicro_batch = 1\n"
    "seq_len = 4096\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\n"
    "use = \"megatron\"\n[[strategy]]\nuse = \"tensor-parallel\"\nsize = 1\n[[strategy]]\nuse = \"data-parallel\"\n"
    "size = 8\n[[strategy]]\nuse = \"zero\"\nstage = 1\n[[strategy]]\nuse = \"recompute\"\npolicy = \"none\"\n"
    "[[strategy]]\nuse = \"transformer-step\"\nefficiency = 0.45\n[hardware]\ngpu = \"h100-sxm-80gb\"\ncount = 8\n"
    "[search]\nglobal_batch = 64\nfill = \"data-parallel.size\"\ntop = 5\n[search.axes]\n"
    "\"tensor-parallel.size\" = [1, 2, 4, 8]\n\"zero.stage\" = [1, 2, 3]\n\"recompute.policy\" = [\"none\", \"full\"]\n"
    "\"batch.micro_batch\" = [1, 2]\n";

struct Sweep {
  Scenario scenario;
  SearchSpace space;
};

// A file of this test's own: ctest runs the tests of this file in parallel processes.
std::string own_file(const std::string& stem) {
  return ::testing::TempDir() + "/" + stem + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name() +
         ".toml";
}

Sweep sweep() {
  const std::string file = own_file("search");
  std::ofstream(file) << kScenario;
  Scenario scenario = load_scenario(file, catalog());
  SearchSpace space = read_search_space(file, scenario, builtin_plugins());
  return {std::move(scenario), std::move(space)};
}

std::vector<SearchRow> rows_of(const Sweep& s, int threads, uint64_t shard = 0, uint64_t shards = 1,
                               SearchSummary* summary = nullptr) {
  std::vector<SearchRow> rows;
  SearchOptions options;
  options.threads = threads;
  options.shard = shard;
  options.shards = shards;
  SearchSummary result = run_search(s.scenario, s.space, builtin_plugins(), options,
                                    [&](const SearchRow& row) { rows.push_back(row); });
  if (summary != nullptr) *summary = result;
  return rows;
}

// Each row equals a fresh estimator on the scenario with that row's values set
// by --set (axes in the order the search keeps: plugins by name, micro_batch last).
TEST(Search, RowsEqualFreshEvaluations) {
  const Sweep s = sweep();
  ASSERT_EQ(s.space.combinations, 48u);
  ASSERT_EQ(s.space.axes.back().key, "batch.micro_batch");
  const std::vector<SearchRow> rows = rows_of(s, 2);
  ASSERT_EQ(rows.size(), 48u);
  const std::string file = own_file("search");
  size_t fitting = 0;
  for (const SearchRow& row : rows) {
    std::vector<std::string> overrides;
    for (size_t a = 0; a < s.space.axes.size(); ++a) {
      const SearchAxis& axis = s.space.axes[a];
      if (axis.plugin.empty()) {
        overrides.push_back("batch.micro_batch=" + row.values[a]);
        continue;
      }
      const size_t strategy = axis.plugin == "tensor-parallel" ? 1 : axis.plugin == "zero" ? 3 : 4;
      const bool text = axis.option == "policy";
      overrides.push_back("strategy." + std::to_string(strategy) + "." + axis.option + "=" +
                          (text ? "\"" + row.values[a] + "\"" : row.values[a]));
    }
    auto value_of = [&](const std::string& key) {
      for (size_t a = 0; a < s.space.axes.size(); ++a)
        if (s.space.axes[a].key == key) return std::stoll(row.values[a]);
      return 0LL;
    };
    const int64_t tp = value_of("tensor-parallel.size");
    EXPECT_EQ(row.fill_value, 8 / tp) << row.index;
    overrides.push_back("strategy.2.size=" + std::to_string(8 / tp));
    overrides.push_back("batch.grad_accum=" + std::to_string(64 / (value_of("batch.micro_batch") * (8 / tp))));
    const Scenario scenario = load_scenario(file, catalog(), overrides);
    Estimator fresh(scenario, builtin_plugins());
    const Breakdown& b = fresh.evaluate();
    EXPECT_EQ(row.peak_bytes, b.peak) << row.index;
    EXPECT_DOUBLE_EQ(row.step_seconds, b.time.seconds) << row.index;
    EXPECT_EQ(row.status == SearchRow::Status::fits, fresh.fits()) << row.index;
    fitting += row.status == SearchRow::Status::fits;
  }
  EXPECT_GT(fitting, 0u);
}

// Invalid layouts: a refusal remembered by the search (no create() again) gives the reason a fresh
// evaluation gives, and valid layouts are not refused. Llama-2-7B on 8 GPUs over pipeline sizes, schedules and interleaving: 24 rows, most refused.
TEST(Search, RefusalsEqualFreshEvaluations) {
  const std::string file = own_file("pipeline");
  std::ofstream(file)
      << "name = \"pp\"\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nmicro_batch = 1\nseq_len = 2048\n"
         "[precision]\nuse = \"bf16\"\n[optimizer]\nuse = \"adamw\"\n[activations]\nuse = \"megatron\"\n"
         "[[strategy]]\nuse = \"pipeline-parallel\"\nsize = 1\n[[strategy]]\nuse = \"data-parallel\"\nsize = 8\n"
         "[hardware]\ngpu = \"h100-sxm-80gb\"\ncount = 8\n[search]\nglobal_batch = 64\nfill = \"data-parallel.size\"\n"
         "[search.axes]\n\"pipeline-parallel.size\" = [1, 2, 4]\n\"pipeline-parallel.schedule\" = [\"1f1b\", \"gpipe\"]\n"
         "\"pipeline-parallel.virtual_stages\" = [1, 2]\n\"batch.micro_batch\" = [1, 2]\n";
  const Scenario scenario = load_scenario(file, catalog());
  const Sweep s{scenario, read_search_space(file, scenario, builtin_plugins())};
  size_t invalid = 0;
  for (const SearchRow& row : rows_of(s, 1)) {
    // Axes in name order: schedule, size, virtual_stages, then micro_batch.
    std::vector<std::string> overrides{"strategy.1.schedule=\"" + row.values[0] + "\"", "strategy.1.size=" + row.values[1],
                                       "strategy.1.virtual_stages=" + row.values[2], "batch.micro_batch=" + row.values[3]};
    const int64_t pp = std::stoll(row.values[1]);
    overrides.push_back("strategy.2.size=" + std::to_string(8 / pp));
    overrides.push_back("batch.grad_accum=" + std::to_string(64 / (std::stoll(row.values[3]) * (8 / pp))));
    std::string fresh_error;
    try {
      const Scenario scenario = load_scenario(file, catalog(), overrides);  // outlives the estimator
      Estimator fresh(scenario, builtin_plugins());
      fresh.evaluate();
    } catch (const Error& error) {
      fresh_error = error.what();
    }
    if (row.status != SearchRow::Status::invalid) {
      EXPECT_EQ(fresh_error, "") << row.index;
      continue;
    }
    ++invalid;
    EXPECT_NE(fresh_error.find(row.reason), std::string::npos) << row.index << ": " << row.reason << " / " << fresh_error;
  }
  // virtual_stages = 2 needs a pipeline (size 1: 2 schedules x 2 micro-batches) and the 1F1B schedule
  // (gpipe at sizes 2 and 4: 2 x 2): 8 rows. The options of one plugin are set together, so no row is
  // refused for a combination of its new values with the last row's.
  EXPECT_EQ(invalid, 8u);
}

// Three shards, each every third index, give the whole sweep's rows; threads change nothing.
TEST(Search, ShardsMakeTheWholeSweep) {
  const Sweep s = sweep();
  std::vector<std::string> whole;
  for (const SearchRow& row : rows_of(s, 1)) whole.push_back(search_csv_line(row));
  std::vector<std::string> two_threads;
  for (const SearchRow& row : rows_of(s, 2)) two_threads.push_back(search_csv_line(row));
  EXPECT_EQ(two_threads, whole);
  std::vector<SearchRow> parts;
  for (uint64_t shard = 0; shard < 3; ++shard)
    for (const SearchRow& row : rows_of(s, 2, shard, 3)) {
      EXPECT_EQ(row.index % 3, shard);
      parts.push_back(row);
    }
  std::sort(parts.begin(), parts.end(), [](const SearchRow& a, const SearchRow& b) { return a.index < b.index; });
  std::vector<std::string> merged;
  for (const SearchRow& row : parts) merged.push_back(search_csv_line(row));
  EXPECT_EQ(merged, whole);
}

// The best rows are the fitting ones in order of step time; no row of the
// front is dominated by any fitting row, and every fitting row is dominated
// by or equal to one on the front.
TEST(Search, RankingAndParetoFront) {
  const Sweep s = sweep();
  SearchSummary summary;
  const std::vector<SearchRow> rows = rows_of(s, 1, 0, 1, &summary);
  std::vector<SearchRow> fitting;
  for (const SearchRow& row : rows)
    if (row.status == SearchRow::Status::fits) fitting.push_back(row);
  std::sort(fitting.begin(), fitting.end(), [](const SearchRow& a, const SearchRow& b) {
    return a.step_seconds != b.step_seconds ? a.step_seconds < b.step_seconds
                                            : a.peak_bytes != b.peak_bytes ? a.peak_bytes < b.peak_bytes
                                                                           : a.index < b.index;
  });
  ASSERT_EQ(summary.best.size(), std::min<size_t>(5, fitting.size()));
  for (size_t i = 0; i < summary.best.size(); ++i) EXPECT_EQ(summary.best[i].index, fitting[i].index);
  EXPECT_EQ(summary.fitting + summary.does_not_fit + summary.invalid, 48u);
  for (const SearchRow& front : summary.pareto)
    for (const SearchRow& row : fitting)
      EXPECT_FALSE(row.peak_bytes <= front.peak_bytes && row.step_seconds <= front.step_seconds &&
                   (row.peak_bytes < front.peak_bytes || row.step_seconds < front.step_seconds))
          << row.index << " dominates " << front.index;
  for (const SearchRow& row : fitting) {
    bool covered = false;
    for (const SearchRow& front : summary.pareto)
      covered = covered || (front.peak_bytes <= row.peak_bytes && front.step_seconds <= row.step_seconds);
    EXPECT_TRUE(covered) << row.index;
  }
}

// The fill does not depend on the order of the values: listing the tensor-parallel sizes from large to
// small (the first layout then fills one data rank) gives each configuration the same row.
TEST(Search, FillIndependentOfValueOrder) {
  const std::string file = own_file("search-reversed");
  std::string text = kScenario;
  text.replace(text.find("[1, 2, 4, 8]"), 12, "[8, 4, 2, 1]");
  std::ofstream(file) << text;
  const Scenario scenario = load_scenario(file, catalog());
  const Sweep reversed{scenario, read_search_space(file, scenario, builtin_plugins())};
  const Sweep ordered = sweep();
  auto by_values = [](const std::vector<SearchRow>& rows) {
    std::map<std::vector<std::string>, std::pair<int64_t, uint64_t>> out;
    for (const SearchRow& row : rows) out[row.values] = {row.grad_accum, row.peak_bytes};
    return out;
  };
  EXPECT_EQ(by_values(rows_of(reversed, 1)), by_values(rows_of(ordered, 1)));
}

// --set reaches [search] as it reaches the scenario.
TEST(Search, OverridesReachTheSearchTable) {
  const Sweep s = sweep();
  const std::string file = own_file("search");
  const SearchSpace space = read_search_space(file, s.scenario, builtin_plugins(), {"search.top=2"});
  EXPECT_EQ(space.top, 2);
}

// explain: every change it reports equals a fresh evaluation of the scenario with that change made
// (--set), fits, and the list is in order of step time. Llama-2-70B at micro-batch 4 on TP 4 x PP 4 x DP 8
// with selective recomputation does not fit an H100.
TEST(Explain, FixesAreFreshEvaluationsInOrderOfTime) {
  const std::string file = source_dir() + "/examples/search-llama2-70b-h100.toml";
  const std::vector<std::string> base{"strategy.1.size=4", "strategy.3.size=8", "batch.micro_batch=4",
                                      "batch.grad_accum=8"};
  const Scenario scenario = load_scenario(file, catalog(), base);
  const Explanation e = explain(scenario, builtin_plugins());
  ASSERT_TRUE(e.has_gpu);
  EXPECT_FALSE(e.fits);
  ASSERT_FALSE(e.fixes.empty());
  for (size_t i = 0; i < e.fixes.size(); ++i) {
    const ExplainChange& fix = e.fixes[i];
    EXPECT_TRUE(fix.fits);
    EXPECT_LT(fix.peak_bytes, e.capacity_bytes);
    if (i > 0 && fix.changes.size() == e.fixes[i - 1].changes.size()) {
      EXPECT_LE(e.fixes[i - 1].step_seconds, fix.step_seconds);
    }
  }
  // The recomputation lever, checked against --set.
  const auto full = std::find_if(e.fixes.begin(), e.fixes.end(), [](const ExplainChange& fix) {
    return fix.changes.size() == 1 && fix.changes[0] == "recompute.policy: selective -> full";
  });
  ASSERT_NE(full, e.fixes.end());
  std::vector<std::string> changed = base;
  changed.push_back("strategy.5.policy=full");
  const Scenario changed_scenario = load_scenario(file, catalog(), changed);  // outlives the estimator
  Estimator fresh(changed_scenario, builtin_plugins());
  EXPECT_EQ(full->peak_bytes, fresh.evaluate().peak);
  EXPECT_DOUBLE_EQ(full->step_seconds, fresh.breakdown().time.seconds);
}

// Hardware axes: each row equals a fresh evaluation of the scenario with --set hardware.gpu=... and
// hardware.count=... (the catalog's memory, peak and bandwidths of that GPU, the fill over that count).
// Llama-2-7B, 2 GPUs x 2 counts x 2 tensor sizes x 2 ZeRO stages x 2 micro-batches = 32 rows.
constexpr const char* kHardwareAxes =
    "[search.axes]\n\"hardware.gpu\" = [\"h100-sxm-80gb\", \"a100-sxm-40gb\"]\n\"hardware.count\" = [8, 16]\n"
    "\"tensor-parallel.size\" = [1, 2]\n\"zero.stage\" = [1, 3]\n\"batch.micro_batch\" = [1, 2]\n";

std::string with_axes(const std::string& axes, const std::string& more = "") {
  std::string text = kScenario;
  text.erase(text.find("[search.axes]"));
  return text + more + axes;
}

// The --set of a row of the scenarios above: strategy 1 tensor-parallel, 2 data-parallel, 3 zero, 4 recompute.
std::vector<std::string> row_overrides(const SearchSpace& space, const SearchRow& row, int64_t gpus) {
  std::vector<std::string> overrides;
  int64_t tp = 1, micro_batch = 1;
  for (size_t a = 0; a < space.axes.size(); ++a) {
    const std::string& key = space.axes[a].key;
    const std::string& value = row.values[a];
    if (key == "hardware.gpu") overrides.push_back("hardware.gpu=\"" + value + "\"");
    else if (key == "hardware.count") gpus = std::stoll(value);
    else if (key == "tensor-parallel.size") overrides.push_back("strategy.1.size=" + value), tp = std::stoll(value);
    else if (key == "zero.stage") overrides.push_back("strategy.3.stage=" + value);
    else if (key == "recompute.policy") overrides.push_back("strategy.4.policy=\"" + value + "\"");
    else if (key == "batch.micro_batch") overrides.push_back("batch.micro_batch=" + value), micro_batch = std::stoll(value);
  }
  overrides.push_back("hardware.count=" + std::to_string(gpus));
  overrides.push_back("strategy.2.size=" + std::to_string(gpus / tp));
  overrides.push_back("batch.grad_accum=" + std::to_string(64 / (micro_batch * (gpus / tp))));
  return overrides;
}

TEST(Search, HardwareAxesEqualFreshEvaluations) {
  const std::string file = own_file("hardware");
  std::ofstream(file) << with_axes(kHardwareAxes);
  const Scenario scenario = load_scenario(file, catalog());
  const Sweep s{scenario, read_search_space(file, scenario, builtin_plugins(), catalog())};
  ASSERT_EQ(s.space.combinations, 32u);
  // The hardware axes vary slowest, in name order: count, then gpu.
  ASSERT_EQ(s.space.axes[0].key, "hardware.count");
  ASSERT_EQ(s.space.axes[1].key, "hardware.gpu");
  ASSERT_EQ(s.space.hardware.size(), 4u);
  EXPECT_EQ(s.space.per_hardware, 8u);
  const std::vector<SearchRow> rows = rows_of(s, 2);
  ASSERT_EQ(rows.size(), 32u);
  size_t fitting = 0, not_fitting = 0;
  for (const SearchRow& row : rows) {
    const Scenario fresh_scenario = load_scenario(file, catalog(), row_overrides(s.space, row, 8));
    Estimator fresh(fresh_scenario, builtin_plugins());
    const Breakdown& b = fresh.evaluate();
    EXPECT_EQ(row.peak_bytes, b.peak) << row.index;
    EXPECT_DOUBLE_EQ(row.step_seconds, b.time.seconds) << row.index;
    EXPECT_DOUBLE_EQ(row.mfu, b.time.mfu) << row.index;
    EXPECT_EQ(row.status == SearchRow::Status::fits, fresh.fits()) << row.index;
    // The catalog's CUDA totals (cuda_total_gib): 79.11 GiB for the H100 80GB, 39.39 for the A100 40GB
    // (memory fraction 1), each llround(GiB x 2^30).
    EXPECT_EQ(row.capacity_bytes, row.values[1] == "h100-sxm-80gb" ? 84'943'715'697ull : 42'294'690'447ull)
        << row.index;
    // Data parallelism fills what tensor parallelism leaves of the row's count.
    EXPECT_EQ(row.fill_value, std::stoll(row.values[0]) / std::stoll(row.values[2])) << row.index;
    fitting += row.status == SearchRow::Status::fits;
    not_fitting += row.status == SearchRow::Status::does_not_fit;
  }
  // Both verdicts occur: ZeRO-1 at TP 1 holds 16 bytes per parameter of 6.74e9 (108 GB, over both GPUs).
  EXPECT_GT(fitting, 0u);
  EXPECT_GT(not_fitting, 0u);
  // The same layout is slower on the A100 (312 dense bf16 TFLOPS against the H100's 989.4).
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].values[1] == "h100-sxm-80gb") {
      EXPECT_LT(rows[i].step_seconds, rows[i + 8].step_seconds) << i;
    }
  }
}

// The cost objective with [budget]: each row's run cost is the fresh evaluation's time.budget.usd
// (run_budget), fitting rows are ranked by it, and the price table compares GPU types.
TEST(Search, CostObjectiveEqualsTheRunBudget) {
  const std::string file = own_file("cost");
  std::ofstream(file) << with_axes(kHardwareAxes, "objective = \"cost\"\n[search.usd_per_gpu_hour]\n"
                                                  "\"h100-sxm-80gb\" = 2.0\n\"a100-sxm-40gb\" = 1.0\n") +
                             "[budget]\ntokens = 1e12\nusd_per_gpu_hour = 3.0\n";
  const Scenario scenario = load_scenario(file, catalog());
  const Sweep s{scenario, read_search_space(file, scenario, builtin_plugins(), catalog())};
  ASSERT_TRUE(s.space.priced);
  SearchSummary summary;
  const std::vector<SearchRow> rows = rows_of(s, 2, 0, 1, &summary);
  std::vector<SearchRow> fitting;
  for (const SearchRow& row : rows) {
    if (row.status == SearchRow::Status::invalid) continue;
    // The table's price wins over [budget]'s for the GPUs it names.
    const double price = row.values[1] == "h100-sxm-80gb" ? 2.0 : 1.0;
    EXPECT_EQ(row.usd_per_gpu_hour, price) << row.index;
    const Scenario fresh_scenario = load_scenario(file, catalog(), row_overrides(s.space, row, 8));
    Estimator fresh(fresh_scenario, builtin_plugins());
    fresh.evaluate();
    Estimate estimate = fresh.estimate();
    estimate.scenario.usd_per_gpu_hour = price;
    const RunBudget budget = run_budget(estimate);
    EXPECT_DOUBLE_EQ(row.run_usd, budget.usd) << row.index;
    // By hand: 1e12 tokens / tokens per second / 3600 s = hours; x GPUs x price.
    const double gpus = static_cast<double>(std::stoll(row.values[0]));
    EXPECT_NEAR(row.run_usd, 1e12 / row.tokens_per_second / 3600 * gpus * price, 1e-9 * row.run_usd) << row.index;
    EXPECT_NEAR(row.usd_per_million_tokens, row.run_usd / 1e6, 1e-12 * row.run_usd) << row.index;
    if (row.status == SearchRow::Status::fits) fitting.push_back(row);
  }
  std::sort(fitting.begin(), fitting.end(), [](const SearchRow& a, const SearchRow& b) {
    return a.usd_per_million_tokens != b.usd_per_million_tokens ? a.usd_per_million_tokens < b.usd_per_million_tokens
                                                                : a.step_seconds != b.step_seconds
                                                                      ? a.step_seconds < b.step_seconds
                                                                      : a.peak_bytes != b.peak_bytes ? a.peak_bytes < b.peak_bytes
                                                                                                     : a.index < b.index;
  });
  ASSERT_EQ(summary.best.size(), std::min<size_t>(5, fitting.size()));
  for (size_t i = 0; i < summary.best.size(); ++i) EXPECT_EQ(summary.best[i].index, fitting[i].index) << i;
}

// --merge of the CSV parts (cost columns included) gives exactly the unsharded rows and ranking.
TEST(Search, MergedCsvPartsEqualTheWholeSweep) {
  const std::string file = own_file("merge");
  std::ofstream(file) << with_axes(kHardwareAxes, "objective = \"cost\"\n[search.usd_per_gpu_hour]\n"
                                                  "\"h100-sxm-80gb\" = 2.0\n\"a100-sxm-40gb\" = 1.0\n");
  const Scenario scenario = load_scenario(file, catalog());
  const Sweep s{scenario, read_search_space(file, scenario, builtin_plugins(), catalog())};
  SearchSummary whole_summary;
  const std::vector<SearchRow> whole = rows_of(s, 1, 0, 1, &whole_summary);
  const std::string header = search_csv_header(s.space);
  EXPECT_EQ(header.substr(header.size() - 54), "reason,usd_per_gpu_hour,usd_per_million_tokens,run_usd");
  std::vector<SearchRow> merged;
  for (uint64_t shard = 0; shard < 3; ++shard) {
    const std::string part = own_file("merge-part-" + std::to_string(shard)) + ".csv";
    {
      std::ofstream out(part);
      out << header << "\n";
      for (const SearchRow& row : rows_of(s, 2, shard, 3)) out << search_csv_line(row) << "\n";
    }
    for (SearchRow& row : read_search_csv(part, header)) merged.push_back(std::move(row));
  }
  std::sort(merged.begin(), merged.end(), [](const SearchRow& a, const SearchRow& b) { return a.index < b.index; });
  ASSERT_EQ(merged.size(), whole.size());
  SearchRanking ranking(s.space.objective, s.space.top);
  for (size_t i = 0; i < whole.size(); ++i) {
    EXPECT_EQ(search_csv_line(merged[i]), search_csv_line(whole[i])) << i;
    EXPECT_EQ(merged[i].usd_per_million_tokens, whole[i].usd_per_million_tokens) << i;
    ranking.add(merged[i]);
  }
  const SearchSummary merged_summary = ranking.summary();
  ASSERT_EQ(merged_summary.best.size(), whole_summary.best.size());
  for (size_t i = 0; i < whole_summary.best.size(); ++i)
    EXPECT_EQ(merged_summary.best[i].index, whole_summary.best[i].index) << i;
  ASSERT_EQ(merged_summary.pareto.size(), whole_summary.pareto.size());
  for (size_t i = 0; i < whole_summary.pareto.size(); ++i)
    EXPECT_EQ(merged_summary.pareto[i].index, whole_summary.pareto[i].index) << i;
}

// A part written before the cost columns were appended (its header and rows end at `reason`)
// still merges: its rows read as unpriced, 0 in the cost columns, as an unpriced search writes them.
TEST(Search, CsvPartsWithoutCostColumnsStillMerge) {
  const std::string file = own_file("merge-before-cost");
  std::ofstream(file) << with_axes(kHardwareAxes, "");
  const Scenario scenario = load_scenario(file, catalog());
  const Sweep s{scenario, read_search_space(file, scenario, builtin_plugins(), catalog())};
  const std::vector<SearchRow> whole = rows_of(s, 1, 0, 1);
  const std::string header = search_csv_header(s.space);
  const std::string cost = ",usd_per_gpu_hour,usd_per_million_tokens,run_usd";
  ASSERT_EQ(header.substr(header.size() - cost.size()), cost);
  const std::string part = own_file("merge-before-cost-part") + ".csv";
  {
    std::ofstream out(part);
    out << header.substr(0, header.size() - cost.size()) << "\n";
    for (const SearchRow& row : whole) {
      ASSERT_EQ(row.usd_per_gpu_hour, 0.0);  // no price anywhere in this search
      const std::string line = search_csv_line(row);
      out << line.substr(0, line.rfind(',', line.rfind(',', line.rfind(',') - 1) - 1)) << "\n";
    }
  }
  const std::vector<SearchRow> merged = read_search_csv(part, header);
  ASSERT_EQ(merged.size(), whole.size());
  for (size_t i = 0; i < whole.size(); ++i) EXPECT_EQ(search_csv_line(merged[i]), search_csv_line(whole[i])) << i;
  // A row with the old field count under the new header is still refused.
  std::ofstream(part) << header << "\n" << "0,1\n";
  EXPECT_THROW(read_search_csv(part, header), Error);
}

TEST(Search, HardwareAndCostErrors) {
  const std::string file = own_file("hardware-errors");
  auto error_of = [&](const std::string& text) {
    std::ofstream(file) << text;
    try {
      const Scenario scenario = load_scenario(file, catalog());
      read_search_space(file, scenario, builtin_plugins(), catalog());
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  // An unknown GPU, at its value in [search.axes] (the scenario's line 37, the second value's quote).
  std::string axes = kHardwareAxes;
  axes.replace(axes.find("a100-sxm-40gb"), 13, "a100-sxm-40g");
  std::string error = error_of(with_axes(axes));
  EXPECT_NE(error.find(file + ":37:36: error: [search.axes] \"hardware.gpu\" lists 'a100-sxm-40g', which names no "
                              "GPU in the catalog. Did you mean 'a100-sxm-40gb'"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("Known GPUs: a100-sxm-40gb, a100-sxm-80gb, "), std::string::npos) << error;
  // The cost objective without a price says which key to add.
  error = error_of(with_axes(kHardwareAxes, "objective = \"cost\"\n"));
  EXPECT_NE(error.find(":36:13: error: in [search], 'objective' = \"cost\" needs the price of a GPU-hour of h100-sxm-80gb: add a table "
                       "[search.usd_per_gpu_hour] with your price per GPU type (\"h100-sxm-80gb\" = USD per GPU-hour), "
                       "or usd_per_gpu_hour to [budget]"),
            std::string::npos)
      << error;
  // A price table that misses one GPU of the axis names that one.
  error = error_of(with_axes(kHardwareAxes, "objective = \"cost\"\n[search.usd_per_gpu_hour]\n\"h100-sxm-80gb\" = 2.0\n"));
  EXPECT_NE(error.find("needs the price of a GPU-hour of a100-sxm-40gb"), std::string::npos) << error;
  // [search] gpus and a count axis both give the job's GPUs.
  error = error_of(with_axes(kHardwareAxes, "gpus = 8\n"));
  EXPECT_NE(error.find("and the axis \"hardware.count\" both give the job's GPUs"), std::string::npos) << error;
  // Only gpu and count of [hardware] are axes.
  error = error_of(with_axes("[search.axes]\n\"hardware.memory_gib\" = [40, 80]\n"));
  EXPECT_NE(error.find("of [hardware] only gpu and count are searched"), std::string::npos) << error;
  // A CUDA total the scenario measured on one GPU would stand for every GPU of the axis: refused.
  std::string measured = with_axes(kHardwareAxes);
  measured.replace(measured.find("count = 8\n"), 10, "count = 8\ncuda_total_gib = 79.19\n");
  error = error_of(measured);
  EXPECT_NE(error.find("[search.axes] \"hardware.gpu\": the scenario gives [hardware] cuda_total_gib (" + file),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("remove cuda_total_gib (or the axis)"), std::string::npos) << error;
}

// explain's layouts: Llama-2-70B on 128 H100s at TP 1 x PP 1 x DP 128 (micro-batch 1, grad_accum 8:
// a global batch of 1024) does not fit. The plugins declare tensor-parallel.size and
// pipeline-parallel.size layout sizes ("@layout") and data-parallel.size the fill ("@fill"); 128 = 2^7
// has 8 divisors, so 8 x 8 = 64 size pairs, of which 34 are valid layouts (below). Brute force: every (t, p) with t x p dividing 128,
// data parallelism 128 / (t x p) and grad_accum 1024 / (128 / (t x p)), evaluated fresh with --set;
// explain lists exactly those that fit, with their peak and step time, fastest first.
TEST(Explain, LayoutsAreTheFittingFreshLayoutsInOrderOfTime) {
  const std::string file = source_dir() + "/examples/search-llama2-70b-h100.toml";
  const std::vector<std::string> base{"strategy.1.size=1", "strategy.2.size=1", "strategy.3.size=128",
                                      "batch.grad_accum=8"};
  const Scenario scenario = load_scenario(file, catalog(), base);
  const Explanation e = explain(scenario, builtin_plugins());
  ASSERT_FALSE(e.fits);
  EXPECT_EQ(e.layout_gpus, 128);
  // Of the 8 x 8 size pairs, 36 have a product dividing 128 (2^a x 2^b, a + b <= 7); two of those are
  // refused by their plugins: tensor 128 does not divide Llama-2-70B's 64 heads, pipeline 128 exceeds its
  // 80 layers. 34 valid layouts.
  EXPECT_EQ(e.layouts_tried, 34u);
  std::map<std::string, std::pair<uint64_t, double>> fresh_fits;  // "t,p" -> peak, step
  for (int64_t t = 1; t <= 128; t *= 2)
    for (int64_t p = 1; t * p <= 128; p *= 2) {
      if (t == 1 && p == 1) continue;  // the scenario's own layout
      const int64_t d = 128 / (t * p);
      std::vector<std::string> overrides = base;
      overrides.push_back("strategy.1.size=" + std::to_string(t));
      overrides.push_back("strategy.2.size=" + std::to_string(p));
      overrides.push_back("strategy.3.size=" + std::to_string(d));
      overrides.push_back("batch.grad_accum=" + std::to_string(1024 / d));
      try {
        const Scenario changed = load_scenario(file, catalog(), overrides);
        Estimator fresh(changed, builtin_plugins());
        const Breakdown& b = fresh.evaluate();
        if (fresh.fits()) fresh_fits[std::to_string(t) + "," + std::to_string(p)] = {b.peak, b.time.seconds};
      } catch (const Error&) {
        // a size a plugin refuses (tensor 128 over 64 attention heads) is no layout
      }
    }
  ASSERT_EQ(e.layouts.size(), fresh_fits.size());
  ASSERT_FALSE(e.layouts.empty());
  for (size_t i = 0; i < e.layouts.size(); ++i) {
    const ExplainChange& layout = e.layouts[i];
    std::string t = "1", p = "1";
    for (const std::string& change : layout.changes) {
      const std::string to = change.substr(change.find("-> ") + 3);
      if (change.rfind("tensor-parallel.size: ", 0) == 0) t = to;
      if (change.rfind("pipeline-parallel.size: ", 0) == 0) p = to;
    }
    const auto fresh = fresh_fits.find(t + "," + p);
    ASSERT_NE(fresh, fresh_fits.end()) << t << "," << p;
    EXPECT_EQ(layout.peak_bytes, fresh->second.first) << t << "," << p;
    EXPECT_DOUBLE_EQ(layout.step_seconds, fresh->second.second) << t << "," << p;
    EXPECT_TRUE(layout.fits);
    if (i > 0) {
      EXPECT_LE(e.layouts[i - 1].step_seconds, layout.step_seconds) << i;
    }
  }
  // The fastest that fits the H100's 79.11 GiB (what CUDA reports): TP 4 x PP 8 x DP 4, grad_accum 1024 / 4 =
  // 256 (TP 4 x PP 4 x DP 8, 0.3 % faster, peaks at 79.54 GiB).
  EXPECT_EQ(e.layouts[0].changes,
            (std::vector<std::string>{"tensor-parallel.size: 1 -> 4", "pipeline-parallel.size: 1 -> 8",
                                      "data-parallel.size: 128 -> 4",
                                      "batch.grad_accum: 8 -> 256 (the same global batch)"}));
}

// The command lines: the cost columns of a priced search and explain's layouts, as docs/search.md shows them.
TEST(Search, CommandLinePrintsCostsAndLayouts) {
  const std::string examples = source_dir() + "/examples/";
  CommandResult result = run_cli("search " + examples + "search-llama2-70b-gpu-types.toml --threads 1 --top 1");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("best by the run's cost\n"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("MFU %  USD/GPU-h  USD/Mtok  run USD  pareto\n"), std::string::npos) << result.out;
  // Row 1 (docs/search.md, section 12): 64 H100s at 2.50 USD per GPU-hour.
  EXPECT_NE(result.out.find("  1  64  h100-sxm-80gb  8  none  4  1  2  512  74.06  "), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("  2.50  0.710  1419061  \n"), std::string::npos) << result.out;
  result = run_cli("explain " + examples + "search-llama2-70b-h100.toml --set strategy.1.size=1 --set strategy.2.size=1 "
                   "--set strategy.3.size=128 --set batch.grad_accum=8");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("layouts on the same 128 GPUs that fit (16 of 34 valid layouts tried; fastest first):\n  1. "
                            "tensor-parallel.size: 1 -> 4, pipeline-parallel.size: 1 -> 8, data-parallel.size: 128 -> 4, "
                            "batch.grad_accum: 8 -> 256 (the same global batch)\n"),
            std::string::npos)
      << result.out;
  // --shard K/3 then --merge of a priced search over GPU types: exactly the unsharded CSV (cost columns included).
  const std::string stem = own_file("cli-merge");
  const std::string file = examples + "search-llama2-70b-gpu-types.toml";
  std::string parts;
  for (int k = 1; k <= 3; ++k) {
    const std::string part = stem + "-part" + std::to_string(k) + ".csv";
    ASSERT_EQ(run_cli("search " + file + " --threads 1 --shard " + std::to_string(k) + "/3 --output " + part).exit_code, 0);
    parts += " " + part;
  }
  result = run_cli("search " + file + " --merge" + parts + " --output " + stem + "-merged.csv");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("  1  64  h100-sxm-80gb  8  none  4  1  2  512  74.06  "), std::string::npos) << result.out;
  ASSERT_EQ(run_cli("search " + file + " --threads 2 --output " + stem + "-whole.csv").exit_code, 0);
  auto text_of = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string whole = text_of(stem + "-whole.csv");
  EXPECT_EQ(std::count(whole.begin(), whole.end(), '\n'), 649);  // the header and 3 x 3 x 3 x 4 x 3 x 2 = 648 rows
  EXPECT_EQ(text_of(stem + "-merged.csv"), whole);
  // Without prices the search's tables keep their columns.
  result = run_cli("search " + examples + "search-llama2-70b-h100.toml --threads 1 --top 1");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("  grad_accum  peak GiB  step s  tokens/s  MFU %  pareto\n"), std::string::npos) << result.out;
}

TEST(Search, Errors) {
  const std::string file = own_file("bad-search");
  std::string text = kScenario;
  text.replace(text.find("\"zero.stage\""), 12, "\"zeros.stage\"");
  std::ofstream(file) << text;
  const Scenario scenario = load_scenario(file, catalog());
  try {
    read_search_space(file, scenario, builtin_plugins());
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("[search.axes] \"zeros.stage\": the scenario uses no plugin 'zeros'. Did you mean 'zero'?"),
              std::string::npos)
        << error.what();
  }
  // An option the plugin does not declare is refused at its key, not in every row.
  text = kScenario;
  text.replace(text.find("\"zero.stage\""), 12, "\"zero.stages\"");
  std::ofstream(file) << text;
  try {
    read_search_space(file, load_scenario(file, catalog()), builtin_plugins());
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("\"zero.stages\": plugin 'zero' has no option 'stages'. Did you mean 'stage'?"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace memplan::testing
