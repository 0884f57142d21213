#include "memplan/core/estimate.hpp"

namespace memplan {

const std::string& Estimate::origin(const PlanItem& item) const {
  static const std::string model = "model";
  if (item.added_by < 0 || static_cast<size_t>(item.added_by) >= plugins.size()) return model;
  return plugins[static_cast<size_t>(item.added_by)].name;
}

const std::string& Estimate::origin(const WorkRecord& work) const {
  static const std::string host = "memplan";
  if (work.added_by < 0 || static_cast<size_t>(work.added_by) >= plugins.size()) return host;
  return plugins[static_cast<size_t>(work.added_by)].name;
}

bool Estimate::fits() const { return breakdown.peak <= breakdown.capacity(scenario.hardware.memory_bytes); }

RunBudget run_budget(const Estimate& estimate) {
  RunBudget budget;
  const StepTime& time = estimate.breakdown.time;
  if (estimate.scenario.budget_tokens <= 0 || time.status != TimeStatus::timed || !(time.tokens_per_second > 0))
    return budget;
  budget.tokens = estimate.scenario.budget_tokens;
  budget.hours = budget.tokens / time.tokens_per_second / 3600;
  budget.gpu_hours = budget.hours * static_cast<double>(estimate.breakdown.world_size);
  budget.usd = budget.gpu_hours * estimate.scenario.usd_per_gpu_hour;
  return budget;
}

std::string item_display_name(const PlanItem& item) {
  if (item.layer < 0) return std::string(item.name_view());
  std::string name = "layers." + std::to_string(item.layer);
  if (item.count > 1) name += "-" + std::to_string(item.layer + static_cast<int64_t>(item.count) - 1);
  return name + "." + std::string(item.name_view());
}

}  // namespace memplan
