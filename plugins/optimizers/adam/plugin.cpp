// 'adam' optimizer: 2 state tensor(s) per trainable weight.
#include "../elementwise_optimizer.hpp"

namespace {

struct AdamTraits {
  static constexpr const char* name = "adam";
  static constexpr const char* summary = "Adam: first and second moment per weight (Kingma and Ba 2015)";
  static constexpr double states_per_parameter = 2;
};

}  // namespace

using AdamOptimizer = memplan::plugins::ElementwiseOptimizer<AdamTraits>;
MEMPLAN_PLUGIN(AdamOptimizer)
