// How a fuzz target reports an input that broke a rule every input must
// keep, beyond what the sanitizers check: an exception other than
// memplan::Error escaped, a report is not what it claims to be, a file
// changed when written and read again.
#pragma once

#include <string_view>

namespace memplan::fuzz {

// Prints `what` and aborts; libFuzzer records that as a crash and saves the input.
[[noreturn]] void defect(std::string_view what);

}  // namespace memplan::fuzz
