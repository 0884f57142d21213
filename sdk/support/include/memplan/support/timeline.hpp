// The host's step timeline, by name (ABI 1.1, memplan_host.timeline).
//
// The host computes, for the plan as it stands, the bytes on the GPU at the
// high point of each step phase (init, forward, backward, optimizer step), in
// each of the report's three quantities (allocated, reserved, device;
// docs/estimate.md section 4 and docs/frameworks.md). A plugin that needs the
// peak of the finished plan (serving-budget) asks the host instead of
// repeating its rules, so the two cannot drift apart. The indices are those of
// memplan_timeline.bytes (plugin_abi.h): quantity first, then phase.
#pragma once

#include <memplan/sdk.hpp>

#include <algorithm>
#include <cstdint>

namespace memplan::support {

// An item counts in its own quantity and every later one: device memory
// includes the allocator's reserve, which includes its tensors.
enum class Quantity : int { allocated = 0, reserved = 1, device = 2 };
enum class StepPhase : int { init = 0, forward = 1, backward = 2, optimizer = 3 };

static_assert(MEMPLAN_QUANTITIES == 3 && MEMPLAN_STEP_PHASES == 4,
              "Quantity and StepPhase name every entry of memplan_timeline");

class Timeline {
 public:
  explicit Timeline(const memplan_timeline& raw) : raw_(raw) {}
  // The timeline of the plan as it stands now.
  explicit Timeline(const sdk::Context& ctx) : raw_(ctx.timeline()) {}

  uint64_t at(Quantity quantity, StepPhase phase) const {
    return raw_.bytes[static_cast<int>(quantity)][static_cast<int>(phase)];
  }
  // The high point over the phases.
  uint64_t peak(Quantity quantity) const {
    const auto& row = raw_.bytes[static_cast<int>(quantity)];
    return *std::max_element(row, row + MEMPLAN_STEP_PHASES);
  }
  // Every GPU item once, whatever its lifetime (an upper bound, not a point in time).
  uint64_t sum() const { return raw_.sum; }
  const memplan_timeline& raw() const { return raw_; }

 private:
  memplan_timeline raw_;
};

}  // namespace memplan::support
