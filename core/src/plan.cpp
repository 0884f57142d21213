#include "memplan/core/plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace memplan {

void PlanItem::set_name(std::string_view text) {
  const size_t length = std::min(text.size(), kMaxItemName);
  std::memcpy(name.data(), text.data(), length);
  name[length] = '\0';
}

uint64_t PlanItem::bytes() const {
  // Fractional sizes (int4, block scales, shards) round up per instance:
  // an allocation is whole bytes.
  const double per_instance = std::ceil(elements * bytes_per_element);
  return static_cast<uint64_t>(per_instance) * count;
}

}  // namespace memplan
