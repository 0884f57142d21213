#include "defect.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace memplan::fuzz {

void defect(std::string_view what) {
  std::fprintf(stderr, "memplan fuzz target: defect: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

void check_non_negative(double value, std::string_view what) {
  if (!std::isfinite(value) || value < 0)
    defect(std::string(what) + " is " + std::to_string(value) + ", not a finite number of at least 0");
}

void check_breakdown(const memplan::Breakdown& breakdown) {
  const auto check_non_negative = [](double value, std::string_view figure) {
    fuzz::check_non_negative(value, "the estimate's " + std::string(figure));
  };
  check_non_negative(breakdown.params_total, "params_total");
  check_non_negative(breakdown.params_trainable, "params_trainable");
  check_non_negative(breakdown.memory_fraction, "memory_fraction");
  const memplan::StepTime& time = breakdown.time;
  for (double seconds : time.pass_seconds) check_non_negative(seconds, "time.pass_seconds");
  check_non_negative(time.compute_seconds, "time.compute_seconds");
  check_non_negative(time.communication_seconds, "time.communication_seconds");
  check_non_negative(time.exposed_seconds, "time.exposed_seconds");
  check_non_negative(time.bubble_seconds, "time.bubble_seconds");
  check_non_negative(time.communication_bytes, "time.communication_bytes");
  check_non_negative(time.seconds, "time.seconds");
  check_non_negative(time.model_flops, "time.model_flops");
  check_non_negative(time.hardware_flops, "time.hardware_flops");
  check_non_negative(time.memory_bytes, "time.memory_bytes");
  check_non_negative(time.mfu, "time.mfu");
  check_non_negative(time.hfu, "time.hfu");
  check_non_negative(time.tokens_per_step, "time.tokens_per_step");
  check_non_negative(time.tokens_per_second, "time.tokens_per_second");
}

}  // namespace memplan::fuzz
