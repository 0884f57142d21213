// 'lion' optimizer (Chen et al. 2023, "Symbolic Discovery of Optimization
// Algorithms", arXiv 2302.06675): the update is sign(beta1 m + (1 - beta1) g)
// and the only state is the momentum m, one tensor per trainable weight (the
// abstract: "more memory-efficient than Adam as it only keeps track of the
// momentum").
//
// Step temporaries, from timm's Lion (huggingface/pytorch-image-models,
// timm/optim/lion.py; torch.optim has no Lion):
//   for-loop  _single_tensor_lion: update = exp_avg.mul(beta1).add_(grad, ...).sign_()
//             allocates one tensor, while the previous parameter's update is still
//             bound: 2 x the largest tensor;
//   foreach   _multi_tensor_lion: updates = torch._foreach_mul(exp_avgs, beta1), then
//             in place (add_, sign_): one list the size of all parameters;
//   fused     lion-pytorch's Triton kernel (use_triton=True) and bitsandbytes' Lion
//             update in place: none. The default.
#include <memplan/support/elementwise_optimizer.hpp>

namespace {

struct LionTraits {
  static constexpr const char* name = "lion";
  static constexpr const char* version = "1.4.0";
  static constexpr const char* summary = "Lion: sign update, one momentum per weight (Chen et al. 2023, arXiv 2302.06675)";
  static constexpr double states_per_parameter = 1;
  static constexpr memplan::support::StepTemporaries temporaries{2, 1, true};
  static constexpr memplan::support::Implementation default_implementation = memplan::support::Implementation::fused;
};

}  // namespace

using LionOptimizer = memplan::support::ElementwiseOptimizer<LionTraits>;
MEMPLAN_PLUGIN(LionOptimizer)
