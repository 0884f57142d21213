// One evaluation's result as a value: everything a report reads, owned, so it
// outlives the estimator that computed it and the configuration it was at (a
// search keeps the configurations it ranks and prints them afterwards).
// Estimator::estimate() makes one after an evaluation; the reports take it.
// Making one allocates (the plan and the details are copied), so the
// evaluation loop itself returns only the Breakdown, which does not.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "memplan/core/breakdown.hpp"
#include "memplan/core/plan.hpp"
#include "memplan/core/scenario.hpp"

namespace memplan {

// A plugin that took part, as the reports list it.
struct PluginUse {
  int32_t kind = 0;  // MEMPLAN_KIND_*
  std::string name;
  std::string version;
  std::string library;  // the file it was loaded from
};

struct Estimate {
  // The scenario as evaluated: options changed with Estimator::set_option and
  // the GPU count of set_gpu_count are in its components and hardware.
  Scenario scenario;
  Breakdown breakdown;
  int64_t micro_batch = 0;
  int64_t seq_len = 0;
  std::vector<PlanItem> items;      // the plan; item.added_by indexes `plugins`
  std::vector<WorkRecord> work;     // the step's work (ABI 1.2); breakdown.time.cause indexes it
  std::vector<PluginUse> plugins;   // in phase order
  // The "report." attributes, prefix removed, values as JSON.
  std::vector<std::pair<std::string, std::string>> details;

  // Who added an item: a plugin name, or "model" for the parameter inventory.
  const std::string& origin(const PlanItem& item) const;
  const std::string& origin(const WorkRecord& work) const;
  // Whether the peak fits the GPU (times the memory fraction); false without a GPU.
  bool fits() const;
};

// A training run of [budget] tokens at the step's throughput: its wall time,
// GPU-hours (x the job's GPUs) and cost (x [budget] usd_per_gpu_hour); zero
// where the scenario gives no budget or the step is not timed.
struct RunBudget {
  double tokens = 0;
  double hours = 0;
  double gpu_hours = 0;
  double usd = 0;
};
RunBudget run_budget(const Estimate& estimate);
// The same for `tokens` at `tokens_per_second` on `world_size` GPUs at `usd_per_gpu_hour` (the search
// prices each row with it); zero where tokens or the throughput is not positive.
RunBudget run_budget(double tokens, double tokens_per_second, int64_t world_size, double usd_per_gpu_hour);

// "layers.0-31.attn.q" for layered items, the item's own name otherwise.
std::string item_display_name(const PlanItem& item);

}  // namespace memplan
