// 'autocast' precision recipe: PyTorch automatic mixed precision over fp32
// parameters (torch.autocast / torch.cuda.amp.autocast, with a GradScaler for
// fp16), which is what the Hugging Face Trainer runs for --fp16 / --bf16 when
// the model was loaded in fp32, and what plain PyTorch AMP loops run.
//
// Roles: fp32 weights, fp32 gradients (.grad of fp32 leaves), no master copy
// (the optimizer steps the weights themselves), fp32 optimizer states; the
// activations dtype is the autocast dtype (fp16 by default, bf16 for
// torch.autocast(dtype=torch.bfloat16)). With Adam: 4 + 4 + 8 = 16 bytes per
// parameter, plus the cast copies below.
//
// The cast copies (pytorch/pytorch aten/src/ATen/autocast_mode.cpp @
// 008ec6b1840c94ff6d0f685bc10fbf585167c673, cached_cast): an op on autocast's
// lower-precision list (linear, matmul, addmm, ...) casts its fp32 arguments;
// a cast of an fp32 leaf that requires grad and is not a view (a trained
// weight) is cached (can_try_cache) and reused until the outermost autocast
// context exits, which clears the cache (clear_cache, called when nesting
// returns to 0, "which should occur at the end of each forward pass"). The
// matrix multiply saves the 16-bit copy for its backward. So each trained
// linear weight has a 16-bit copy from its layer's forward until its
// layer's backward: items `<name>.autocast` (conventions.h,
// MEMPLAN_CACHED_CAST_SUFFIX), role buffers, lifetime activation, with the
// weight's class, layers and count (layout plugins split them with their
// weights). Linear weights are the classes support::sharding::is_linear
// lists, the LM head, `other` (BERT's pooler, a params-only model's one
// item), and the token embedding when it is tied to the LM head (F.linear
// with the embedding's weight). The biases' cached casts (vectors) are not
// counted. Under gradient checkpointing the activation model re-times them
// (the megatron plugin: all cached until the forward ends, one layer's again
// in backward's recomputation).
//
// It also sets dtype.residual (conventions.h) to the weights' dtype: the
// residual stream and the norms stay fp32 under autocast (layer_norm is on
// the fp32 list; an add of a 16-bit linear output and the fp32 residual
// promotes to fp32), which the megatron plugin's eager layers read.
//
// Not modelled: GradScaler's tensors (the scale, the growth tracker, one
// found_inf and one inverse scale per device: 4 bytes each; unscale_ works in
// place, torch/amp/grad_scaler.py); a frozen fp32 weight's casts, which are
// not cached (it does not require grad) and which the matrix multiply saves
// when its input requires grad; FSDP's flat-parameter views, whose casts are
// not cached (is_view).
#include <memplan/conventions.h>
#include <memplan/support/parameter_shapes.hpp>
#include <memplan/support/precision_recipe.hpp>
#include <memplan/support/sharding.hpp>

namespace {

namespace sdk = memplan::sdk;

// The linear weights whose casts autocast caches and saves for backward.
inline bool cast_for_matmul(sdk::ParamClass param_class, bool tied_embeddings) {
  return memplan::support::sharding::is_linear(param_class) || param_class == sdk::ParamClass::lm_head ||
         param_class == sdk::ParamClass::other || (tied_embeddings && param_class == sdk::ParamClass::embedding);
}

class AutocastCopies {
 public:
  static constexpr std::array<memplan_option_spec, 0> kOptions{};

  AutocastCopies(sdk::Options& options, const memplan::support::RecipeDtypes& dtypes)
      : cast_bytes_(dtypes.activations < dtypes.weights ? dtypes.activations : 0.0),
        tied_embeddings_(options.model().tied_embeddings != 0),
        names_(MEMPLAN_CACHED_CAST_SUFFIX) {
    if (!options.training())
      options.fail("models autocast training (fp32 weights, gradients and states, 16-bit casts of the trained "
                   "weights kept for backward), so it needs mode = \"train\"; for inference use [precision] use = "
                   "\"bf16\" or \"fp32\"");
    if (dtypes.activations != 2 && dtypes.activations != dtypes.weights)
      options.fail("activations", "is the dtype autocast computes in: \"fp16\" (the default) or \"bf16\"");
  }

  void add_items(const sdk::Context& ctx, sdk::ItemBatch& batch, const sdk::ItemRef& weight) {
    if (cast_bytes_ <= 0 || !weight.trainable() || !cast_for_matmul(weight.param_class(), tied_embeddings_) ||
        memplan::support::is_vector_weight(weight.name()))
      return;
    sdk::ItemRef copy = batch.copy_of(weight);
    copy.set_name(names_(ctx, weight));
    copy.set_role(sdk::Role::buffers);
    copy.set_lifetime(sdk::Lifetime::activation);
    copy.set_trainable(false);
    copy.set_bytes_per_element(cast_bytes_);
  }

 private:
  double cast_bytes_;  // 0: no casts (the activations are as wide as the weights)
  bool tied_embeddings_;
  sdk::SuffixedNames names_;
};

struct AutocastTraits {
  static constexpr const char* name = "autocast";
  static constexpr const char* version = "1.0.1";
  static constexpr const char* summary =
      "PyTorch autocast (AMP) over fp32 weights: fp32 weights, gradients and states, 16-bit casts of the trained "
      "linear weights from forward to backward, fp32 residual stream";
  static constexpr memplan::support::RecipeDefaults defaults{"fp32", "fp32", "none", "fp32", "fp16"};
  using Extension = AutocastCopies;
};

using Recipe = memplan::support::PrecisionRecipe<AutocastTraits>;

// The recipe, and dtype.residual: the weights' dtype when autocast computes
// narrower (the residual stream and the norms stay in it), else 0.
class AutocastPrecision {
 public:
  static constexpr sdk::PluginInfo info = Recipe::info;
  static std::span<const memplan_option_spec> options() { return Recipe::options(); }

  explicit AutocastPrecision(sdk::Options& options)
      : recipe_(options),
        residual_attr_(options.attribute(MEMPLAN_ATTR_DTYPE_RESIDUAL)),
        weights_attr_(options.attribute(MEMPLAN_ATTR_DTYPE_WEIGHTS)),
        activations_attr_(options.attribute(MEMPLAN_ATTR_DTYPE_ACTIVATIONS)) {}

  void apply(sdk::Context& ctx) {
    recipe_.apply(ctx);
    const double weights = ctx.attr_double(weights_attr_, 0);
    const double activations = ctx.attr_double(activations_attr_, 0);
    ctx.set_attr(residual_attr_, activations < weights ? weights : 0.0);
  }

 private:
  Recipe recipe_;
  sdk::Attribute residual_attr_;
  sdk::Attribute weights_attr_;
  sdk::Attribute activations_attr_;
};

}  // namespace

MEMPLAN_PLUGIN(AutocastPrecision)
