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
  const auto check = [](double value, std::string_view figure) {
    check_non_negative(value, "the estimate's " + std::string(figure));
  };
  check(breakdown.params_total, "params_total");
  check(breakdown.params_trainable, "params_trainable");
  check(breakdown.memory_fraction, "memory_fraction");
  const memplan::StepTime& time = breakdown.time;
  for (double seconds : time.pass_seconds) check(seconds, "time.pass_seconds");
  check(time.compute_seconds, "time.compute_seconds");
  check(time.communication_seconds, "time.communication_seconds");
  check(time.exposed_seconds, "time.exposed_seconds");
  check(time.bubble_seconds, "time.bubble_seconds");
  check(time.communication_bytes, "time.communication_bytes");
  check(time.seconds, "time.seconds");
  check(time.model_flops, "time.model_flops");
  check(time.hardware_flops, "time.hardware_flops");
  check(time.memory_bytes, "time.memory_bytes");
  check(time.mfu, "time.mfu");
  check(time.hfu, "time.hfu");
  check(time.tokens_per_step, "time.tokens_per_step");
  check(time.tokens_per_second, "time.tokens_per_second");
}

}  // namespace memplan::fuzz
