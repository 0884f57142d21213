// How the CLI writes a line that holds text read from files, manifests,
// plugins or paths: through terminal_text(), so no escape sequence in it
// reaches the terminal.
#pragma once

#include <ostream>
#include <string>

#include "memplan/core/text.hpp"

namespace memplan::cli {

inline void print_line(std::ostream& out, const std::string& line) { out << terminal_text(line) << "\n"; }

}  // namespace memplan::cli
