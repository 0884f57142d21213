// Optimizers whose state is a fixed number of tensors shaped like each
// trainable weight (SGD: 0, SGD with momentum: 1, Adam/AdamW: 2). The states
// are stored in the precision plugin's optimizer_states dtype (fp32 in mixed
// precision, Micikevicius et al. 2017; ZeRO paper section 3.1 counts 12 bytes
// per parameter = fp32 master weights + momentum + variance).
#pragma once

#include <memplan/sdk.hpp>

namespace memplan::plugins {

template <typename Traits>
class ElementwiseOptimizer {
 public:
  static constexpr sdk::PluginInfo info{Traits::name, "1.0.0", Traits::summary, sdk::Kind::optimizer,
                                        sdk::Phase::optimizer};
  static std::span<const memplan_option_spec> options() { return {}; }

  explicit ElementwiseOptimizer(sdk::Options&) {}

  void apply(sdk::Context& ctx) {
    if (Traits::states_per_parameter == 0) return;
    const double state_bytes = ctx.required_attr_double(MEMPLAN_ATTR_DTYPE_OPTIMIZER_STATES);
    const size_t weights = ctx.size();  // states are appended; visit only the items present before
    for (size_t i = 0; i < weights; ++i) {
      sdk::Item item = ctx.item(i);
      if (item.role != sdk::Role::weights || !item.trainable) continue;
      item.role = sdk::Role::optimizer_states;
      item.lifetime = sdk::Lifetime::persistent;
      item.elements *= Traits::states_per_parameter;
      item.bytes_per_element = state_bytes;
      ctx.add(item);
    }
  }
};

}  // namespace memplan::plugins
