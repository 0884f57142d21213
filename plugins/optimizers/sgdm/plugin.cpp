// 'sgdm' optimizer: 1 state tensor per trainable weight (momentum_buffer).
// torch.optim.SGD with momentum and its other defaults updates the buffer and
// the parameter in place in all three implementations
// (buf.mul_(momentum).add_(grad, alpha=1 - dampening); torch._foreach_mul_ and
// torch._foreach_add_ on the buffers), so every implementation adds no
// temporaries.
#include <memplan/support/elementwise_optimizer.hpp>

namespace {

struct SgdmTraits {
  static constexpr const char* name = "sgdm";
  static constexpr const char* version = "1.4.0";
  static constexpr const char* summary = "SGD with momentum: one momentum buffer per weight (PyTorch torch.optim.SGD, momentum > 0)";
  static constexpr double states_per_parameter = 1;
  static constexpr memplan::support::StepTemporaries temporaries{0, 0, true};
  static constexpr memplan::support::Implementation default_implementation = memplan::support::Implementation::fused;
};

}  // namespace

using SgdmOptimizer = memplan::support::ElementwiseOptimizer<SgdmTraits>;
MEMPLAN_PLUGIN(SgdmOptimizer)
