// 'adafactor' optimizer (Shazeer and Stern 2018, "Adafactor: Adaptive Learning
// Rates with Sublinear Memory Cost", arXiv 1804.04235). For an n x m weight
// matrix it keeps "only the per-row and per-column sums of these moving
// averages" of the squared gradients (the abstract): n + m second-moment
// elements instead of n m, rebuilt as R C / (1^T R) when needed. 1-D
// parameters (norm weights, biases) keep the full second moment (the paper's
// algorithm for weight vectors). The first moment is optional: the paper's
// recipe drops momentum; Hugging Face's Adafactor keeps exp_avg only when
// beta1 is given; torch.optim.Adafactor has none.
//
// The shapes come from parameter_shapes.hpp: per parameter class, the model's
// dimensions, unfused (separate q, k, v, o, gate, up, down), with the hidden
// size whole and the other side divided by tensor parallelism. So on a rank an
// instance holds
//
//   second moment = matrices x (h + cols) + 1-D elements
//   first moment  = the weight's elements (with first_moment / beta1)
//
// in the optimizer-states dtype. A fused QKV or gate+up matrix (Megatron-LM's
// layout) has fewer rows+cols than the separate matrices: memplan's count is
// then a little high (by h per fused-away matrix and layer).
//
// Step temporaries, from torch.optim.Adafactor (torch/optim/_adafactor.py):
//   for-loop  _single_tensor_adafactor: var_estimate = row_var @ col_var is one
//             tensor the size of the parameter; the previous parameter's update
//             (the same tensor, updated in place) is still bound: 2 x the largest tensor.
//             The default, as in torch.optim.Adafactor ("Adafactor will default to
//             the slower single tensor for-loop implementation").
//   foreach   _multi_tensor_adafactor: var_estimates over the group, "~ sizeof(params)
//             more peak memory than the for-loop version" (its docstring): 1 x all.
//   fused     none exists: an error.
//
// The step's memory traffic (ABI 1.2 memory record): Hugging Face's Adafactor
// (transformers/optimization.py @ 005edacb6b5d, what the Trainer's
// optim="adafactor" runs), a loop over the parameters of eager ops, each a
// pass over HBM: hf_adafactor_bytes_per_element in optimizer_traffic.hpp
// derives it op by op. The matrices of an item are factored, its 1-D elements
// (and an item of unknown shapes) not; bf16 weights and gradients: 102 B per
// factored element, 118 B per 1-D element, 20 B more with a first moment.
#include <memplan/sdk.hpp>
#include <memplan/support/format.hpp>
#include <memplan/support/layout.hpp>
#include <memplan/support/optimizer_step.hpp>
#include <memplan/support/optimizer_traffic.hpp>
#include <memplan/support/parameter_shapes.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>

namespace {

namespace sdk = memplan::sdk;
using memplan::support::Implementation;
using memplan::support::StepTemporaries;

constexpr StepTemporaries kTemporaries{2, 1, false};

constexpr std::array<memplan_option_spec, 3> kOptions{{
    {"first_moment", MEMPLAN_OPTION_BOOL, "keep a full first moment (exp_avg) per weight", "false, or true when beta1 is set",
     nullptr},
    {"beta1", MEMPLAN_OPTION_DOUBLE,
     "first-moment decay in [0, 1); setting it keeps a first moment, as Hugging Face's Adafactor does", "not set",
     nullptr},
    {"implementation", MEMPLAN_OPTION_STRING,
     "\"for-loop\" (torch.optim.Adafactor's default: one tensor at a time) or \"foreach\" (temporaries as large as all "
     "parameters); the step's memory traffic is Hugging Face's Adafactor loop whichever is chosen (README)",
     "\"for-loop\"", nullptr},
}};

class AdafactorOptimizer {
 public:
  static constexpr sdk::PluginInfo info{
      "adafactor", "1.2.0",
      "Adafactor: factored second moment, rows + cols per matrix (Shazeer and Stern 2018, arXiv 1804.04235)",
      sdk::Kind::optimizer, sdk::Phase::optimizer};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit AdafactorOptimizer(sdk::Options& options)
      : states_dtype_(options.attribute(MEMPLAN_ATTR_DTYPE_OPTIMIZER_STATES)),
        layout_(options),
        step_(options),
        traffic_(options) {
    if (!options.model().has_architecture)
      options.fail(
          "adafactor keeps a row and a column vector per weight matrix, so it needs the matrices' shapes; give the "
          "model's architecture (a preset, or layers, hidden, heads, ...) instead of only params");
    const std::optional<double> beta1 = options.number("beta1");
    if (beta1 && !(*beta1 >= 0.0 && *beta1 < 1.0))
      options.fail("beta1", "must be in [0, 1), got " + memplan::support::number(*beta1));
    const std::optional<bool> first_moment = options.boolean("first_moment");
    if (beta1 && first_moment && !*first_moment)
      options.fail("beta1",
                   "keeps a first moment (Hugging Face's Adafactor keeps exp_avg whenever beta1 is set), but "
                   "first_moment = false; remove one of the two");
    first_moment_ = first_moment.value_or(beta1.has_value());
    implementation_ = memplan::support::read_implementation(options, Implementation::for_loop,
                                                            kTemporaries.fused_available, "adafactor");
  }

  void apply(sdk::Context& ctx) {
    const double state_bytes = ctx.required_attr_double(states_dtype_, MEMPLAN_ATTR_DTYPE_OPTIMIZER_STATES);
    const memplan::support::RankLayout ranks = memplan::support::rank_layout(ctx, layout_);
    // The step's traffic: factored matrices and 1-D (or unknown) elements.
    traffic_.add_per_item(ctx, [&](const sdk::ItemRef& item, double gradient, double master) {
      const memplan::support::TensorShapes shapes = memplan::support::tensor_shapes(item, ctx.model(), ranks);
      const double factored = shapes.known ? std::min(shapes.matrix_elements(), item.elements()) : 0.0;
      const double weight = item.bytes_per_element();
      using memplan::support::hf_adafactor_bytes_per_element;
      return factored * hf_adafactor_bytes_per_element(gradient, weight, master, true, first_moment_) +
             (item.elements() - factored) * hf_adafactor_bytes_per_element(gradient, weight, master, false, first_moment_);
    });
    // The states are appended after the weights, in the weights' order:
    // collected in batch_ (kept between evaluations) and added in one call.
    const sdk::Items items = ctx.items();
    const size_t weights = items.size();
    batch_.clear();
    for (const sdk::ItemRef item : items) {
      if (item.role() != sdk::Role::weights || !item.trainable()) continue;
      const memplan::support::TensorShapes shapes = memplan::support::tensor_shapes(item, ctx.model(), ranks);
      // Unknown shapes (adapters, out-of-tree classes): the full second
      // moment, an upper bound.
      double second = item.elements();
      if (shapes.known) second = shapes.matrices * (shapes.rows + shapes.cols) + shapes.vector_elements;
      sdk::ItemRef states = batch_.copy_of(item);
      states.set_role(sdk::Role::optimizer_states);
      states.set_lifetime(sdk::Lifetime::persistent);
      states.set_elements(second + (first_moment_ ? item.elements() : 0.0));
      states.set_bytes_per_element(state_bytes);
    }
    ctx.add(batch_);
    memplan::support::add_step_temporaries(ctx, weights, implementation_, kTemporaries, state_bytes, step_);
  }

 private:
  // Resolved once, in the constructor: no attribute looked up by name per evaluation.
  sdk::Attribute states_dtype_;
  memplan::support::LayoutReader layout_;
  memplan::support::StepTemporaryNames step_;
  memplan::support::OptimizerTraffic traffic_;
  sdk::ItemBatch batch_;  // the state items, cleared each evaluation, its capacity kept
  bool first_moment_ = false;
  Implementation implementation_ = Implementation::for_loop;
};

}  // namespace

MEMPLAN_PLUGIN(AdafactorOptimizer)
