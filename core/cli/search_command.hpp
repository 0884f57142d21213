// `memplan search FILE`: every combination of the scenario's [search] axes,
// ranked (docs/search.md).
#pragma once

#include <string>
#include <vector>

namespace memplan::cli {

int search_command(const std::vector<std::string>& args);

}  // namespace memplan::cli
