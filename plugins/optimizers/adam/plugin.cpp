// 'adam' optimizer: 2 state tensors per trainable weight (exp_avg, exp_avg_sq).
// Step temporaries, from torch/optim/adam.py (PyTorch 2.x; README quotes the lines):
//   for-loop  _single_tensor_adam: denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
//             allocates sqrt() and the quotient, while the previous parameter's denom is
//             still bound: 3 x the largest tensor (an upper bound: 2 x this + 1 x the previous);
//   foreach   _multi_tensor_adam: exp_avg_sq_sqrt = torch._foreach_sqrt(device_exp_avg_sqs)
//             is one list the size of all parameters (div_ and add_ are in place);
//   fused     torch._fused_adam_ / apex and DeepSpeed FusedAdam: none. The default, as
//             Megatron-LM and DeepSpeed use a fused Adam.
#include <memplan/support/elementwise_optimizer.hpp>

namespace {

struct AdamTraits {
  static constexpr const char* name = "adam";
  static constexpr const char* version = "1.4.0";
  static constexpr const char* summary = "Adam: first and second moment per weight (Kingma and Ba 2015)";
  static constexpr double states_per_parameter = 2;
  static constexpr memplan::support::StepTemporaries temporaries{3, 1, true};
  static constexpr memplan::support::Implementation default_implementation = memplan::support::Implementation::fused;
};

}  // namespace

using AdamOptimizer = memplan::support::ElementwiseOptimizer<AdamTraits>;
MEMPLAN_PLUGIN(AdamOptimizer)
