// Optimizers whose state is a fixed number of tensors shaped like each
// trainable weight (SGD: 0, SGD with momentum: 1, Lion: 1, Adam/AdamW: 2). The
// states are stored in the precision plugin's optimizer_states dtype (fp32 in
// mixed precision, Micikevicius et al. 2017; ZeRO paper section 3.1 counts 12
// bytes per parameter = fp32 master weights + momentum + variance).
//
// Option `implementation` adds the step's temporaries ("for-loop", "foreach",
// "fused"; optimizer_step.hpp). Traits give, besides name, version, summary
// and states_per_parameter:
//   temporaries             StepTemporaries{for_loop, foreach, fused_available}
//   default_implementation  what a scenario gets without the option: "fused"
//                           for all of them (the option spec says so), as
//                           Megatron-LM and DeepSpeed run fused optimizers and
//                           as it keeps published model-state figures intact
//
// Option `in_backward` runs the step inside backward, one parameter at a time,
// as torchtune's optimizer_in_bwd does (torchtune training/memory.py,
// register_optim_in_bwd_hooks, on PyTorch's register_post_accumulate_grad_hook:
// each parameter's optimizer steps as soon as its gradient is accumulated, and
// the gradient is freed): the gradients of the whole model never exist at once.
// memplan keeps one gradient tensor (the largest) and one parameter's step
// temporaries at the backward high point, and nothing of either in the
// optimizer phase. torchtune builds one optimizer per parameter
// ({p: config.instantiate(cfg_optimizer, [p])}, recipes/
// full_finetune_single_device.py @ 1814feb17a90), so the implementation sizes
// the temporaries for that one tensor: "for-loop" for_loop x it, "foreach"
// (the multi-tensor step over a one-tensor group, torch/optim/adam.py
// _multi_tensor_adam's _foreach_sqrt) foreach x it, "fused" none. It needs grad_accum = 1 (torchtune refuses
// gradient accumulation with it: the gradients would have to be kept).
#pragma once

#include <memplan/sdk.hpp>

#include <algorithm>
#include <array>
#include <optional>
#include <string>

#include <memplan/support/optimizer_states.hpp>
#include <memplan/support/optimizer_step.hpp>
#include <memplan/support/optimizer_traffic.hpp>

namespace memplan::support {

inline constexpr std::array<memplan_option_spec, 3> kElementwiseOptimizerOptions{{
    {"implementation", MEMPLAN_OPTION_STRING, kImplementationHelp, "\"fused\"", nullptr},
    kInBackwardOption,
    {"foreach_lists", MEMPLAN_OPTION_INT,
     "with implementation = \"foreach\": parameter-sized lists alive at the step's high point, where the PyTorch "
     "release differs from the optimizer's count: torch 2.0's _multi_tensor_adam(w) keeps 2 (exp_avg_sq_sqrt, and "
     "denom = torch._foreach_add(exp_avg_sq_sqrt, eps) out of place); torch 2.1 on 1 (pytorch PR #104780: "
     "_foreach_add_ in place)",
     "the optimizer's (adam, adamw, lion: 1; sgd and sgdm make none and refuse it)", nullptr},
}};

template <typename Traits>
class ElementwiseOptimizer {
 public:
  static constexpr sdk::PluginInfo info{Traits::name, Traits::version, Traits::summary, sdk::Kind::optimizer,
                                        sdk::Phase::optimizer, sdk::Reads::grad_accum};
  static std::span<const memplan_option_spec> options() { return kElementwiseOptimizerOptions; }

  static_assert(Traits::default_implementation == Implementation::fused,
                "the shared option spec documents \"fused\" as the default");

  explicit ElementwiseOptimizer(sdk::Options& options)
      : implementation_(read_implementation(options, Traits::default_implementation,
                                            Traits::temporaries.fused_available, Traits::name)),
        in_backward_(options.boolean("in_backward").value_or(false)),
        states_dtype_(options.attribute(MEMPLAN_ATTR_DTYPE_OPTIMIZER_STATES)),
        step_(options),
        traffic_(options) {
    require_shapes_for_loop(options, implementation_, Traits::temporaries);
    if (const std::optional<int64_t> lists = options.integer("foreach_lists")) {
      if (Traits::temporaries.foreach <= 0)
        options.fail("foreach_lists", std::string(Traits::name) +
                                          "'s foreach step makes no parameter-sized lists; remove foreach_lists");
      if (implementation_ != Implementation::foreach)
        options.fail("foreach_lists", std::string("counts the lists of the \"foreach\" step, but implementation is \"") +
                                          implementation_name(implementation_) + "\"; set implementation = \"foreach\"");
      if (*lists < 0 || *lists > 8)
        options.fail("foreach_lists", "must be a number of parameter-sized lists from 0 to 8, got " +
                                          std::to_string(*lists));
      temporaries_.foreach = static_cast<double>(*lists);
    }
    if (!in_backward_) return;
    in_backward_gradient_ = options.intern("gradients.in_backward");
    in_backward_temporaries_ = options.intern("optimizer.in_backward_temps");
    require_in_backward_fits(options);
  }

  void apply(sdk::Context& ctx) {
    const bool has_temporaries = (implementation_ == Implementation::for_loop && temporaries_.for_loop > 0) ||
                                 (implementation_ == Implementation::foreach && temporaries_.foreach > 0);
    if (Traits::states_per_parameter == 0 && !has_temporaries) {
      traffic_.add(ctx, 0, 0);  // SGD: the gradient and the weight (or master copy) only
      return;
    }
    const double state_bytes = ctx.required_attr_double(states_dtype_, MEMPLAN_ATTR_DTYPE_OPTIMIZER_STATES);
    traffic_.add(ctx, Traits::states_per_parameter, state_bytes);
    // States are appended; the temporaries visit the items before.
    const size_t weights = add_optimizer_states(ctx, batch_, Traits::states_per_parameter, state_bytes);
    if (!in_backward_) {
      add_step_temporaries(ctx, weights, implementation_, temporaries_, state_bytes, step_);
      return;
    }
    step_in_backward(ctx, weights, state_bytes);
  }

 private:
  // The gradients of the whole model become one gradient tensor at a time, and
  // the step's temporaries one parameter's, both at the backward high point.
  void step_in_backward(sdk::Context& ctx, size_t weights, double state_bytes) const {
    const double largest = gradients_in_backward(ctx, weights, step_.layout, in_backward_gradient_);
    if (largest <= 0) return;
    const double per_tensor = implementation_ == Implementation::for_loop  ? temporaries_.for_loop
                              : implementation_ == Implementation::foreach ? temporaries_.foreach
                                                                           : 0.0;
    if (per_tensor > 0)
      ctx.add(sdk::NewItem{.name = in_backward_temporaries_,
                           .role = sdk::Role::optimizer_states,
                           .lifetime = sdk::Lifetime::transient_backward,
                           .elements = largest * per_tensor,
                           .bytes_per_element = state_bytes});
  }

  Implementation implementation_;
  StepTemporaries temporaries_ = Traits::temporaries;  // foreach_lists may replace the foreach count
  bool in_backward_ = false;
  sdk::Attribute states_dtype_;
  sdk::ItemBatch batch_;
  StepTemporaryNames step_;
  OptimizerTraffic traffic_;
  // in_backward's two items, interned in the constructor when it is on.
  sdk::Name in_backward_gradient_, in_backward_temporaries_;
};

}  // namespace memplan::support
