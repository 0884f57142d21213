// Counts heap allocations made through operator new (every std::vector,
// std::string and new-expression, in the executable and in the plugin
// libraries it loads, which bind to the executable's operator new). Linking
// allocation_counter.cpp into an executable replaces its global operator new
// and delete; used where "no allocation per evaluation" is checked (the test
// no_allocation_test.cpp) and reported (memplan_bench).
#pragma once

#include <cstdint>

namespace memplan::testing {

// Allocations so far in this process (all threads).
uint64_t allocation_count();

}  // namespace memplan::testing
