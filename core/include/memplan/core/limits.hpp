// The largest micro-batch (concurrent sequences) or sequence length that fits.
// Plugin-agnostic: it re-evaluates the configured scenario at other sizes and
// searches for the boundary, relying only on memory not shrinking as a size
// grows. The answer n fits and n + 1 does not, so with paged KV blocks the
// length found is the last token of a block.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "memplan/core/estimator.hpp"

namespace memplan {

enum class SizeVariable { micro_batch, seq_len };

struct SizeLimit {
  SizeVariable variable = SizeVariable::micro_batch;
  int64_t value = 0;        // largest that fits; 0 when even 1 does not
  int64_t other = 0;        // the fixed value of the other variable
  std::string binding;      // the component that grows most from value to value + 1, or what caps the search
  bool capped = false;      // stopped by a cap (the model's max_context, or the search's upper bound)
  bool unbounded = false;   // no memory grows with the variable: there is no limit to report
  uint64_t peak = 0;        // peak at `value` (at 1 when value is 0)
  uint64_t capacity = 0;    // what the peak is compared with
};

std::string_view variable_name(SizeVariable variable);  // "micro_batch", "seq_len"

// Searches the largest value of `variable` that fits with the other held at
// `other`. Leaves the estimator evaluated at an unspecified size: re-evaluate
// before reporting. Throws Error when the scenario names no GPU.
SizeLimit solve_limit(Estimator& estimator, SizeVariable variable, int64_t other);

// What `memplan run` reports: for "max" scenarios the solved size; for
// inference scenarios with a GPU both limits. Leaves the estimator evaluated
// at the scenario's size (the solved one when it asked for "max").
struct ScenarioLimits {
  std::optional<SizeLimit> solved;         // the scenario's "max"
  std::optional<SizeLimit> max_micro_batch;
  std::optional<SizeLimit> max_seq_len;
};
ScenarioLimits evaluate_with_limits(Estimator& estimator);

}  // namespace memplan
