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
//
// The states and the temporaries are added by the plugin support library
// installed with memplan's SDK (memplan::plugin_support; docs/plugin-support.md):
// add_optimizer_states and add_step_temporaries, the helpers memplan's own
// optimizers use, so Adan's items are sized and named as Adam's are.
#include <memplan/sdk.hpp>
#include <memplan/support/optimizer_states.hpp>
#include <memplan/support/optimizer_step.hpp>

#include <array>
#include <string>

namespace {

namespace sdk = memplan::sdk;
namespace support = memplan::support;

constexpr std::array<memplan_option_spec, 1> kOptions{{
    {"implementation", MEMPLAN_OPTION_STRING,
     "\"fused\" (sail-sg's CUDA kernel: no temporaries) or \"foreach\" (torch._foreach: a denominator as large as "
     "all trainable parameters during the step)",
     "\"fused\""},
}};

// Tensors Adan keeps per trainable weight (exp_avg, exp_avg_sq, exp_avg_diff, neg_pre_grad).
constexpr double kStatesPerParameter = 4;

// Parameter-sized temporaries at the step's high point: foreach 1 x every
// trainable element (the denominator); fused none. The option offers no
// for-loop step, so its entry is never read.
constexpr support::StepTemporaries kTemporaries{.for_loop = 0, .foreach = 1, .fused_available = true};

class AdanOptimizer {
 public:
  static constexpr sdk::PluginInfo info{"adan", "1.1.2",
                                        "Adan: 4 states per weight (Xie et al. 2022, arXiv 2208.06677)",
                                        sdk::Kind::optimizer, sdk::Phase::optimizer};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit AdanOptimizer(sdk::Options& options)
      : states_dtype_(options.attribute(MEMPLAN_ATTR_DTYPE_OPTIMIZER_STATES)), step_(options) {
    const std::string implementation = options.string("implementation").value_or("fused");
    if (implementation != "fused" && implementation != "foreach")
      options.fail("implementation", "must be \"fused\" or \"foreach\", not \"" + implementation + "\"");
    implementation_ = implementation == "foreach" ? support::Implementation::foreach : support::Implementation::fused;
  }

  void apply(sdk::Context& ctx) {
    const double state_bytes = ctx.required_attr_double(states_dtype_, MEMPLAN_ATTR_DTYPE_OPTIMIZER_STATES);
    // The states are appended; the temporaries are sized from the weights before them.
    const size_t weights = support::add_optimizer_states(ctx, states_, kStatesPerParameter, state_bytes);
    support::add_step_temporaries(ctx, weights, implementation_, kTemporaries, state_bytes, step_);
  }

 private:
  sdk::Attribute states_dtype_;
  support::Implementation implementation_ = support::Implementation::fused;
  sdk::ItemBatch states_;          // kept: no allocation per evaluation once warm
  support::StepTemporaryNames step_;  // made from the options: names and layout resolved once
};

}  // namespace

MEMPLAN_PLUGIN(AdanOptimizer)
