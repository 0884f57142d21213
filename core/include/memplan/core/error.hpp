// Errors the core reports to the user: one paragraph that says what went
// wrong, where (scenario file:line:column or plugin library path) and how to fix it.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace memplan {

struct SourceLocation {
  std::string file;
  uint32_t line = 0;
  uint32_t column = 0;

  bool known() const { return line != 0; }
  // "file:line:column", or just "file" when the position is unknown.
  std::string str() const;
};

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The plan grew beyond 2^62 bytes (an item, or a per-GPU total): a size no
// machine has. The size solver takes it for "does not fit".
class PlanTooLargeError : public Error {
 public:
  using Error::Error;
};

// Throws Error("<file:line:column>: error: <message>").
[[noreturn]] void fail_at(const SourceLocation& where, const std::string& message);

}  // namespace memplan
