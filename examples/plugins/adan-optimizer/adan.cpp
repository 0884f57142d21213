// 'adan' optimizer: Adan, adaptive Nesterov momentum (Xie et al. 2022, "Adan:
// Adaptive Nesterov Momentum Algorithm for Faster Optimizing Deep Models",
// arXiv 2208.06677). An example of an out-of-tree memplan plugin.
//
// State per trainable weight, from the authors' PyTorch implementation
// (sail-sg/Adan, adan.py, Adan.step): four tensors shaped like the weight,
//   exp_avg       m_k, the moving average of the gradient   (zeros_like(p))
//   exp_avg_sq    n_k, of the squared Nesterov-corrected gradient (zeros_like(p))
//   exp_avg_diff  v_k, of the gradient difference g_k - g_{k-1} (zeros_like(p))
//   neg_pre_grad  -g_{k-1}, the previous gradient, kept for that difference
//                 (a clone of p.grad)
// so 4 x the trainable parameters, in the optimizer-states dtype (fp32 with
// mixed precision, where the optimizer runs on the fp32 master weights and
// gradients): 16 bytes per parameter, twice Adam's 8.
//
// Option `implementation` adds the step's temporaries:
//   "fused"    the authors' CUDA kernel (fused_adan): updates in place, none;
//   "foreach"  _multi_tensor_adan (the PyTorch default, foreach=True):
//              denom = torch._foreach_sqrt(exp_avg_sqs) allocates one tensor per
//              parameter, 1 x all trainable parameters, alive during the step;
//              every other operation is in place.
#include <memplan/sdk.hpp>

#include <array>
#include <string>

namespace {

namespace sdk = memplan::sdk;

constexpr std::array<memplan_option_spec, 1> kOptions{{
    {"implementation", MEMPLAN_OPTION_STRING,
     "\"fused\" (sail-sg's CUDA kernel: no temporaries) or \"foreach\" (torch._foreach: a denominator as large as "
     "all trainable parameters during the step)",
     "\"fused\""},
}};

// Tensors Adan keeps per trainable weight (exp_avg, exp_avg_sq, exp_avg_diff, neg_pre_grad).
constexpr double kStatesPerParameter = 4;

class AdanOptimizer {
 public:
  static constexpr sdk::PluginInfo info{"adan", "1.0.0",
                                        "Adan: 4 states per weight (Xie et al. 2022, arXiv 2208.06677)",
                                        sdk::Kind::optimizer, sdk::Phase::optimizer};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit AdanOptimizer(sdk::Options& options) {
    const std::string implementation = options.string("implementation").value_or("fused");
    if (implementation != "fused" && implementation != "foreach")
      options.fail("implementation", "must be \"fused\" or \"foreach\", not \"" + implementation + "\"");
    foreach_ = implementation == "foreach";
  }

  void apply(sdk::Context& ctx) {
    const double state_bytes = ctx.required_attr_double(MEMPLAN_ATTR_DTYPE_OPTIMIZER_STATES);
    const size_t weights = ctx.size();  // states are appended: visit only the items present before
    for (size_t i = 0; i < weights; ++i) {
      const sdk::Item weight = ctx.item(i);
      if (weight.role != sdk::Role::weights || !weight.trainable) continue;
      sdk::Item states = weight;
      states.role = sdk::Role::optimizer_states;
      states.lifetime = sdk::Lifetime::persistent;
      states.elements = weight.elements * kStatesPerParameter;
      states.bytes_per_element = state_bytes;
      ctx.add(states);
      if (foreach_) {
        sdk::Item denominator = weight;
        denominator.name = weight.name + ".foreach_temps";
        denominator.role = sdk::Role::optimizer_states;
        denominator.lifetime = sdk::Lifetime::transient_optimizer;
        denominator.bytes_per_element = state_bytes;
        ctx.add(denominator);
      }
    }
  }

 private:
  bool foreach_ = false;
};

}  // namespace

MEMPLAN_PLUGIN(AdanOptimizer)
