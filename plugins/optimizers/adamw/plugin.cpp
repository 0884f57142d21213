// 'adamw' optimizer: 2 state tensors per trainable weight, as 'adam'. The
// decoupled weight decay is in place (param.mul_(1 - lr * weight_decay) and
// torch._foreach_mul_), so the step's temporaries are Adam's: for-loop 3 x the
// largest tensor, foreach 1 x all parameters, fused none (see ../adam/plugin.cpp).
#include <memplan/support/elementwise_optimizer.hpp>

namespace {

struct AdamwTraits {
  static constexpr const char* name = "adamw";
  static constexpr const char* version = "1.4.0";
  static constexpr const char* summary = "AdamW: Adam with decoupled weight decay, same two moments (Loshchilov and Hutter 2019)";
  static constexpr double states_per_parameter = 2;
  static constexpr memplan::support::StepTemporaries temporaries{3, 1, true};
  static constexpr memplan::support::Implementation default_implementation = memplan::support::Implementation::fused;
};

}  // namespace

using AdamwOptimizer = memplan::support::ElementwiseOptimizer<AdamwTraits>;
MEMPLAN_PLUGIN(AdamwOptimizer)
