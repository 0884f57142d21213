// 'sgd' optimizer: 0 state tensors per trainable weight. torch.optim.SGD with
// its defaults (no weight decay, no nesterov, no maximize) updates in place in
// all three implementations (param.add_(grad, alpha=-lr); torch._foreach_add_),
// so every implementation adds no temporaries.
#include <memplan/support/elementwise_optimizer.hpp>

namespace {

struct SgdTraits {
  static constexpr const char* name = "sgd";
  static constexpr const char* version = "1.4.0";
  static constexpr const char* summary = "Plain SGD: no state beyond the gradient (Robbins and Monro 1951)";
  static constexpr double states_per_parameter = 0;
  static constexpr memplan::support::StepTemporaries temporaries{0, 0, true};
  static constexpr memplan::support::Implementation default_implementation = memplan::support::Implementation::fused;
};

}  // namespace

using SgdOptimizer = memplan::support::ElementwiseOptimizer<SgdTraits>;
MEMPLAN_PLUGIN(SgdOptimizer)
