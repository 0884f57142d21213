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
#pragma once

#include <memplan/dtypes.hpp>
#include <memplan/sdk.hpp>

#include <array>
#include <optional>
#include <string>

namespace memplan::plugins {

struct RecipeDefaults {
  const char* weights;
  const char* gradients;
  const char* master_weights;  // "none" when the recipe keeps no master copy
  const char* optimizer_states;
  const char* activations;
};

inline constexpr std::array<memplan_option_spec, 6> kPrecisionOptions{{
    {"weights", MEMPLAN_OPTION_STRING, "dtype of the weights used in forward and backward", "the recipe's"},
    {"gradients", MEMPLAN_OPTION_STRING, "dtype of the gradients backward produces", "the recipe's"},
    {"master_weights", MEMPLAN_OPTION_STRING, "dtype of the master copy the optimizer updates, or \"none\"",
     "the recipe's"},
    {"optimizer_states", MEMPLAN_OPTION_STRING, "dtype of the optimizer states", "the recipe's"},
    {"activations", MEMPLAN_OPTION_STRING, "dtype of stored activations", "the recipe's"},
    {"grad_accumulation", MEMPLAN_OPTION_STRING,
     "dtype of a separate gradient accumulation buffer (Megatron main_grad), or \"none\"", "\"none\""},
}};

template <typename Traits>
class PrecisionRecipe {
 public:
  static constexpr sdk::PluginInfo info{Traits::name, "1.0.0", Traits::summary, sdk::Kind::precision,
                                        sdk::Phase::precision};
  static std::span<const memplan_option_spec> options() { return kPrecisionOptions; }

  explicit PrecisionRecipe(sdk::Options& options) {
    const RecipeDefaults& d = Traits::defaults;
    weights_ = dtype(options, "weights", d.weights, false).value();
    gradients_ = dtype(options, "gradients", d.gradients, false).value();
    master_weights_ = dtype(options, "master_weights", d.master_weights, true);
    optimizer_states_ = dtype(options, "optimizer_states", d.optimizer_states, false).value();
    activations_ = dtype(options, "activations", d.activations, false).value();
    grad_accumulation_ = dtype(options, "grad_accumulation", "none", true);
  }

  void apply(sdk::Context& ctx) {
    ctx.set_attr(MEMPLAN_ATTR_DTYPE_WEIGHTS, weights_);
    ctx.set_attr(MEMPLAN_ATTR_DTYPE_GRADIENTS, gradients_);
    ctx.set_attr(MEMPLAN_ATTR_DTYPE_MASTER_WEIGHTS, master_weights_.value_or(0.0));
    ctx.set_attr(MEMPLAN_ATTR_DTYPE_OPTIMIZER_STATES, optimizer_states_);
    ctx.set_attr(MEMPLAN_ATTR_DTYPE_ACTIVATIONS, activations_);
    const bool training = ctx.training();
    const size_t count = ctx.size();
    for (size_t i = 0; i < count; ++i) {
      sdk::Item item = ctx.item(i);
      if (item.role != sdk::Role::weights) continue;
      item.bytes_per_element = weights_;
      ctx.set(i, item);
      if (!training || !item.trainable) continue;
      add_copy(ctx, item, sdk::Role::gradients, sdk::Lifetime::gradient, gradients_);
      // The accumulation buffer lives across steps (Megatron allocates it once).
      if (grad_accumulation_)
        add_copy(ctx, item, sdk::Role::gradients, sdk::Lifetime::persistent, *grad_accumulation_);
      if (master_weights_) add_copy(ctx, item, sdk::Role::master_weights, sdk::Lifetime::persistent, *master_weights_);
    }
  }

 private:
  static void add_copy(sdk::Context& ctx, sdk::Item item, sdk::Role role, sdk::Lifetime lifetime, double bytes) {
    item.role = role;
    item.lifetime = lifetime;
    item.bytes_per_element = bytes;
    ctx.add(item);
  }

  static std::optional<double> dtype(sdk::Options& options, const char* key, const char* fallback, bool may_be_none) {
    const std::string name = options.string(key).value_or(fallback);
    if (may_be_none && name == "none") return std::nullopt;
    if (auto bytes = sdk::dtype_bytes(name)) return bytes;
    options.fail(key, "is \"" + name + "\", not a known dtype; use " + sdk::dtype_names() +
                          (may_be_none ? ", or \"none\"" : ""));
  }

  double weights_ = 0;
  double gradients_ = 0;
  std::optional<double> master_weights_;
  double optimizer_states_ = 0;
  double activations_ = 0;
  std::optional<double> grad_accumulation_;
};

}  // namespace memplan::plugins
