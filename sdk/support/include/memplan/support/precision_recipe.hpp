// Precision recipes: a dtype per role, each overridable from the scenario.
//
// The recipe sets the dtype attributes other plugins read, gives the model's
// weights their storage size and, when training, adds for every trainable
// weight its gradient, its master copy (when the recipe keeps one) and an
// accumulation buffer (when gradients are accumulated in a wider dtype).
//
// Mixed precision follows Micikevicius et al. 2017 (arXiv 1710.03740): 16-bit
// weights, activations and gradients, an fp32 master copy of the weights and
// fp32 optimizer states. An fp32 gradient accumulation buffer next to the
// 16-bit gradients is what Megatron-LM keeps as `main_grad`
// (accumulate_allreduce_grads_in_fp32) and what the Hugging Face Ultra-Scale
// Playbook counts when it arrives at 20 bytes per parameter with Adam.
//
// `main_grads` is the other fp32 gradient copy Megatron-LM keeps: with 16-bit
// gradients its optimizer steps from an fp32 copy of each gradient, made at
// the step beside the fp32 master weights and sharded with them by the
// distributed optimizer (megatron/core/optimizer/distrib_optimizer.py,
// _copy_model_grads_to_main_grads: shard_main_param.grad =
// shard_model_grad.float(), a new fp32 tensor each step, released when
// zero_grad sets the grads to None before the next step). It is
// the 4 bytes that make the Megatron-LM documentation's "float16 param,
// float16 grads" row 20 bytes (4 + 16/d distributed;
// docs/source/api-guide/dist_optimizer.md: "4 fp32 main grad elements
// (separate buffer, owned by the optimizer)"). The copy belongs to the
// optimizer's state (the documentation counts it in the 16/d), so its items
// have role optimizer_states, which ZeRO stage 1 and up shards, and lifetime
// transient_optimizer: the step timeline adds them to the optimizer phase.
//
// `gradient_buffer = "persistent"` gives the gradients the lifetime of the
// whole run: Megatron-LM's DistributedDataParallel allocates one contiguous
// grad buffer (fp32 for bf16 models: grad_reduce_in_fp32, forced by
// --bf16 in megatron/training/arguments.py) when the model is wrapped, and
// param.main_grad are views into it (megatron/core/distributed/
// param_and_grad_buffer.py, torch.zeros of the buffer's numel; core_r0.14.0 =
// 32ad5c89). So its gradients occupy memory during forward too, not only from
// backward on as PyTorch's .grad tensors do.
//
// Traits give name, version, summary and defaults (RecipeDefaults).
//
// A recipe may extend this one (Traits::Extension, e.g. the fp8 recipe's
// fp8 weight copies): it declares extra options, reads them, and adds items
// next to each weight.
#pragma once

#include <memplan/dtypes.hpp>
#include <memplan/sdk.hpp>

#include <string_view>

#include <array>
#include <optional>
#include <span>
#include <string>

namespace memplan::support {

// The suffix of the recipe's fp32 gradient copies for the optimizer step
// (main_grads: "<weight>.main_grad", role optimizer_states, lifetime
// transient_optimizer). Plugins that resize or move them (zero's sub-group
// step, offload) find them with is_main_grad_copy, so the name lives here once.
inline constexpr std::string_view kMainGradSuffix = ".main_grad";

inline bool is_main_grad_copy(const sdk::ItemRef& item) {
  return item.role() == sdk::Role::optimizer_states && item.lifetime() == sdk::Lifetime::transient_optimizer &&
         item.name().ends_with(kMainGradSuffix);
}

struct RecipeDefaults {
  const char* weights;
  const char* gradients;
  const char* master_weights;  // "none" when the recipe keeps no master copy
  const char* optimizer_states;
  const char* activations;
};

inline constexpr std::array<memplan_option_spec, 9> kPrecisionOptions{{
    {"weights", MEMPLAN_OPTION_STRING, "dtype of the weights used in forward and backward", "the recipe's", nullptr},
    {"gradients", MEMPLAN_OPTION_STRING, "dtype of the gradients backward produces", "the recipe's", nullptr},
    {"master_weights", MEMPLAN_OPTION_STRING, "dtype of the master copy the optimizer updates, or \"none\"",
     "the recipe's", nullptr},
    {"optimizer_states", MEMPLAN_OPTION_STRING, "dtype of the optimizer states", "the recipe's", nullptr},
    {"activations", MEMPLAN_OPTION_STRING, "dtype of stored activations", "the recipe's", nullptr},
    {"grad_accumulation", MEMPLAN_OPTION_STRING,
     "dtype of a separate gradient accumulation buffer (Megatron main_grad), or \"none\"", "\"none\"", nullptr},
    {"main_grads", MEMPLAN_OPTION_STRING,
     "dtype of the gradient copy the optimizer steps from, made at the step and sharded with the master weights "
     "(Megatron-LM's fp32 main grads for 16-bit gradients), or \"none\"",
     "\"none\"", nullptr},
    {"gradient_buffer", MEMPLAN_OPTION_STRING,
     "when the gradients' memory exists: \"backward\" (allocated as backward produces them, as PyTorch's .grad) or "
     "\"persistent\" (one contiguous buffer allocated when the model is built and kept, as Megatron-LM's "
     "DistributedDataParallel grad buffer)",
     "\"backward\"", nullptr},
    {"adapters", MEMPLAN_OPTION_STRING,
     "dtype of the adapter weights (class adapter, e.g. from 'lora') and of their gradients (PyTorch's .grad takes "
     "its parameter's dtype); master copies and optimizer states keep the recipe's",
     "the weights'", nullptr},
}};

// The dtypes a recipe resolved, for extensions.
struct RecipeDtypes {
  double weights = 0;
  double gradients = 0;
  std::optional<double> master_weights;
  double optimizer_states = 0;
  double activations = 0;
};

// No extension: the plain recipe. An extension's add_items appends what it
// keeps next to one weight (already at the weights' dtype) to `batch`; its
// weight_bytes says one weight's dtype, the recipe's `weights` unless the
// extension keeps some weights in another (fp8 primary weights: only the
// linear layers').
struct NoRecipeExtension {
  static constexpr std::array<memplan_option_spec, 0> kOptions{};
  NoRecipeExtension(sdk::Options&, const RecipeDtypes&) {}
  void add_items(const sdk::Context&, sdk::ItemBatch&, const sdk::ItemRef&) {}
};

template <typename Traits>
struct RecipeExtensionOf {
  using type = NoRecipeExtension;
};
template <typename Traits>
  requires requires { typename Traits::Extension; }
struct RecipeExtensionOf<Traits> {
  using type = typename Traits::Extension;
};

template <size_t A, size_t B>
constexpr std::array<memplan_option_spec, A + B> concat_options(const std::array<memplan_option_spec, A>& a,
                                                                const std::array<memplan_option_spec, B>& b) {
  std::array<memplan_option_spec, A + B> all{};
  for (size_t i = 0; i < A; ++i) all[i] = a[i];
  for (size_t i = 0; i < B; ++i) all[A + i] = b[i];
  return all;
}

template <typename Traits>
class PrecisionRecipe {
  using Extension = typename RecipeExtensionOf<Traits>::type;
  static constexpr auto kOptions = concat_options(kPrecisionOptions, Extension::kOptions);

 public:
  static constexpr sdk::PluginInfo info{Traits::name, Traits::version, Traits::summary, sdk::Kind::precision,
                                        sdk::Phase::precision, sdk::Reads::nothing};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  // The recipe's extension, for a plugin that wraps the recipe and sets more attributes from its options.
  const Extension& extension() const { return extension_; }

  explicit PrecisionRecipe(sdk::Options& options)
      : extension_(options, read_dtypes(options)),
        weights_dtype_(options.attribute(MEMPLAN_ATTR_DTYPE_WEIGHTS)),
        gradients_dtype_(options.attribute(MEMPLAN_ATTR_DTYPE_GRADIENTS)),
        master_weights_dtype_(options.attribute(MEMPLAN_ATTR_DTYPE_MASTER_WEIGHTS)),
        optimizer_states_dtype_(options.attribute(MEMPLAN_ATTR_DTYPE_OPTIMIZER_STATES)),
        activations_dtype_(options.attribute(MEMPLAN_ATTR_DTYPE_ACTIVATIONS)) {}

  void apply(sdk::Context& ctx) {
    const RecipeDtypes& d = dtypes_;
    ctx.set_attr(weights_dtype_, d.weights);
    // With adapters in their own dtype the gradients that train (theirs) are in
    // it: the sharding plugins size reductions from dtype.gradients (as the
    // quantized plugin sets it to its adapters').
    ctx.set_attr(gradients_dtype_, adapters_ ? *adapters_ : d.gradients);
    ctx.set_attr(master_weights_dtype_, d.master_weights.value_or(0.0));
    ctx.set_attr(optimizer_states_dtype_, d.optimizer_states);
    ctx.set_attr(activations_dtype_, d.activations);
    const bool training = ctx.training();
    batch_.clear();
    // Each weight gets its dtype in place; what it adds (in the order the
    // items come) is appended in one call after the walk.
    for (sdk::ItemRef item : ctx.items()) {
      if (item.role() != sdk::Role::weights) continue;
      // PEFT's get_peft_model(autocast_adapter_dtype=True), its default, upcasts bf16/fp16 adapters to fp32
      // (peft src/peft/tuners/tuners_utils.py @ d787f51b, _cast_adapter_dtype): `adapters` gives them their own dtype.
      const bool adapter = adapters_ && item.param_class() == sdk::ParamClass::adapter;
      item.set_bytes_per_element(adapter ? *adapters_ : weight_bytes(item, d.weights));
      extension_.add_items(ctx, batch_, item);
      if (!training || !item.trainable()) continue;
      add_copy(item, sdk::Role::gradients, gradient_lifetime_, adapter ? *adapters_ : d.gradients);
      // With gradients kept from step to step, an embedding's backward makes a dense gradient that is then
      // added into the kept one (autograd's AccumulateGrad adds a new gradient into an existing .grad; Megatron's
      // hook into main_grad): alive at the embedding's backward, the last of backward (backward_end). Where the
      // LM head shares the weight, the head's gradient comes first, right after the loss's, and waits in the
      // leaf's input buffer until the embedding's arrives (torch/csrc/autograd/input_buffer.cpp): a transient
      // of the whole backward (the end's second copy beside it is not counted; on a pipeline's stages, which
      // hold only one of the two uses, the precision plugin cannot tell: the whole backward stands for both).
      // Before (bf16, fp32, mixed-bf16, mixed-fp16 1.2.1; fp8 1.4.1; autocast 1.0.1) an untied embedding's was
      // a transient of the whole backward too, counted at its start beside every activation (found on an XLM-R
      // run of the 2021 Trainer: +7.0 -> +0.9 %).
      // An untied LM head's the same way, at its backward right after the loss's (backward_start).
      if (gradient_lifetime_ == sdk::Lifetime::persistent)
        if (const std::optional<sdk::Lifetime> dense = dense_gradient_lifetime(ctx, item))
          add_copy(item, sdk::Role::gradients, *dense, item.bytes_per_element()).set_name(unfused_names_(ctx, item));
      // The accumulation buffer lives across steps (Megatron allocates it once).
      if (grad_accumulation_) add_copy(item, sdk::Role::gradients, sdk::Lifetime::persistent, *grad_accumulation_);
      if (d.master_weights) add_copy(item, sdk::Role::master_weights, sdk::Lifetime::persistent, *d.master_weights);
      if (main_grads_)
        add_copy(item, sdk::Role::optimizer_states, sdk::Lifetime::transient_optimizer, *main_grads_)
            .set_name(main_grad_names_(ctx, item));
    }
    ctx.add(batch_);
  }

 private:
  // One weight's dtype: the extension's where it says (weight_bytes), else the recipe's `weights`.
  double weight_bytes(const sdk::ItemRef& item, double weights) const {
    if constexpr (requires { extension_.weight_bytes(item, weights); })
      return extension_.weight_bytes(item, weights);
    else
      return weights;
  }

  sdk::ItemRef add_copy(const sdk::ItemRef& item, sdk::Role role, sdk::Lifetime lifetime, double bytes) {
    sdk::ItemRef copy = batch_.copy_of(item);
    copy.set_role(role);
    copy.set_lifetime(lifetime);
    copy.set_bytes_per_element(bytes);
    return copy;
  }

  // Reads the role dtypes into the members and returns them for the extension.
  const RecipeDtypes& read_dtypes(sdk::Options& options) {
    const RecipeDefaults& d = Traits::defaults;
    dtypes_.weights = dtype(options, "weights", d.weights, false).value();
    dtypes_.gradients = dtype(options, "gradients", d.gradients, false).value();
    dtypes_.master_weights = dtype(options, "master_weights", d.master_weights, true);
    dtypes_.optimizer_states = dtype(options, "optimizer_states", d.optimizer_states, false).value();
    dtypes_.activations = dtype(options, "activations", d.activations, false).value();
    grad_accumulation_ = dtype(options, "grad_accumulation", "none", true);
    const std::string buffer = options.string("gradient_buffer").value_or("backward");
    if (buffer != "backward" && buffer != "persistent")
      options.fail("gradient_buffer", "must be \"backward\" or \"persistent\", not \"" + buffer + "\"");
    gradient_lifetime_ = buffer == "persistent" ? sdk::Lifetime::persistent : sdk::Lifetime::gradient;
    main_grads_ = dtype(options, "main_grads", "none", true);
    if (options.string("adapters")) adapters_ = dtype(options, "adapters", "none", false);
    return dtypes_;
  }

  // When a large weight's dense gradient exists before it is added into the kept one (above): none for
  // the layers' weights, whose gradients are small beside the layer's backward.
  static std::optional<sdk::Lifetime> dense_gradient_lifetime(const sdk::Context& ctx, const sdk::ItemRef& item) {
    switch (item.param_class()) {
      case sdk::ParamClass::embedding:
        return ctx.model().tied_embeddings != 0 ? sdk::Lifetime::transient_backward : sdk::Lifetime::backward_end;
      case sdk::ParamClass::position_embedding: return sdk::Lifetime::backward_end;
      case sdk::ParamClass::lm_head: return sdk::Lifetime::backward_start;
      default: return std::nullopt;
    }
  }

  static std::optional<double> dtype(sdk::Options& options, const char* key, const char* fallback, bool may_be_none) {
    const std::string name = options.string(key).value_or(fallback);
    if (may_be_none && name == "none") return std::nullopt;
    if (auto bytes = sdk::dtype_bytes(name)) return bytes;
    options.fail(key, "is \"" + name + "\", not a known dtype; use " + sdk::dtype_names() +
                          (may_be_none ? ", or \"none\"" : ""));
  }

  // Declared before extension_, which is built from them.
  RecipeDtypes dtypes_;
  std::optional<double> grad_accumulation_;
  std::optional<double> main_grads_;
  std::optional<double> adapters_;  // the adapters' dtype when it is not the weights'
  sdk::Lifetime gradient_lifetime_ = sdk::Lifetime::gradient;
  Extension extension_;
  sdk::Attribute weights_dtype_;
  sdk::Attribute gradients_dtype_;
  sdk::Attribute master_weights_dtype_;
  sdk::Attribute optimizer_states_dtype_;
  sdk::Attribute activations_dtype_;
  sdk::ItemBatch batch_;
  sdk::SuffixedNames unfused_names_{".grad"};        // the embedding's 16-bit gradient before it is fused
  sdk::SuffixedNames main_grad_names_{kMainGradSuffix.data()};  // the optimizer's fp32 gradient copy
};

}  // namespace memplan::support
