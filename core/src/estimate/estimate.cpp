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

RunBudget run_budget(double tokens, double tokens_per_second, int64_t world_size, double usd_per_gpu_hour) {
  RunBudget budget;
  if (!(tokens > 0) || !(tokens_per_second > 0)) return budget;
  budget.tokens = tokens;
  budget.hours = tokens / tokens_per_second / 3600;
  budget.gpu_hours = budget.hours * static_cast<double>(world_size);
  budget.usd = budget.gpu_hours * usd_per_gpu_hour;
  return budget;
}

RunBudget run_budget(const Estimate& estimate) {
  const StepTime& time = estimate.breakdown.time;
  if (time.status != TimeStatus::timed) return RunBudget{};
  return run_budget(estimate.scenario.budget_tokens, time.tokens_per_second, estimate.breakdown.world_size,
                    estimate.scenario.usd_per_gpu_hour);
}

std::string item_display_name(const PlanItem& item) {
  if (item.layer < 0) return std::string(item.name_view());
  std::string name = "layers." + std::to_string(item.layer);
  if (item.count > 1) name += "-" + std::to_string(item.layer + static_cast<int64_t>(item.count) - 1);
  return name + "." + std::string(item.name_view());
}

}  // namespace memplan
