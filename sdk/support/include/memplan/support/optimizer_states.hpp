// Optimizer states shaped like the weights: for every trainable weight item,
// one optimizer_states item of `per_parameter` tensors of the weight's shape,
// in the optimizer-states dtype the precision plugin declared
// (dtype.optimizer_states: fp32 in mixed precision, Micikevicius et al. 2017,
// arXiv 1710.03740; the ZeRO paper, Rajbhandari et al. 2019, arXiv 1910.02054,
// section 3.1, counts Adam's as 2 x 4 bytes per parameter besides the fp32
// master copy). The state items keep the weight's name, layer, count and
// parameter class, so layout and sharding plugins split them as the weights.
//
// Used by ElementwiseOptimizer (elementwise_optimizer.hpp) and by optimizers
// written without it (examples/plugins/adan-optimizer).
#pragma once

#include <memplan/sdk.hpp>

namespace memplan::support {

// Appends to `batch` the states of every trainable weight on the plan and
// adds them in one call; `batch` is a plugin state member (no allocation per
// evaluation once warm). Returns the number of items the plan had before, the
// weights a later step (optimizer_step.hpp) visits.
inline size_t add_optimizer_states(sdk::Context& ctx, sdk::ItemBatch& batch, double per_parameter,
                                   double state_bytes) {
  const sdk::Items items = ctx.items();
  const size_t before = items.size();
  batch.clear();
  if (per_parameter > 0)
    for (const sdk::ItemRef item : items) {
      if (item.role() != sdk::Role::weights || !item.trainable()) continue;
      sdk::ItemRef states = batch.copy_of(item);
      states.set_role(sdk::Role::optimizer_states);
      states.set_lifetime(sdk::Lifetime::persistent);
      states.set_elements(item.elements() * per_parameter);
      states.set_bytes_per_element(state_bytes);
    }
  ctx.add(batch);
  return before;
}

}  // namespace memplan::support
