// 'sgd' optimizer: 0 state tensor(s) per trainable weight.
#include "../elementwise_optimizer.hpp"

namespace {

struct SgdTraits {
  static constexpr const char* name = "sgd";
  static constexpr const char* summary = "Plain SGD: no state beyond the gradient (Robbins and Monro 1951)";
  static constexpr double states_per_parameter = 0;
};

}  // namespace

using SgdOptimizer = memplan::plugins::ElementwiseOptimizer<SgdTraits>;
MEMPLAN_PLUGIN(SgdOptimizer)
