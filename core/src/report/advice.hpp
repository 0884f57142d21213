// "What to change if it does not fit": generic, role-based advice. The core
// knows roles, not plugins, so the advice names techniques, and the numbers
// say how much each component would have to shrink.
#pragma once

#include <string>
#include <vector>

#include "memplan/core/breakdown.hpp"

namespace memplan {

// `capacity`: the memory the peak must fit in (GPU memory x the memory fraction).
// `training`: the scenario trains (advice on activations differs for inference).
std::vector<std::string> advice_for(const Breakdown& breakdown, uint64_t capacity, bool training);

}  // namespace memplan
