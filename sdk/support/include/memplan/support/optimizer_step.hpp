// Temporaries of the optimizer step, by implementation, in PyTorch's
// torch.optim terms (https://pytorch.org/docs/stable/optim.html, "Algorithms"
// and the foreach/fused notes):
//
//   "for-loop"  the _single_tensor_<optimizer> functions: one parameter at a
//               time, so temporaries the size of one parameter tensor;
//   "foreach"   the _multi_tensor_<optimizer> functions: torch._foreach_* ops
//               over the whole group of parameters at once, so every
//               out-of-place op materializes a list of tensors as large as all
//               the group's parameters together;
//   "fused"     one kernel per group (torch._fused_adam_, apex/Transformer
//               Engine FusedAdam, DeepSpeed FusedAdam, bitsandbytes): updates
//               in place, allocates no parameter-sized temporaries.
//
// Each optimizer states how many parameter-sized temporaries are alive at its
// step's high point, read from the implementation's source (not measured; the
// plugin READMEs quote the lines). For the for-loop it counts the largest
// parameter tensor; the loop variable that holds the last temporary of one
// parameter is rebound only after the next parameter's temporaries exist, so
// it counts one more. The temporaries are items of lifetime
// transient_optimizer (the step timeline adds them to the optimizer phase
// only) and role optimizer_states, so ZeRO stage 1 and up divides them with
// the states: a sharded optimizer steps only its own shard. Their dtype is the
// optimizer states' (Adam's sqrt(exp_avg_sq) has exp_avg_sq's dtype).
#pragma once

#include <memplan/sdk.hpp>

#include <algorithm>
#include <optional>
#include <string>

#include <memplan/support/layout.hpp>
#include <memplan/support/parameter_shapes.hpp>

namespace memplan::support {

enum class Implementation { for_loop, foreach, fused };

inline const char* implementation_name(Implementation implementation) {
  switch (implementation) {
    case Implementation::for_loop: return "for-loop";
    case Implementation::foreach: return "foreach";
    case Implementation::fused: return "fused";
  }
  return "?";
}

// Parameter-sized temporaries alive at the step's high point.
struct StepTemporaries {
  double for_loop;       // x the largest parameter tensor
  double foreach;        // x every trainable element
  bool fused_available;  // a fused kernel exists (it allocates none)
};

inline constexpr const char* kImplementationHelp =
    "how the step runs, in torch.optim terms: \"for-loop\" (one tensor at a time), \"foreach\" (multi-tensor ops "
    "over the whole group: temporaries as large as all parameters) or \"fused\" (one kernel, no temporaries)";

// The spec of option `in_backward` (torchtune's optimizer_in_bwd), one text
// for every optimizer that offers it (ElementwiseOptimizer, BlockwiseAdam).
inline constexpr memplan_option_spec kInBackwardOption{
    "in_backward", MEMPLAN_OPTION_BOOL,
    "step each parameter inside backward as soon as its gradient exists, then free the gradient (torchtune's "
    "optimizer_in_bwd); needs grad_accum = 1",
    "false", nullptr};

// Reads `implementation`; `fallback` is the optimizer's default.
inline Implementation read_implementation(sdk::Options& options, Implementation fallback, bool fused_available,
                                          const char* optimizer) {
  const std::optional<std::string> value = options.string("implementation");
  if (!value) return fallback;
  if (*value == "for-loop") return Implementation::for_loop;
  if (*value == "foreach") return Implementation::foreach;
  if (*value == "fused") {
    if (!fused_available)
      options.fail("implementation", std::string("is \"fused\", but ") + optimizer +
                                         " has no fused implementation in torch.optim; use \"for-loop\" or "
                                         "\"foreach\"");
    return Implementation::fused;
  }
  options.fail("implementation", "is \"" + *value + "\", not an implementation; use \"for-loop\", \"foreach\"" +
                                     (fused_available ? " or \"fused\"" : ""));
}

// A for-loop step sizes its temporaries by the largest parameter tensor,
// which a model known only by its parameter count does not give.
inline void require_shapes_for_loop(sdk::Options& options, Implementation implementation,
                                    const StepTemporaries& temporaries) {
  if (implementation == Implementation::for_loop && temporaries.for_loop > 0 && !options.model().has_architecture)
    options.fail("implementation",
                 "is \"for-loop\", whose temporaries are the size of the largest parameter tensor, which a model "
                 "given only as params does not tell; give the architecture (a preset, or layers, hidden, ...), or "
                 "use \"foreach\" or \"fused\"");
}

// Elements of the largest parameter tensor among the first `weights` items
// (trainable weights on the GPU). An item of unknown shape counts as one tensor.
// `layout` gives the tensor- and expert-parallel ranks (resolved in the
// plugin's constructor).
inline double largest_trainable_tensor(const sdk::Context& ctx, size_t weights, const LayoutReader& layout) {
  const RankLayout ranks = rank_layout(ctx, layout);
  const sdk::Items items = ctx.items();  // read in place: no copy of a name
  double largest = 0;
  for (size_t i = 0; i < weights && i < items.size(); ++i) {
    const sdk::ItemRef item = items[i];
    if (item.role() != sdk::Role::weights || !item.trainable() || item.device() != sdk::Device::gpu) continue;
    const TensorShapes shapes = tensor_shapes(item, ctx.model(), ranks);
    if (!shapes.known) {
      largest = std::max(largest, item.elements());
      continue;
    }
    if (shapes.matrices > 0) largest = std::max(largest, shapes.matrix_size());
    if (shapes.vector_elements > 0) largest = std::max(largest, std::min(shapes.vector_size, shapes.vector_elements));
  }
  return largest;
}

// The rules of an optimizer stepped inside backward, checked where its
// option `in_backward` is read: the largest gradient tensor needs the
// architecture, and the gradients are consumed as they appear, so they
// cannot accumulate over micro-batches.
inline void require_in_backward_fits(sdk::Options& options) {
  if (!options.model().has_architecture)
    options.fail("in_backward", "keeps the largest gradient tensor, which a model given only as params does not "
                                "tell; give the architecture (a preset, or layers, hidden, ...)");
  if (options.workload().grad_accum > 1)
    options.fail("in_backward", "steps each parameter as its gradient appears, so gradients cannot accumulate "
                                "over micro-batches; set [batch] grad_accum = 1 or in_backward = false");
}

// An optimizer stepped inside backward (torchtune's optimizer_in_bwd: one
// optimizer per parameter, stepped from its post-accumulate-grad hook): the
// whole model's gradients become one gradient tensor at a time, at the
// backward high point. Removes the GPU gradient items and adds that tensor as
// `name`; returns its elements (0 when nothing trains), for the step's own
// temporaries.
inline double gradients_in_backward(sdk::Context& ctx, size_t weights, const LayoutReader& layout, sdk::Name name) {
  const double largest = largest_trainable_tensor(ctx, weights, layout);
  double gradient_bytes = 0;
  for (size_t i = ctx.size(); i-- > 0;) {
    const sdk::ItemRef item = ctx.items()[i];  // taken again after each remove
    if (item.role() != sdk::Role::gradients || item.lifetime() != sdk::Lifetime::gradient ||
        item.device() != sdk::Device::gpu)
      continue;
    gradient_bytes = std::max(gradient_bytes, item.bytes_per_element());
    ctx.remove(i);
  }
  if (largest <= 0 || gradient_bytes <= 0) return 0;
  ctx.add(sdk::NewItem{.name = name,
                       .role = sdk::Role::gradients,
                       .lifetime = sdk::Lifetime::transient_backward,
                       .elements = largest,
                       .bytes_per_element = gradient_bytes});
  return largest;
}

// What add_step_temporaries keeps between evaluations, made in the plugin's
// constructor: the temporaries' names (interned once, the foreach ones per
// weight as first met), the batch they are added in (no allocation once
// warm), and the layout attributes a for-loop step sizes its largest tensor
// by (resolved once: no attribute looked up by name per evaluation).
struct StepTemporaryNames {
  explicit StepTemporaryNames(const sdk::Options& options)
      : layout(options), for_loop(options.intern("optimizer.for_loop_temps")) {}

  LayoutReader layout;
  sdk::Name for_loop;
  sdk::SuffixedNames foreach{".foreach_temps"};
  sdk::ItemBatch batch;
};

// Adds the step's temporaries for the trainable weight items among the first
// `weights` items of the plan.
inline void add_step_temporaries(sdk::Context& ctx, size_t weights, Implementation implementation,
                                 const StepTemporaries& temporaries, double state_bytes, StepTemporaryNames& kept) {
  if (implementation == Implementation::foreach && temporaries.foreach > 0) {
    kept.batch.clear();
    const sdk::Items items = ctx.items();
    for (size_t i = 0; i < weights; ++i) {
      const sdk::ItemRef item = items[i];
      if (item.role() != sdk::Role::weights || !item.trainable()) continue;
      sdk::ItemRef temps = kept.batch.copy_of(item);
      temps.set_name(kept.foreach(ctx, item));
      temps.set_role(sdk::Role::optimizer_states);
      temps.set_lifetime(sdk::Lifetime::transient_optimizer);
      temps.set_trainable(false);
      temps.set_elements(item.elements() * temporaries.foreach);
      temps.set_bytes_per_element(state_bytes);
    }
    ctx.add(kept.batch);
  } else if (implementation == Implementation::for_loop && temporaries.for_loop > 0) {
    const double largest = largest_trainable_tensor(ctx, weights, kept.layout);
    if (largest <= 0) return;
    ctx.add(sdk::NewItem{.name = kept.for_loop,
                         .role = sdk::Role::optimizer_states,
                         .lifetime = sdk::Lifetime::transient_optimizer,
                         .elements = largest * temporaries.for_loop,
                         .bytes_per_element = state_bytes});
  }
}

}  // namespace memplan::support
