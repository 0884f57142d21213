// "No allocation per evaluation" (issue 10): once an estimator has evaluated
// a configuration, evaluating it again, or sweeping micro-batch and sequence
// length from the snapshot, allocates nothing, in the host or in any built-in
// plugin of the three benchmark examples and every other example. Its own
// executable: it replaces the global operator new to count
// (tests/support/allocation_counter.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "allocation_counter.hpp"
#include "memplan/core/error.hpp"
#include "memplan/core/estimator.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> examples() {
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(fs::path(source_dir()) / "examples"))
    if (entry.path().extension() == ".toml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(no_allocation, WarmEvaluationsOfEveryExample) {
  size_t evaluated = 0;
  for (const fs::path& file : examples()) {
    const Scenario scenario = load_scenario(file.string(), catalog());
    Estimator estimator(scenario, builtin_plugins());
    try {
      estimator.evaluate();  // checked after each plugin
      estimator.evaluate();  // the steady state's first run
    } catch (const Error&) {
      continue;  // an example that stops with an error (none today) has no steady state
    }
    const uint64_t before = allocation_count();
    for (int run = 0; run < 20; ++run) estimator.evaluate();
    EXPECT_EQ(allocation_count() - before, 0u) << file.filename() << ": allocations in 20 warm evaluations";
    ++evaluated;
  }
  EXPECT_GE(evaluated, 40u);  // the 41 examples of the repository
}

TEST(no_allocation, WarmSweepsOverMicroBatch) {
  for (const char* name : {"llama2-70b-tp8-pp4-dp4-zero1", "mixtral-8x7b-tp2-pp4-dp8-zero1",
                           "infer-llama-3.1-70b-bf16-tp4"}) {
    const Scenario scenario = load_scenario(source_dir() + "/examples/" + name + ".toml", catalog());
    Estimator estimator(scenario, builtin_plugins());
    // The first pass over 1..8 sizes every buffer for the largest batch.
    for (int64_t micro_batch = 1; micro_batch <= 8; ++micro_batch) estimator.evaluate_at(micro_batch, scenario.seq_len);
    const uint64_t before = allocation_count();
    for (int64_t micro_batch = 1; micro_batch <= 8; ++micro_batch) estimator.evaluate_at(micro_batch, scenario.seq_len);
    EXPECT_EQ(allocation_count() - before, 0u) << name;
  }
}

// The counter counts: a guard against a test that cannot fail.
TEST(no_allocation, CounterSeesAnAllocation) {
  const uint64_t before = allocation_count();
  auto* vector = new std::vector<int>(100);
  EXPECT_GE(allocation_count() - before, 2u);  // the vector object and its array
  delete vector;
}

}  // namespace
}  // namespace memplan::testing
