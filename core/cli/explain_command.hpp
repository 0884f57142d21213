// `memplan explain FILE`: what fills the GPU of a job that does not fit and
// the smallest changes that make it fit (core/include/memplan/core/explain.hpp).
#pragma once

#include <string>
#include <vector>

namespace memplan::cli {

int explain_command(const std::vector<std::string>& args);

}  // namespace memplan::cli
