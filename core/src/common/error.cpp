#include "memplan/core/error.hpp"

namespace memplan {

std::string SourceLocation::str() const {
  if (!known()) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

void fail_at(const SourceLocation& where, const std::string& message) {
  throw Error(where.str() + ": error: " + message);
}

}  // namespace memplan
