#include "memplan/core/breakdown.hpp"

#include <algorithm>
#include <cmath>

namespace memplan {

std::string_view role_name(int32_t role) {
  static constexpr std::array<std::string_view, MEMPLAN_ROLE_COUNT> names{
      "weights", "gradients", "master_weights", "optimizer_states", "activations", "kv_cache", "buffers", "overhead"};
  return role >= 0 && role < MEMPLAN_ROLE_COUNT ? names[static_cast<size_t>(role)] : "unknown";
}

std::string_view lifetime_name(int32_t lifetime) {
  static constexpr std::array<std::string_view, kLifetimeCount> names{
      "persistent",          "gradient",           "activation", "transient_forward", "transient_backward",
      "transient_optimizer", "setup", "transient_backward_start", "transient_backward_end",
      "transient_backward_layers", "transient_backward_in_layers", "transient_forward_in_layers",
      "transient_forward_end"};
  return lifetime >= 0 && lifetime < kLifetimeCount ? names[static_cast<size_t>(lifetime)] : "unknown";
}

std::string_view phase_name(int phase) {
  static constexpr std::array<std::string_view, kStepPhaseCount> names{"init", "forward", "backward", "optimizer"};
  return phase >= 0 && phase < kStepPhaseCount ? names[static_cast<size_t>(phase)] : "unknown";
}

std::string_view quantity_name(int quantity) {
  static constexpr std::array<std::string_view, kQuantityCount> names{"allocated", "reserved", "device"};
  return quantity >= 0 && quantity < kQuantityCount ? names[static_cast<size_t>(quantity)] : "unknown";
}

std::optional<int> quantity_from_name(std::string_view name) {
  for (int quantity = 0; quantity < kQuantityCount; ++quantity)
    if (quantity_name(quantity) == name) return quantity;
  return std::nullopt;
}

int item_quantity(uint32_t flags) {
  if (flags & MEMPLAN_ITEM_OUTSIDE_ALLOCATOR) return kDevice;
  if (flags & MEMPLAN_ITEM_ALLOCATOR_RESERVE) return kReserved;
  return kAllocated;
}

namespace {

uint64_t instance_bytes(const PlanItem& item) {
  return static_cast<uint64_t>(std::ceil(item.elements * item.bytes_per_element));
}

// The largest amount of one lifetime that belongs to a single layer (or to a
// single item outside the layers), for each quantity: an item counts in its
// own quantity and every later one. A layer holds one instance of every
// layered item whose range [layer, layer + count) covers it (items of
// different ranges overlap where a MoE model's dense first layers and its
// expert layers share the attention items); the sum only changes where a
// range starts, so the layers at range starts are the candidates.
using PerQuantity = std::array<uint64_t, kQuantityCount>;

PerQuantity largest_single_layer(const Plan& plan, int32_t lifetime) {
  PerQuantity largest{};
  const auto& items = plan.items;
  auto counted = [&](const PlanItem& item) {
    return item.lifetime == lifetime && item.device == MEMPLAN_DEVICE_GPU && item.count > 0;
  };
  auto keep_larger = [&](const PerQuantity& group) {
    for (size_t q = 0; q < largest.size(); ++q) largest[q] = std::max(largest[q], group[q]);
  };
  auto add = [](PerQuantity& group, const PlanItem& item, uint64_t bytes) {
    for (int q = item_quantity(item.flags); q < kQuantityCount; ++q) group[static_cast<size_t>(q)] += bytes;
  };
  for (size_t i = 0; i < items.size(); ++i) {
    const PlanItem& item = items[i];
    if (!counted(item)) continue;
    PerQuantity group{};
    if (item.layer < 0) {
      add(group, item, item.bytes());
      keep_larger(group);
      continue;
    }
    bool first_start = true;
    for (size_t j = 0; j < i && first_start; ++j)
      first_start = !(counted(items[j]) && items[j].layer == item.layer);
    if (!first_start) continue;
    const int64_t at = item.layer;
    for (const PlanItem& other : items)
      if (counted(other) && other.layer >= 0 && other.layer <= at &&
          at < static_cast<int64_t>(other.layer) + static_cast<int64_t>(other.count))
        add(group, other, instance_bytes(other));
    keep_larger(group);
  }
  return largest;
}

}  // namespace

namespace {

// Sizes beyond 2^62 bytes are no plan; adding stays far from wrapping.
constexpr uint64_t kTooLarge = uint64_t{1} << 62;

// The caching allocator frees its whole free segments and retries before an
// allocation fails (release_cached_blocks), so the releasable reserve gives
// way where device memory would exceed the GPU's: in each phase it drops by
// the excess, down to none of it (the items that hold tensors are not
// touched: a plan above the GPU's memory without it still does not fit).
void cap_releasable(const std::array<double, kLifetimeCount>& releasable, bool accumulating, uint64_t gpu_memory,
                    Breakdown& breakdown) {
  double high[3];
  memplan_step_high_points_n(releasable.data(), releasable.size(), 0, 0, accumulating ? 1 : 0, high);
  const std::array<double, kStepPhaseCount> in_phase{releasable[MEMPLAN_LIFETIME_PERSISTENT], high[0], high[1],
                                                     high[2]};
  auto& device = breakdown.quantities[kDevice].timeline;
  auto& reserved = breakdown.quantities[kReserved].timeline;
  for (size_t phase = 0; phase < in_phase.size(); ++phase) {
    if (device[phase] <= gpu_memory) continue;
    const uint64_t cut = std::min(device[phase] - gpu_memory, static_cast<uint64_t>(in_phase[phase]));
    device[phase] -= cut;
    reserved[phase] -= std::min(cut, reserved[phase]);
    breakdown.reserve_released = std::max(breakdown.reserve_released, cut);
  }
}

}  // namespace

void summarize(const Plan& plan, int64_t grad_accum, Breakdown& breakdown, uint64_t gpu_memory_bytes) {
  breakdown.too_large = false;
  breakdown.reserve_released = 0;
  uint64_t everything = 0;
  for (const PlanItem& item : plan.items) {
    const uint64_t bytes = item.bytes();
    if (bytes >= kTooLarge || __builtin_add_overflow(everything, bytes, &everything) || everything >= kTooLarge) {
      breakdown.too_large = true;
      return;
    }
  }
  breakdown.components.fill(0);
  breakdown.cpu_components.fill(0);
  // Bytes by lifetime that count in each quantity (an item counts in its own and every later one).
  std::array<std::array<uint64_t, kLifetimeCount>, kQuantityCount> by_lifetime{};
  // What exists while the job is set up (plugin_abi.h, memplan_exists_at_setup).
  std::array<uint64_t, kQuantityCount> at_setup{};
  // Releasable reserve by lifetime (plugin_abi.h, MEMPLAN_ITEM_RELEASABLE).
  std::array<double, kLifetimeCount> releasable{};
  for (const PlanItem& item : plan.items) {
    const uint64_t bytes = item.bytes();
    if (item.device == MEMPLAN_DEVICE_CPU) {
      breakdown.cpu_components[static_cast<size_t>(item.role)] += bytes;
      continue;
    }
    breakdown.components[static_cast<size_t>(item.role)] += bytes;
    const bool setup = memplan_exists_at_setup(item.role, item.lifetime) != 0;
    if ((item.flags & MEMPLAN_ITEM_RELEASABLE) != 0 && item_quantity(item.flags) == kReserved)
      releasable[static_cast<size_t>(item.lifetime)] += static_cast<double>(bytes);
    for (int quantity = item_quantity(item.flags); quantity < kQuantityCount; ++quantity) {
      by_lifetime[static_cast<size_t>(quantity)][static_cast<size_t>(item.lifetime)] += bytes;
      if (setup) at_setup[static_cast<size_t>(quantity)] += bytes;
    }
  }
  breakdown.sum = 0;
  for (uint64_t bytes : breakdown.components) breakdown.sum += bytes;
  breakdown.cpu_sum = 0;
  for (uint64_t bytes : breakdown.cpu_components) breakdown.cpu_sum += bytes;

  const bool accumulating = grad_accum > 1;
  // The single-layer bounds of backward (one grouping pass each, for all three quantities).
  PerQuantity largest_gradient_layer{}, largest_activation_layer{};
  if (!accumulating) {
    largest_gradient_layer = largest_single_layer(plan, MEMPLAN_LIFETIME_GRADIENT);
    largest_activation_layer = largest_single_layer(plan, MEMPLAN_LIFETIME_ACTIVATION);
  }
  for (int quantity = 0; quantity < kQuantityCount; ++quantity) {
    const auto& lifetime = by_lifetime[static_cast<size_t>(quantity)];
    StepPeak& step = breakdown.quantities[static_cast<size_t>(quantity)];
    auto& t = step.timeline;
    // Init: the persistent items, or the set-up's high point (its allocations,
    // gone before the first step, beside what exists by then), the larger.
    t[kInit] = std::max(lifetime[MEMPLAN_LIFETIME_PERSISTENT], at_setup[static_cast<size_t>(quantity)]);
    // Forward, backward and the optimizer step by the shared rule
    // (plugin_abi.h), which a plugin may apply to a subset of the items, e.g.
    // one stream's pool. Sums below 2^53 bytes are exact in double.
    std::array<double, kLifetimeCount> sums{};
    for (size_t kind = 0; kind < sums.size(); ++kind) sums[kind] = static_cast<double>(lifetime[kind]);
    double high[3];
    memplan_step_high_points_n(sums.data(), sums.size(),
                               static_cast<double>(largest_gradient_layer[static_cast<size_t>(quantity)]),
                               static_cast<double>(largest_activation_layer[static_cast<size_t>(quantity)]),
                               accumulating ? 1 : 0, high);
    t[kForward] = static_cast<uint64_t>(high[0]);
    t[kBackward] = static_cast<uint64_t>(high[1]);
    t[kOptimizerStep] = static_cast<uint64_t>(high[2]);
  }
  if (gpu_memory_bytes > 0) cap_releasable(releasable, accumulating, gpu_memory_bytes, breakdown);
  for (StepPeak& step : breakdown.quantities) {
    const auto& t = step.timeline;
    step.peak = 0;
    step.peak_phase = kInit;
    for (int phase = 0; phase < kStepPhaseCount; ++phase)
      if (t[static_cast<size_t>(phase)] > step.peak) {
        step.peak = t[static_cast<size_t>(phase)];
        step.peak_phase = phase;
      }
  }
  const StepPeak& fit = breakdown.quantities[static_cast<size_t>(breakdown.fit_quantity)];
  breakdown.timeline = fit.timeline;
  breakdown.peak = fit.peak;
  breakdown.peak_phase = fit.peak_phase;
}

}  // namespace memplan
