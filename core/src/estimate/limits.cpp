#include "memplan/core/limits.hpp"

#include <algorithm>

#include "memplan/core/breakdown.hpp"

namespace memplan {
namespace {

// Far above any real batch or context; the search stops here.
constexpr int64_t kSearchCeiling = int64_t{1} << 31;

int64_t cap_for(const Estimator& estimator, SizeVariable variable) {
  if (variable == SizeVariable::seq_len && estimator.scenario().model.max_context > 0)
    return estimator.scenario().model.max_context;
  return kSearchCeiling;
}

const Breakdown& evaluate(Estimator& estimator, SizeVariable variable, int64_t value, int64_t other) {
  return variable == SizeVariable::micro_batch ? estimator.evaluate_at(value, other)
                                               : estimator.evaluate_at(other, value);
}

// The component that grows most between two evaluations: what one more
// sequence or token costs most of.
// The component that grows most from `fits` to `exceeds`. The overhead role
// follows the others (the allocator's rounding and reserve of the tensors that
// grew), so it is named only when nothing else grows.
std::string growing_component(const Breakdown& fits, const Breakdown& exceeds) {
  int32_t best = -1;
  uint64_t best_growth = 0;
  for (int32_t role = 0; role < MEMPLAN_ROLE_COUNT; ++role) {
    if (role == MEMPLAN_ROLE_OVERHEAD) continue;
    const uint64_t a = fits.components[static_cast<size_t>(role)];
    const uint64_t b = exceeds.components[static_cast<size_t>(role)];
    if (b > a && b - a > best_growth) {
      best_growth = b - a;
      best = role;
    }
  }
  if (best < 0 && exceeds.components[MEMPLAN_ROLE_OVERHEAD] > fits.components[MEMPLAN_ROLE_OVERHEAD])
    best = MEMPLAN_ROLE_OVERHEAD;
  return best < 0 ? std::string("peak") : std::string(role_name(best));
}

std::string largest_component(const Breakdown& breakdown) {
  const auto& c = breakdown.components;
  return std::string(role_name(static_cast<int32_t>(std::max_element(c.begin(), c.end()) - c.begin())));
}

}  // namespace

std::string_view variable_name(SizeVariable variable) {
  return variable == SizeVariable::micro_batch ? "micro_batch" : "seq_len";
}

SizeLimit solve_limit(Estimator& estimator, SizeVariable variable, int64_t other) {
  const Scenario& scenario = estimator.scenario();
  const uint64_t gpu_memory = scenario.hardware.memory_bytes;
  if (gpu_memory == 0)
    fail_at(scenario.max_location.known() ? scenario.max_location : scenario.model_location,
            "finding the largest " + std::string(variable_name(variable)) +
                " that fits needs the GPU's memory; set [hardware] gpu or memory_gib");
  SizeLimit limit;
  limit.variable = variable;
  limit.other = other;
  auto fits_at = [&](int64_t value) {
    try {
      const Breakdown& b = evaluate(estimator, variable, value, other);
      return b.peak <= b.capacity(gpu_memory);
    } catch (const PlanTooLargeError&) {
      return false;  // beyond any memory there is
    }
  };

  const int64_t cap = cap_for(estimator, variable);
  if (!fits_at(1)) {
    const Breakdown& at_one = estimator.breakdown();
    limit.peak = at_one.peak;
    limit.capacity = at_one.capacity(gpu_memory);
    limit.binding = largest_component(at_one);  // nothing fits: name what is biggest already
    return limit;
  }
  const uint64_t peak_at_one = estimator.breakdown().peak;
  // Double until it stops fitting (or reaches the cap), then bisect: `low`
  // always fits, `high` never does (or is one past the cap).
  int64_t low = 1;
  int64_t high = 2;
  while (high <= cap && fits_at(high)) {
    low = high;
    high = high > cap / 2 ? cap + 1 : high * 2;
  }
  high = std::min(high, cap + 1);
  while (high - low > 1) {
    const int64_t middle = low + (high - low) / 2;
    (fits_at(middle) ? low : high) = middle;
  }
  limit.value = low;
  const Breakdown at_value = evaluate(estimator, variable, low, other);
  limit.peak = at_value.peak;
  limit.capacity = at_value.capacity(gpu_memory);
  if (low == cap) {
    limit.capped = true;
    limit.binding = cap == kSearchCeiling ? "search ceiling" : "model max_context";
    // Reaching the ceiling with the same peak as at 1: nothing depends on the
    // variable (e.g. weights only), so no number would mean anything.
    if (cap == kSearchCeiling && limit.peak == peak_at_one) {
      limit.unbounded = true;
      limit.binding = "no component grows with " + std::string(variable_name(variable));
    }
    return limit;
  }
  limit.binding = growing_component(at_value, evaluate(estimator, variable, low + 1, other));
  return limit;
}

ScenarioLimits evaluate_with_limits(Estimator& estimator) {
  const Scenario& scenario = estimator.scenario();
  ScenarioLimits limits;
  int64_t micro_batch = scenario.micro_batch;
  int64_t seq_len = scenario.seq_len;
  if (scenario.micro_batch_max) {
    limits.solved = solve_limit(estimator, SizeVariable::micro_batch, seq_len);
    micro_batch = std::max<int64_t>(1, limits.solved->value);
  } else if (scenario.seq_len_max) {
    limits.solved = solve_limit(estimator, SizeVariable::seq_len, micro_batch);
    seq_len = std::max<int64_t>(1, limits.solved->value);
  }
  // Inference always answers both serving questions; the one a "max" already
  // solved is that answer.
  if (scenario.mode == MEMPLAN_MODE_INFER && scenario.hardware.memory_bytes > 0 && seq_len > 0) {
    limits.max_micro_batch = scenario.micro_batch_max ? limits.solved
                                                      : solve_limit(estimator, SizeVariable::micro_batch, seq_len);
    limits.max_seq_len = scenario.seq_len_max ? limits.solved : solve_limit(estimator, SizeVariable::seq_len, micro_batch);
  }
  estimator.evaluate_at(micro_batch, seq_len);
  return limits;
}

}  // namespace memplan
