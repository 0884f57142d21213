// Configured plugins are reusable (issue 10): a configuration search changes
// a strategy's size with Estimator::set_option and set_gpu_count, without
// parsing the scenario again, and must get exactly what a scenario written
// with those values gives (the same command-line report, byte for byte).
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "memplan/core/error.hpp"
#include "memplan/core/estimator.hpp"
#include "memplan/core/limits.hpp"
#include "memplan/core/report.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

const std::string kExample = "/examples/llama2-70b-tp8-pp4-dp4-zero1.toml";

std::string json_report(Estimator& estimator) {
  const ScenarioLimits limits = evaluate_with_limits(estimator);
  std::ostringstream out;
  write_report(out, estimator, limits, ReportFormat::json);
  return out.str();
}

OptionValue integer_option(const std::string& key, int64_t value) {
  OptionValue option;
  option.key = key;
  option.type = OptionValue::Type::integer;
  option.integer = value;
  return option;
}

size_t plugin_index(const Estimator& estimator, const std::string& name) {
  const auto index = estimator.find_plugin(name);
  EXPECT_TRUE(index.has_value()) << name;
  return index.value_or(0);
}

struct Layout {
  int64_t tp, pp, dp, zero_stage;
};

// The example's strategies are, in file order, tensor-parallel (1),
// pipeline-parallel (2), data-parallel (3) and zero (4).
std::string fresh_report(const Layout& layout) {
  const Scenario scenario = load_scenario(
      source_dir() + kExample, catalog(),
      {"strategy.1.size=" + std::to_string(layout.tp), "strategy.2.size=" + std::to_string(layout.pp),
       "strategy.3.size=" + std::to_string(layout.dp), "strategy.4.stage=" + std::to_string(layout.zero_stage),
       "hardware.count=" + std::to_string(layout.tp * layout.pp * layout.dp)});
  Estimator estimator(scenario, builtin_plugins());
  return json_report(estimator);
}

TEST(reconfigure, ParallelSizesGiveWhatTheScenarioWithThoseSizesGives) {
  const Scenario scenario = load_scenario(source_dir() + kExample, catalog());
  Estimator estimator(scenario, builtin_plugins());
  const std::string original = json_report(estimator);
  const size_t tp = plugin_index(estimator, "tensor-parallel");
  const size_t pp = plugin_index(estimator, "pipeline-parallel");
  const size_t dp = plugin_index(estimator, "data-parallel");
  const size_t zero = plugin_index(estimator, "zero");
  for (const Layout& layout : {Layout{4, 4, 8, 1}, Layout{8, 2, 8, 2}, Layout{2, 8, 8, 3}, Layout{8, 4, 4, 1}}) {
    estimator.set_option(tp, integer_option("size", layout.tp));
    estimator.set_option(pp, integer_option("size", layout.pp));
    estimator.set_option(dp, integer_option("size", layout.dp));
    estimator.set_option(zero, integer_option("stage", layout.zero_stage));
    estimator.set_gpu_count(layout.tp * layout.pp * layout.dp);
    EXPECT_EQ(json_report(estimator), fresh_report(layout))
        << "tp " << layout.tp << " pp " << layout.pp << " dp " << layout.dp << " zero " << layout.zero_stage;
  }
  // Back where it started: the example's own report.
  EXPECT_EQ(json_report(estimator), original);
}

// A search keeps the estimates it ranks and prints them after the estimator
// is gone: an Estimate is a value, complete for every report.
TEST(reconfigure, EstimatesOutliveTheirEstimator) {
  const std::vector<Layout> layouts = {Layout{4, 4, 8, 1}, Layout{8, 2, 8, 3}};
  std::vector<std::pair<Estimate, ScenarioLimits>> kept;
  {
    const Scenario scenario = load_scenario(source_dir() + kExample, catalog());
    Estimator estimator(scenario, builtin_plugins());
    for (const Layout& layout : layouts) {
      estimator.set_option(plugin_index(estimator, "tensor-parallel"), integer_option("size", layout.tp));
      estimator.set_option(plugin_index(estimator, "pipeline-parallel"), integer_option("size", layout.pp));
      estimator.set_option(plugin_index(estimator, "data-parallel"), integer_option("size", layout.dp));
      estimator.set_option(plugin_index(estimator, "zero"), integer_option("stage", layout.zero_stage));
      estimator.set_gpu_count(layout.tp * layout.pp * layout.dp);
      const ScenarioLimits limits = evaluate_with_limits(estimator);
      kept.emplace_back(estimator.estimate(), limits);
    }
  }  // the scenario and the estimator are gone
  for (size_t i = 0; i < layouts.size(); ++i) {
    for (const ReportFormat format : {ReportFormat::json, ReportFormat::table, ReportFormat::csv}) {
      std::ostringstream out;
      write_report(out, kept[i].first, kept[i].second, format);
      if (format == ReportFormat::json) {
        EXPECT_EQ(out.str(), fresh_report(layouts[i]));
      }
      EXPECT_NE(out.str().find("llama2-70b-tp8-pp4-dp4-zero1"), std::string::npos);
    }
    EXPECT_EQ(kept[i].first.scenario.hardware.count, layouts[i].tp * layouts[i].pp * layouts[i].dp);
  }
}

// A sweep over micro-batch after a change resumes from a snapshot of the new
// configuration, not the old one.
TEST(reconfigure, IncrementalEvaluationAfterAChangeStartsAfresh) {
  const Scenario scenario = load_scenario(source_dir() + kExample, catalog());
  Estimator estimator(scenario, builtin_plugins());
  estimator.evaluate_at(1, 4096);
  estimator.evaluate_at(2, 4096);  // from the snapshot of TP 8
  estimator.set_option(plugin_index(estimator, "tensor-parallel"), integer_option("size", 4));
  estimator.set_option(plugin_index(estimator, "data-parallel"), integer_option("size", 8));
  const uint64_t peak = estimator.evaluate_at(2, 4096).peak;
  const uint64_t again = estimator.evaluate_at(2, 4096).peak;  // from the new snapshot
  const Scenario fresh = load_scenario(source_dir() + kExample, catalog(),
                                       {"strategy.1.size=4", "strategy.3.size=8", "batch.micro_batch=2"});
  Estimator expected(fresh, builtin_plugins());
  EXPECT_EQ(peak, expected.evaluate().peak);
  EXPECT_EQ(again, peak);
}

// Refusals read like the scenario's own errors, at the table's place in the
// file, and leave the plugin as it was.
TEST(reconfigure, RefusedValuesKeepThePluginAsItWas) {
  const Scenario scenario = load_scenario(source_dir() + kExample, catalog());
  Estimator estimator(scenario, builtin_plugins());
  const uint64_t peak = estimator.evaluate().peak;
  const size_t tp = plugin_index(estimator, "tensor-parallel");
  const std::string file = source_dir() + kExample;

  OptionValue text = integer_option("size", 0);
  text.type = OptionValue::Type::string;
  text.text = "eight";
  try {
    estimator.set_option(tp, text);
    ADD_FAILURE() << "a string size was accepted";
  } catch (const Error& error) {
    // `size = 8` stands at line 54, its value at column 8.
    EXPECT_EQ(std::string(error.what()).rfind(file + ":54:8: error: in [[strategy]] #1, 'size' of", 0), 0u)
        << error.what();
  }
  try {
    estimator.set_option(tp, integer_option("sise", 4));
    ADD_FAILURE() << "an undeclared key was accepted";
  } catch (const Error& error) {
    // A new key is placed at the table, `[[strategy]]` at line 52.
    EXPECT_NE(std::string(error.what()).find(file + ":52:1: error: unknown key 'sise' in [[strategy]] #1"),
              std::string::npos)
        << error.what();
  }
  EXPECT_THROW(estimator.set_option(tp, integer_option("size", 0)), Error);  // create() refuses it
  EXPECT_THROW(estimator.set_option(99, integer_option("size", 4)), Error);
  EXPECT_EQ(estimator.evaluate().peak, peak);

  estimator.set_gpu_count(64);  // TP8 x PP4 x DP4 is 128
  try {
    estimator.evaluate();
    ADD_FAILURE() << "a layout of 128 GPUs was accepted on 64";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("[hardware] count = 64 but the strategies lay the job out on 128 GPUs"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace memplan::testing
