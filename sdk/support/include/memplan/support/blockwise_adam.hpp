// Adam and AdamW whose two moments are stored quantized, block by block:
// bitsandbytes' 8-bit Adam (optimizers/adam-8bit; Dettmers et al. 2022,
// arXiv 2110.02861) and torchao's low-bit Adam (torchao.optim, formerly
// torchao.prototype.low_bit_optim: 8-bit, optimizers/adam-8bit with library
// "torchao"; 4-bit, optimizers/adam-4bit, after Li et al. 2023, arXiv
// 2309.01507). One rule for all of them:
//
//   a tensor of n elements that is quantized keeps, per moment, n codes of
//   Traits::code_bytes (1 for 8 bits; 0.5 for 4 bits, two codes per byte)
//   and one fp32 scale (bitsandbytes: absmax) per block of B elements,
//   ceil(n / B) of them; any other tensor keeps both moments unquantized, in
//   fp32 (bitsandbytes) or in the weight's dtype (torchao: torch.zeros_like(p)).
//
// Which tensors are quantized: n >= the minimum size (4096 in both libraries;
// bitsandbytes' min_8bit_size option), and for torchao only when n is a whole
// number of blocks (torchao/optim/adam.py _new_buffer:
// `p.numel() >= 4096 and p.numel() % self.block_size == 0`).
//
// The step: bitsandbytes updates each tensor in place in one CUDA kernel (no
// temporaries). torchao compiles one step per tensor (adam.py
// single_param_adam, torch.compile(fullgraph=True, dynamic=False)) that keeps
// the tensor's two new moments in fp32 while it re-quantizes them and updates
// the weight: 2 x 4 bytes per element of the largest tensor (measured under
// Inductor, docs/formulas.md). The same function serves every torchao
// state subclass, so 8-bit and 4-bit steps hold the same moments.
//
// Option `in_backward` (torchtune's optimizer_in_bwd): one optimizer per
// parameter, stepped in its post-accumulate-grad hook, the gradient then freed
// (optimizer_step.hpp, gradients_in_backward).
//
// Traits give the plugin's name, version, summary and options() (the spec),
// and:
//   code_bytes          bytes of one moment's code per element (1 or 0.5)
//   default_block_size  B when the scenario does not set block_size
//   min_size_option     the option that sets the minimum size, or nullptr
//                       for the fixed 4096
//   library_option      whether the plugin reads `library` ("bitsandbytes",
//                       the default, or "torchao"); without it, torchao's
//   scale_suffix, unquantized_suffix
//                       the names of the items beside the codes: <weight>
//                       + suffix
#pragma once

#include <memplan/sdk.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>

#include <memplan/support/layout.hpp>
#include <memplan/support/optimizer_step.hpp>
#include <memplan/support/optimizer_traffic.hpp>
#include <memplan/support/parameter_shapes.hpp>

namespace memplan::support {

// The minimum size both libraries quantize from (bitsandbytes'
// min_8bit_size default; torchao adam.py: "follow bitsandbytes, only quantize
// tensors >= 4096 values").
inline constexpr int64_t kQuantizedStateMinimumSize = 4096;

template <typename Traits>
class BlockwiseAdam {
 public:
  static constexpr sdk::PluginInfo info{Traits::name, Traits::version, Traits::summary, sdk::Kind::optimizer,
                                        sdk::Phase::optimizer, sdk::Reads::grad_accum};
  static std::span<const memplan_option_spec> options() { return Traits::options(); }

  explicit BlockwiseAdam(sdk::Options& options)
      : block_size_(static_cast<double>(options.positive_integer("block_size", Traits::default_block_size))),
        in_backward_(options.boolean("in_backward").value_or(false)),
        layout_(options),
        traffic_(options),
        scale_(Traits::scale_suffix),
        unquantized_(Traits::unquantized_suffix) {
    if constexpr (Traits::min_size_option != nullptr) {
      const int64_t minimum = options.integer(Traits::min_size_option).value_or(kQuantizedStateMinimumSize);
      if (minimum < 0)
        options.fail(Traits::min_size_option, "must be 0 or more, got " + std::to_string(minimum));
      min_size_ = static_cast<double>(minimum);
    }
    if constexpr (Traits::code_bytes < 1.0) {
      // Two codes per byte: torchao packs a quantized tensor's n codes into
      // n / 2 bytes, n a multiple of the block size.
      if (std::fmod(block_size_, 2.0) != 0)
        options.fail("block_size", "must be even (two 4-bit codes share a byte), got " +
                                       std::to_string(static_cast<int64_t>(block_size_)));
    }
    torchao_ = true;
    if constexpr (Traits::library_option) {
      const std::string library = options.string("library").value_or("bitsandbytes");
      if (library == "bitsandbytes") torchao_ = false;
      else if (library != "torchao")
        options.fail("library", "is \"" + library + "\", not a library; use \"bitsandbytes\" or \"torchao\"");
    }
    if (torchao_) {
      step_moments_ = options.intern("optimizer_states.step_fp32_moments");
      if (in_backward_) last_gradient_ = options.intern("gradients.in_backward.last");
    }
    if (!in_backward_) return;
    in_backward_gradient_ = options.intern("gradients.in_backward");
    require_in_backward_fits(options);
  }

  void apply(sdk::Context& ctx) {
    const RankLayout ranks = rank_layout(ctx, layout_);
    // The step's traffic: the gradient and the weight, and every state byte read and written.
    traffic_.add_per_item(ctx, [&](const sdk::ItemRef& weight, double gradient, double master) {
      return weight.elements() * update_bytes_per_element(gradient, weight.bytes_per_element(), master) +
             2 * split_of(weight, ctx.model(), ranks).state_bytes();
    });
    // The states are appended after the weights, in the weights' order:
    // collected in batch_ (kept between evaluations) and added in one call.
    batch_.clear();
    for (const sdk::ItemRef weight : ctx.items()) {
      if (weight.role() != sdk::Role::weights || !weight.trainable()) continue;
      const Split split = split_of(weight, ctx.model(), ranks);
      // The weight's name as it is; the suffixed ones interned once per weight
      // name, and only for a part that has elements. Two moments each: codes,
      // one fp32 scale per block, and the unquantized tensors' states.
      add(weight, sdk::Name{weight.raw().name}, 2 * split.quantized, Traits::code_bytes);
      if (split.blocks > 0) add(weight, scale_(ctx, weight), 2 * split.blocks, 4.0);
      if (split.unquantized > 0) add(weight, unquantized_(ctx, weight), 2 * split.unquantized, split.unquantized_bytes);
    }
    const size_t weights = ctx.size();
    ctx.add(batch_);
    if (in_backward_) gradients_in_backward(ctx, weights, layout_, in_backward_gradient_);
    if (torchao_) add_torchao_step(ctx, weights, ranks);
  }

 private:
  // torchao's step keeps the tensor's two new moments in fp32 (above): 2 x 4
  // bytes per element of the largest tensor. Without in_backward they meet
  // all the gradients in the optimizer phase. With it they meet where that
  // tensor's hook fires: a tied embedding (used by the first and the last
  // layer) gets its gradient only when the embedding lookup's backward has
  // run, at the end of backward with no activation left, so its step is
  // counted in the optimizer phase with its gradient; any other largest
  // tensor is stepped inside backward, at its high point.
  void add_torchao_step(sdk::Context& ctx, size_t weights, const RankLayout& ranks) const {
    const double largest = largest_trainable_tensor(ctx, weights, layout_);
    if (largest <= 0) return;
    const memplan_model& model = ctx.model();
    const double embedding = static_cast<double>(model.vocab) * static_cast<double>(model.hidden) / ranks.tensor;
    const bool embedding_last = in_backward_ && model.tied_embeddings != 0 && embedding >= largest;
    const sdk::Lifetime lifetime = in_backward_ && !embedding_last ? sdk::Lifetime::transient_backward
                                                                   : sdk::Lifetime::transient_optimizer;
    double gradient_bytes = 0;
    if (embedding_last)
      for (const sdk::ItemRef item : ctx.items())
        if (item.name() == in_backward_gradient_.view()) gradient_bytes = item.bytes_per_element();
    ctx.add(sdk::NewItem{.name = step_moments_,
                         .role = sdk::Role::optimizer_states,
                         .lifetime = lifetime,
                         .elements = 2 * largest,
                         .bytes_per_element = 4.0});
    if (gradient_bytes > 0)
      ctx.add(sdk::NewItem{.name = last_gradient_,
                           .role = sdk::Role::gradients,
                           .lifetime = sdk::Lifetime::transient_optimizer,
                           .elements = largest,
                           .bytes_per_element = gradient_bytes});
  }

  struct Split {
    double quantized = 0;    // elements with quantized moments, per instance
    double blocks = 0;       // their quantization blocks
    double unquantized = 0;        // elements with unquantized moments (small tensors; torchao: partial blocks)
    double unquantized_bytes = 4;  // their bytes per element: fp32 (bitsandbytes), the weight's dtype (torchao)

    // Bytes of state per instance, both moments.
    double state_bytes() const { return 2 * (Traits::code_bytes * quantized + 4 * blocks + unquantized_bytes * unquantized); }
  };

  Split split_of(const sdk::ItemRef& weight, const memplan_model& model, const RankLayout& ranks) const {
    const TensorShapes shapes = tensor_shapes(weight, model, ranks);
    Split split;
    if (torchao_) split.unquantized_bytes = weight.bytes_per_element();  // adam.py _new_buffer: torch.zeros_like(p)
    if (!shapes.known) {
      add_tensors(split, 1, weight.elements());
    } else {
      add_tensors(split, shapes.matrices, shapes.matrix_size());
      if (shapes.vector_elements > 0) add_tensors(split, shapes.vectors(), shapes.vector_size);
    }
    return split;
  }

  // `tensors` tensors of `size` elements each (tensors may be fractional for
  // biases of unknown width).
  void add_tensors(Split& split, double tensors, double size) const {
    if (tensors <= 0 || size <= 0) return;
    // torchao (adam.py _new_buffer) quantizes only a whole number of blocks.
    if (size < min_size_ || (torchao_ && std::fmod(size, block_size_) != 0)) {
      split.unquantized += tensors * size;
      return;
    }
    split.quantized += tensors * size;
    split.blocks += tensors * std::ceil(size / block_size_);
  }

  void add(const sdk::ItemRef& weight, sdk::Name name, double elements, double bytes) {
    if (elements <= 0) return;
    sdk::ItemRef states = batch_.copy_of(weight);
    states.set_name(name);
    states.set_role(sdk::Role::optimizer_states);
    states.set_lifetime(sdk::Lifetime::persistent);
    states.set_elements(elements);
    states.set_bytes_per_element(bytes);
  }

  double block_size_;
  double min_size_ = static_cast<double>(kQuantizedStateMinimumSize);
  bool in_backward_ = false;
  bool torchao_ = true;                     // the step and the unquantized dtype are torchao's
  sdk::Name in_backward_gradient_;          // interned in the constructor when in_backward is on
  sdk::Name step_moments_, last_gradient_;  // interned in the constructor for torchao
  LayoutReader layout_;                     // ranks.tensor and layout.expert_parallel by handle
  OptimizerTraffic traffic_;
  sdk::SuffixedNames scale_, unquantized_;  // interned once per weight name
  sdk::ItemBatch batch_;                    // the state items, cleared each evaluation, its capacity kept
};

}  // namespace memplan::support
