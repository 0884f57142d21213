// 'sgdm' optimizer: 1 state tensor(s) per trainable weight.
#include "../elementwise_optimizer.hpp"

namespace {

struct SgdmTraits {
  static constexpr const char* name = "sgdm";
  static constexpr const char* summary = "SGD with momentum: one momentum buffer per weight (PyTorch torch.optim.SGD, momentum > 0)";
  static constexpr double states_per_parameter = 1;
};

}  // namespace

using SgdmOptimizer = memplan::plugins::ElementwiseOptimizer<SgdmTraits>;
MEMPLAN_PLUGIN(SgdmOptimizer)
