// `memplan search` (run_search): its rows against fresh evaluations of each
// configuration (brute force), shards against the whole sweep, the ranking
// and the Pareto front.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
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
    if (i > 0 && fix.changes.size() == e.fixes[i - 1].changes.size())
      EXPECT_LE(e.fixes[i - 1].step_seconds, fix.step_seconds);
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
