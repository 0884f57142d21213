// The per-GPU result of one evaluation: components, plain sum, and the peak of
// the step timeline (init -> forward -> backward -> optimizer step).
#pragma once

#include <memplan/plugin_abi.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "memplan/core/plan.hpp"
#include "memplan/core/step_time.hpp"

namespace memplan {

enum StepPhase : int { kInit = 0, kForward = 1, kBackward = 2, kOptimizerStep = 3, kStepPhaseCount = 4 };

// Item lifetimes, MEMPLAN_LIFETIME_PERSISTENT (0) to MEMPLAN_LIFETIME_FORWARD_END (12).
inline constexpr int kLifetimeCount = MEMPLAN_LIFETIME_COUNT;

// The three ways memory on a GPU is measured, each a superset of the one
// before: what the framework's allocator hands out to tensors
// (torch.cuda.max_memory_allocated), what it holds from the device
// (max_memory_reserved), and what the device shows in use (nvidia-smi), which
// adds what never passes through the allocator (CUDA context, NCCL buffers).
// An item counts in its own quantity and every later one (plugin_abi.h,
// MEMPLAN_ITEM_ALLOCATOR_RESERVE / MEMPLAN_ITEM_OUTSIDE_ALLOCATOR).
enum Quantity : int { kAllocated = 0, kReserved = 1, kDevice = 2, kQuantityCount = 3 };

struct StepPeak {
  std::array<uint64_t, kStepPhaseCount> timeline{};
  uint64_t peak = 0;  // max over the timeline
  int peak_phase = kInit;
};

struct Breakdown {
  std::array<uint64_t, MEMPLAN_ROLE_COUNT> components{};  // GPU bytes by role
  std::array<uint64_t, MEMPLAN_ROLE_COUNT> cpu_components{};
  std::array<StepPeak, kQuantityCount> quantities{};      // the timeline of each quantity
  int fit_quantity = kDevice;                              // the quantity `fits` compares (and peak mirrors)
  // The timeline, peak and phase of the quantity `fits` uses (device unless the scenario says otherwise).
  std::array<uint64_t, kStepPhaseCount> timeline{};
  uint64_t sum = 0;   // every GPU item once
  uint64_t peak = 0;  // max over the timeline
  int peak_phase = kInit;
  uint64_t cpu_sum = 0;
  double params_total = 0;
  double params_trainable = 0;
  int64_t world_size = 1;
  double memory_fraction = 1.0;  // of GPU memory the job may use (limits.memory_fraction)
  bool too_large = false;        // a total passed 2^62 bytes; the totals above are then meaningless
  // The most releasable reserve (MEMPLAN_ITEM_RELEASABLE) the GPU's memory cut
  // in one phase: the caching allocator's free segments it must release and
  // retry with to stay within the GPU (0: none, or no GPU given).
  uint64_t reserve_released = 0;
  StepTime time;                 // the step's time, when plugins report its work (ABI 1.2)

  // The memory the peak is compared with: the GPU's, times the fraction.
  uint64_t capacity(uint64_t gpu_memory_bytes) const {
    return static_cast<uint64_t>(static_cast<double>(gpu_memory_bytes) * memory_fraction);
  }
};

std::string_view role_name(int32_t role);        // "weights", "optimizer_states", ...
std::string_view lifetime_name(int32_t lifetime);
std::string_view phase_name(int phase);          // "init", "forward", "backward", "optimizer"
std::string_view quantity_name(int quantity);    // "allocated", "reserved", "device"
std::optional<int> quantity_from_name(std::string_view name);  // the inverse; nullopt for another name
// The item's quantity: the first of the three it counts in (from its flags).
int item_quantity(uint32_t flags);

// Fills components, sum and the timeline of each quantity of `breakdown` from
// `plan`, and mirrors breakdown.fit_quantity's into timeline/peak/peak_phase.
// grad_accum > 1 keeps gradients alive across micro-batches (they accumulate).
// gpu_memory_bytes > 0: releasable reserve (MEMPLAN_ITEM_RELEASABLE) is
// lowered in each phase where device memory would exceed it.
void summarize(const Plan& plan, int64_t grad_accum, Breakdown& breakdown, uint64_t gpu_memory_bytes = 0);

}  // namespace memplan
