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

std::string item_display_name(const PlanItem& item) {
  if (item.layer < 0) return std::string(item.name_view());
  std::string name = "layers." + std::to_string(item.layer);
  if (item.count > 1) name += "-" + std::to_string(item.layer + static_cast<int64_t>(item.count) - 1);
  return name + "." + std::string(item.name_view());
}

}  // namespace memplan
