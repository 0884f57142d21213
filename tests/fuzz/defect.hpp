// How a fuzz target reports an input that broke a rule every input must
// keep, beyond what the sanitizers check: an exception other than
// memplan::Error escaped, a report is not what it claims to be, a file
// changed when written and read again.
#pragma once

#include <exception>
#include <string>
#include <string_view>

#include "memplan/core/breakdown.hpp"
#include "memplan/core/error.hpp"

namespace memplan::fuzz {

// Prints `what` and aborts; libFuzzer records that as a crash and saves the input.
[[noreturn]] void defect(std::string_view what);

// A defect unless `value` is a finite number of at least 0; `what` names it in the report ("the estimate's ...").
void check_non_negative(double value, std::string_view what);
// The same for every figure of an estimate that is not a byte count: parameter counts, memory fraction, step time.
void check_breakdown(const memplan::Breakdown& breakdown);

// Runs `check` on one input: a memplan::Error is the refusal bad input should
// get (it says file:line:column and the fix); any other exception escaping is a defect.
template <typename Check>
void refusal_is_an_error(Check check, std::string_view text) {
  try {
    check(text);
  } catch (const memplan::Error&) {
  } catch (const std::exception& error) {
    defect(std::string("an exception that is not a memplan::Error escaped: ") + error.what());
  }
}

}  // namespace memplan::fuzz
