// 'fp8' precision recipe: fp8 GEMMs as Transformer Engine runs them in
// Megatron-LM (Micikevicius et al. 2022, "FP8 Formats for Deep Learning",
// arXiv 2209.05433: fp8 is for the matrix multiplications' inputs, while the
// weights are kept and updated in higher precision).
//
// Roles: bf16 weights, fp32 gradients, fp32 master weights, fp32 optimizer
// states, bf16 activations. The gradients are fp32 because Megatron-LM
// accumulates and all-reduces them in fp32 whenever the weights are bf16
// (megatron/training/arguments.py: "bfloat16 requires gradient accumulation
// and all-reduce to be done in fp32"; Transformer Engine's
// fuse_wgrad_accumulation writes weight gradients into that fp32 main_grad);
// set gradients = "bf16" for --grad-reduce-in-bf16.
//
// On top of mixed precision, every linear layer (attention q, k, v, o; dense
// MLP; MoE experts) has fp8 copies of its weight for the GEMMs. From
// Transformer Engine's Linear (transformer_engine/pytorch/module/linear.py,
// get_fp8_weights_scratchpad and _Linear.forward, TE 1.x):
//   - with is_first_microbatch set (cache_fp8_weights = true), the module keeps
//     persistent buffers weight1_fp8 and weight1_t_fp8, filled in the first
//     micro-batch of a step (fp8_cast_transpose_fused) and reused by the others:
//     1 byte per element for the fp8 weight and 1 for its fp8 transpose, which
//     the backward pass's dgrad GEMM needs (Hopper's fp8 GEMMs take one layout
//     only). Megatron-LM's TE layers pass is_first_microbatch unless
//     --disable-parameter-transpose-cache (megatron/core/extensions/
//     transformer_engine.py, TELinear.forward). Items `<name>.fp8`, role
//     buffers, persistent.
//   - with is_first_microbatch = None (cache_fp8_weights = false), each forward
//     casts into fresh tensors and saves the transpose for backward
//     (ctx.save_for_backward(..., weight_t_fp8, ...)): 1 byte per element held
//     from a layer's forward to its backward. Items `<name>.fp8_t`, role
//     buffers, lifetime activation. Not counted: the row-wise copy of the one
//     layer being computed (freed after its GEMM), and more than one
//     micro-batch's copies under pipeline parallelism.
// With weights = "fp8" (Transformer Engine's fp8_model_init: fp8 primary
// weights, no bf16 copy) only the transpose remains. fp8_transpose = false
// drops the transpose (a GPU whose fp8 GEMMs take both layouts).
//
// The linear layers' inputs (1.3.0): Transformer Engine saves the fp8 cast of
// each input for the weight gradient, not the 16-bit tensor (TE v1.9
// module/linear.py 118-150 and 299-337: fp8_cast_transpose_fused, the fp8
// transpose saved_inputmat_t; layernorm_linear.py 137 and 317-327: the norm
// writes ln_out in uint8 and saves it; layernorm_mlp.py 264-275 and 462-478:
// the activation writes gelu_out in fp8, saved, beside the 16-bit fc1_out):
// dtype.linear_inputs = 1 (conventions.h), which activation models read;
// saved_inputs = "activations" for a recipe that keeps them 16-bit
// (override_linear_precision.wgrad).
// Not modelled: per-tensor scaling metadata (a few floats per tensor); MXFP8's per-32-element scales.
// The embedding, LM head, norms and MoE router are not run in fp8 (Megatron's
// output layer and router are not Transformer Engine modules). A params-only
// model's one `parameters` item is treated as linear layers, which overstates
// the copies by the embedding and LM-head share.
#include <memplan/support/precision_recipe.hpp>
#include <memplan/support/parameter_shapes.hpp>
#include <memplan/support/sharding.hpp>

namespace {

namespace sdk = memplan::sdk;

class Fp8WeightCopies {
 public:
  static constexpr std::array<memplan_option_spec, 3> kOptions{{
      {"cache_fp8_weights", MEMPLAN_OPTION_BOOL,
       "keep each linear layer's fp8 weight (and transpose) for the whole step, as Transformer Engine does with "
       "is_first_microbatch (Megatron-LM's default); false: cast in every forward and keep the transpose until "
       "backward",
       "true", nullptr},
      {"fp8_transpose", MEMPLAN_OPTION_BOOL,
       "keep an fp8 transpose of each linear weight for the backward pass (Hopper fp8 GEMMs need it)", "true", nullptr},
      {"saved_inputs", MEMPLAN_OPTION_STRING,
       "what the linear layers keep of their inputs for the weight gradients: \"fp8\" (Transformer Engine saves the "
       "fp8 cast, 1 byte an element: dtype.linear_inputs) or \"activations\" (the 16-bit input, as a recipe with "
       "override_linear_precision.wgrad)",
       "\"fp8\"", "fp8,activations"},
  }};

  Fp8WeightCopies(sdk::Options& options, const memplan::support::RecipeDtypes& dtypes)
      : cache_(options.boolean("cache_fp8_weights").value_or(true)),
        saved_inputs_fp8_(saved_inputs_fp8(options)),
        transpose_(options.boolean("fp8_transpose").value_or(true)),
        names_(cache_ ? ".fp8" : ".fp8_t") {
    if (!options.training())
      options.fail(
          "the fp8 recipe models Transformer Engine's fp8 training (fp8 weight copies next to bf16 weights and fp32 "
          "master weights), so it needs mode = \"train\"; for fp8 weights in inference use [precision] use = \"bf16\" "
          "with weights = \"fp8\", or the quantized plugin");
    const bool fp8_primary = dtypes.weights == 1.0;  // fp8_model_init: the weight itself is fp8
    fp8_primary_ = fp8_primary;
    sixteen_bit_ = dtypes.activations;
    // Cached: the fp8 weight (unless it is the weight itself) and its transpose.
    cached_bytes_ = (fp8_primary ? 0.0 : 1.0) + (transpose_ ? 1.0 : 0.0);
    // Not cached: what backward keeps, the transpose (or the fp8 weight itself
    // when there is no transpose and the weight is not already fp8).
    saved_bytes_ = (transpose_ || !fp8_primary) ? 1.0 : 0.0;
  }

  void add_items(const sdk::Context& ctx, sdk::ItemBatch& batch, const sdk::ItemRef& weight) {
    if (!runs_in_fp8(weight.param_class()) || memplan::support::is_vector_weight(weight.name())) return;
    const double bytes = cache_ ? cached_bytes_ : saved_bytes_;
    if (bytes <= 0) return;
    sdk::ItemRef copy = batch.copy_of(weight);
    copy.set_name(names_(ctx, weight));
    copy.set_role(sdk::Role::buffers);
    copy.set_lifetime(cache_ ? sdk::Lifetime::persistent : sdk::Lifetime::activation);
    copy.set_trainable(false);
    copy.set_bytes_per_element(bytes);
  }

  // fp8 primary weights are Transformer Engine's modules' (fp8_model_init makes TE's Linear, LayerNormLinear and
  // LayerNormMLP allocate fp8 weights: their matrices): the embeddings, the output layer (Megatron-Core's
  // ColumnParallelLinear, not a TE module), the norms and the biases stay in the 16-bit dtype. Found on
  // Megatron-LM's CI goldens (--fp8-param-gather tiny GPT tests: the bf16 embedding counted at 1 byte).
  double weight_bytes(const sdk::ItemRef& weight, double weights) const {
    if (!fp8_primary_) return weights;
    return runs_in_fp8(weight.param_class()) && !memplan::support::is_vector_weight(weight.name()) ? weights
                                                                                                  : sixteen_bit_;
  }

  bool saved_inputs_fp8() const { return saved_inputs_fp8_; }

 private:
  static bool saved_inputs_fp8(sdk::Options& options) {
    const std::string saved = options.string("saved_inputs").value_or("fp8");
    if (saved != "fp8" && saved != "activations")
      options.fail("saved_inputs", "must be \"fp8\" (Transformer Engine saves the fp8 cast of each linear layer's "
                                   "input) or \"activations\" (the input itself), not \"" + saved + "\"");
    return saved == "fp8";
  }

  // The linear layers (support::sharding::is_linear, the one list of them),
  // and a params-only model's one item.
  static bool runs_in_fp8(sdk::ParamClass param_class) {
    return memplan::support::sharding::is_linear(param_class) || param_class == sdk::ParamClass::other;
  }

  bool cache_;
  bool fp8_primary_ = false;   // weights = "fp8": the linear layers' weights are fp8 themselves
  double sixteen_bit_ = 2;     // the other weights' bytes (the recipe's activations dtype)
  bool saved_inputs_fp8_;
  bool transpose_;
  double cached_bytes_ = 0;
  double saved_bytes_ = 0;
  sdk::SuffixedNames names_;  // the weight's name + ".fp8" (cached) or ".fp8_t" (kept for backward)
};

struct Fp8Traits {
  static constexpr const char* name = "fp8";
  static constexpr const char* version = "1.4.1";
  static constexpr const char* summary =
      "fp8 training (Transformer Engine, Micikevicius et al. 2022): fp8 weight copies beside bf16 weights, fp32 "
      "master weights and gradients";
  static constexpr memplan::support::RecipeDefaults defaults{"bf16", "fp32", "fp32", "fp32", "bf16"};
  using Extension = Fp8WeightCopies;
};

using Recipe = memplan::support::PrecisionRecipe<Fp8Traits>;

// The recipe, and dtype.linear_inputs: 1 where the linear layers save their inputs' fp8 cast.
class Fp8Precision {
 public:
  static constexpr sdk::PluginInfo info = Recipe::info;
  static std::span<const memplan_option_spec> options() { return Recipe::options(); }

  explicit Fp8Precision(sdk::Options& options)
      : recipe_(options), linear_inputs_attr_(options.attribute(MEMPLAN_ATTR_DTYPE_LINEAR_INPUTS)) {}

  void apply(sdk::Context& ctx) {
    recipe_.apply(ctx);
    ctx.set_attr(linear_inputs_attr_, recipe_.extension().saved_inputs_fp8() ? 1.0 : 0.0);
  }

 private:
  Recipe recipe_;
  sdk::Attribute linear_inputs_attr_;
};

}  // namespace

MEMPLAN_PLUGIN(Fp8Precision)
