// Incremental evaluation (Estimator::evaluate_at): a sweep over micro-batch
// and sequence length runs again only the plugins from the first one that
// reads them (memplan_plugin_descriptor.reads). Each step must give exactly
// what a fresh estimator gives at that point: this is the test of every
// plugin's `reads` declaration, over every example and validation scenario.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "memplan/core/error.hpp"
#include "memplan/core/estimator.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

namespace fs = std::filesystem;

// Everything an evaluation reports, as text: the breakdown, the details and the plan.
std::string outcome(const Estimator& estimator) {
  const Breakdown& b = estimator.breakdown();
  std::string text;
  for (uint64_t bytes : b.components) text += std::to_string(bytes) + " ";
  for (uint64_t bytes : b.cpu_components) text += std::to_string(bytes) + " ";
  for (const StepPeak& quantity : b.quantities) {
    for (uint64_t bytes : quantity.timeline) text += std::to_string(bytes) + " ";
    text += "peak " + std::to_string(quantity.peak) + " at " + std::to_string(quantity.peak_phase) + "; ";
  }
  text += "sum " + std::to_string(b.sum) + " params " + std::to_string(b.params_total) + " " +
          std::to_string(b.params_trainable) + " world " + std::to_string(b.world_size) + " fraction " +
          std::to_string(b.memory_fraction) + "\n";
  for (const auto& [key, value] : estimator.report_details()) text += key + "=" + value + "\n";
  for (const PlanItem& item : estimator.plan().items)
    text += Estimator::display_name(item) + " " + std::to_string(item.role) + " " + std::to_string(item.lifetime) +
            " " + std::to_string(item.bytes()) + " " + estimator.origin(item) + "\n";
  return text;
}

// What a fresh estimator says at (micro_batch, seq_len): its outcome or its error.
std::string fresh(const Scenario& scenario, int64_t micro_batch, int64_t seq_len) {
  Estimator estimator(scenario, builtin_plugins());
  try {
    estimator.evaluate_at(micro_batch, seq_len);  // its first call: every plugin runs
  } catch (const Error& error) {
    return std::string("error: ") + error.what();
  }
  return outcome(estimator);
}

std::vector<fs::path> scenario_files() {
  std::vector<fs::path> files;
  for (const char* folder : {"examples", "validation"})
    for (const fs::directory_entry& entry : fs::directory_iterator(fs::path(source_dir()) / folder))
      if (entry.path().extension() == ".toml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(IncrementalEvaluation, SweepsGiveWhatFreshEstimatorsGive) {
  const std::vector<std::pair<int64_t, int64_t>> steps{{1, 512}, {2, 512}, {2, 2048}, {4, 1024}, {1, 4096}, {3, 2048}};
  size_t resumed = 0;
  const std::vector<fs::path> files = scenario_files();
  ASSERT_GT(files.size(), 40u);
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.string());
    const Scenario scenario = load_scenario(file.string(), catalog());
    Estimator sweep(scenario, builtin_plugins());
    if (sweep.first_plugin_reading_batch() > 0) ++resumed;
    for (const auto& [micro_batch, seq_len] : steps) {
      SCOPED_TRACE("micro_batch " + std::to_string(micro_batch) + ", seq_len " + std::to_string(seq_len));
      std::string got;
      try {
        sweep.evaluate_at(micro_batch, seq_len);
        got = outcome(sweep);
      } catch (const Error& error) {
        got = std::string("error: ") + error.what();
      }
      EXPECT_EQ(got, fresh(scenario, micro_batch, seq_len));
    }
  }
  // The sweeps above exercise the resumed path: most scenarios start with
  // plugins that read neither micro_batch nor seq_len.
  EXPECT_GT(resumed, files.size() / 2);
}

}  // namespace
}  // namespace memplan::testing
