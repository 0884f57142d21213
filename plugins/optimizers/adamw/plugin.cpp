// 'adamw' optimizer: 2 state tensor(s) per trainable weight.
#include "../elementwise_optimizer.hpp"

namespace {

struct AdamwTraits {
  static constexpr const char* name = "adamw";
  static constexpr const char* summary = "AdamW: Adam with decoupled weight decay, same two moments (Loshchilov and Hutter 2019)";
  static constexpr double states_per_parameter = 2;
};

}  // namespace

using AdamwOptimizer = memplan::plugins::ElementwiseOptimizer<AdamwTraits>;
MEMPLAN_PLUGIN(AdamwOptimizer)
