// Optimizers whose state is a fixed number of tensors shaped like each
// trainable weight (SGD: 0, SGD with momentum: 1, Lion: 1, Adam/AdamW: 2). The
// states are stored in the precision plugin's optimizer_states dtype (fp32 in
// mixed precision, Micikevicius et al. 2017; ZeRO paper section 3.1 counts 12
// bytes per parameter = fp32 master weights + momentum + variance).
//
// Option `implementation` adds the step's temporaries ("for-loop", "foreach",
// "fused"; optimizer_step.hpp). Traits give, besides name, summary and
// states_per_parameter:
//   temporaries             StepTemporaries{for_loop, foreach, fused_available}
//   default_implementation  what a scenario gets without the option: "fused"
//                           for all of them (the option spec says so), as
//                           Megatron-LM and DeepSpeed run fused optimizers and
//                           as it keeps published model-state figures intact
#pragma once

#include <memplan/sdk.hpp>

#include <array>

#include "optimizer_step.hpp"

namespace memplan::plugins {

inline constexpr std::array<memplan_option_spec, 1> kElementwiseOptimizerOptions{{
    {"implementation", MEMPLAN_OPTION_STRING, kImplementationHelp, "\"fused\""},
}};

template <typename Traits>
class ElementwiseOptimizer {
 public:
  static constexpr sdk::PluginInfo info{Traits::name, "1.0.0", Traits::summary, sdk::Kind::optimizer,
                                        sdk::Phase::optimizer};
  static std::span<const memplan_option_spec> options() { return kElementwiseOptimizerOptions; }

  static_assert(Traits::default_implementation == Implementation::fused,
                "the shared option spec documents \"fused\" as the default");

  explicit ElementwiseOptimizer(sdk::Options& options)
      : implementation_(read_implementation(options, Traits::default_implementation,
                                            Traits::temporaries.fused_available, Traits::name)) {
    require_shapes_for_loop(options, implementation_, Traits::temporaries);
  }

  void apply(sdk::Context& ctx) {
    const bool has_temporaries = (implementation_ == Implementation::for_loop && Traits::temporaries.for_loop > 0) ||
                                 (implementation_ == Implementation::foreach && Traits::temporaries.foreach > 0);
    if (Traits::states_per_parameter == 0 && !has_temporaries) return;
    const double state_bytes = ctx.required_attr_double(MEMPLAN_ATTR_DTYPE_OPTIMIZER_STATES);
    const size_t weights = ctx.size();  // states are appended; visit only the items present before
    for (size_t i = 0; i < weights && Traits::states_per_parameter > 0; ++i) {
      sdk::Item item = ctx.item(i);
      if (item.role != sdk::Role::weights || !item.trainable) continue;
      item.role = sdk::Role::optimizer_states;
      item.lifetime = sdk::Lifetime::persistent;
      item.elements *= Traits::states_per_parameter;
      item.bytes_per_element = state_bytes;
      ctx.add(item);
    }
    add_step_temporaries(ctx, weights, implementation_, Traits::temporaries, state_bytes);
  }

 private:
  Implementation implementation_;
};

}  // namespace memplan::plugins
