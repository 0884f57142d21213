#include "defect.hpp"

#include <cstdio>
#include <cstdlib>

namespace memplan::fuzz {

void defect(std::string_view what) {
  std::fprintf(stderr, "memplan fuzz target: defect: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

}  // namespace memplan::fuzz
