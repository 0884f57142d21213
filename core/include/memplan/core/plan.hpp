// The memory plan: a flat table of items that plugins transform in phases.
// Items are plain values with an inline name so that evaluating a scenario
// allocates nothing once the table has grown to its working size.
#pragma once

#include <memplan/plugin_abi.h>

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace memplan {

constexpr size_t kMaxItemName = 63;

struct PlanItem {
  std::array<char, kMaxItemName + 1> name{};
  int32_t role = MEMPLAN_ROLE_WEIGHTS;
  int32_t lifetime = MEMPLAN_LIFETIME_PERSISTENT;
  int32_t device = MEMPLAN_DEVICE_GPU;
  int32_t param_class = MEMPLAN_CLASS_OTHER;
  int32_t layer = -1;
  uint32_t count = 1;
  uint32_t flags = 0;
  double elements = 0;
  double bytes_per_element = 0;
  int32_t added_by = -1;  // index of the plugin that added it; -1 for the model inventory

  std::string_view name_view() const { return std::string_view(name.data()); }
  void set_name(std::string_view text);  // truncation is the caller's check
  // ceil(elements * bytes_per_element) * count
  uint64_t bytes() const;
};

struct Plan {
  std::vector<PlanItem> items;
};

}  // namespace memplan
