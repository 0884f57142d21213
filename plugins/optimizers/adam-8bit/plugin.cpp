// 'adam-8bit' optimizer: bitsandbytes' Adam8bit / AdamW8bit (Dettmers et al.
// 2022, "8-bit Optimizers via Block-wise Quantization", arXiv 2110.02861).
// Both Adam states are stored as 1-byte codes, quantized block by block: each
// block of B elements of a state has its own fp32 absolute maximum. Tensors
// with fewer than min_8bit_size (4096) elements keep fp32 states. From
// bitsandbytes/optim/optimizer.py, Optimizer2State.init_state:
//
//   if p.numel() < config["min_8bit_size"]: dtype = torch.float32
//   ... state["state1"], state["state2"]: uint8 like p
//   blocks = n // blocksize (+ 1 if n % blocksize > 0)
//   state["absmax1"], state["absmax2"] = torch.zeros((blocks,), dtype=torch.float32)
//
// so per tensor of n elements: 2n bytes of codes + 2 x 4 x ceil(n / B) bytes
// of absmax, or 2 x 4 x n bytes when n < min_8bit_size. The block size was
// 2048 in the paper and in bitsandbytes up to 0.43; bitsandbytes 0.44.0
// changed the 8-bit optimizers to 256 (bitsandbytes pull request #1365,
// "Change 8bit optimizer blocksize 2048->256"), which is the default here.
// The two 256-entry quantization maps are shared by all tensors (1 KiB each)
// and not counted.
//
// Tensor sizes come from parameter_shapes.hpp (per class, from the model's
// dimensions, split by tensor parallelism); an item of unknown shape (a
// params-only model, adapters) counts as one tensor. Biases inside projection
// items are taken to be as wide as the projection's split dimension.
//
// The states' dtype is bitsandbytes' own (uint8 codes, fp32 absmax and fp32
// small tensors), whatever the precision recipe's optimizer_states dtype. The
// update is one fused CUDA kernel per tensor (optimizer_update_8bit_blockwise)
// that works in place: no step temporaries and no `implementation` option.
//
// The step's memory traffic (ABI 1.2 memory record, optimizer_traffic.hpp):
// bitsandbytes @ 95f9af309d4d, csrc/kernels.cu, kOptimizerStatic8bit2StateBlockwise
// (one thread block per quantization block, BLOCKSIZE_2STATE 256 in
// csrc/ops.cu) reads the gradient, both 1-byte codes, the block's two fp32
// absmax and the parameter, and writes the parameter, both codes and both
// absmax; kOptimizer32bit2State (the small tensors) reads the gradient, the
// parameter and both fp32 states and writes the parameter and both states.
// Each byte of state is thus read once and written once: per element the
// gradient and the weight (update_bytes_per_element) plus 2 x the states it
// holds: with bf16 weights and gradients and B = 256, 2 + 2 x 2 + 2 x (2 + 8 /
// 256) = 10.0625 B (fp32 AdamW moves 2 + 4 + 16 = 22 B). The quantization maps (2 x 256 fp32, loaded by every thread block,
// from L2 after the first) are left out: 2 KiB per tensor.
//
// Option `in_backward` (torchtune's optimizer_in_bwd, as the elementwise
// optimizers have it): torchtune @ 1814feb17a90, recipes/
// full_finetune_single_device.py _setup_optimizer builds one optimizer per
// parameter ({p: config.instantiate(cfg_optimizer, [p])}, whatever the
// optimizer class, bitsandbytes' included) and training/memory.py
// register_optim_in_bwd_hooks steps it in the parameter's post-accumulate-grad
// hook, then sets p.grad = None: the gradients of the whole model never exist
// at once. memplan keeps one gradient tensor (the largest trainable one, in
// the gradients' dtype) at the backward high point and no gradient in the
// optimizer phase; the 8-bit kernel updates in place, so no temporaries. The
// states are the same. It needs grad_accum = 1 (torchtune refuses gradient
// accumulation with it) and the architecture (the largest tensor).
#include <memplan/sdk.hpp>
#include <memplan/support/layout.hpp>
#include <memplan/support/optimizer_step.hpp>
#include <memplan/support/optimizer_traffic.hpp>
#include <memplan/support/parameter_shapes.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

namespace {

namespace sdk = memplan::sdk;

constexpr std::array<memplan_option_spec, 4> kOptions{{
    {"block_size", MEMPLAN_OPTION_INT,
     "elements per quantization block, each with one fp32 absmax per state (bitsandbytes >= 0.44: 256; the paper "
     "and bitsandbytes <= 0.43: 2048)",
     "256", nullptr},
    {"min_8bit_size", MEMPLAN_OPTION_INT, "tensors with fewer elements keep fp32 states (bitsandbytes' min_8bit_size)",
     "4096", nullptr},
    {"in_backward", MEMPLAN_OPTION_BOOL,
     "step each parameter inside backward as soon as its gradient exists, then free the gradient (torchtune's "
     "optimizer_in_bwd); needs grad_accum = 1",
     "false", nullptr},
    {"library", MEMPLAN_OPTION_STRING,
     "whose 8-bit AdamW: \"bitsandbytes\" (one in-place CUDA kernel per tensor, no temporaries) or \"torchao\" "
     "(torchao.prototype.low_bit_optim: a compiled step per tensor that keeps both new moments in fp32, 8 bytes per "
     "element of the tensor being stepped; tensors not a multiple of block_size keep states in the weight's dtype)",
     "bitsandbytes", nullptr},
}};

class Adam8bitOptimizer {
 public:
  static constexpr sdk::PluginInfo info{
      "adam-8bit", "1.3.0",
      "Adam with block-wise 8-bit states, bitsandbytes Adam8bit (Dettmers et al. 2022, arXiv 2110.02861)",
      sdk::Kind::optimizer, sdk::Phase::optimizer, sdk::Reads::grad_accum};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit Adam8bitOptimizer(sdk::Options& options)
      : block_size_(static_cast<double>(options.positive_integer("block_size", 256))),
        min_8bit_size_(static_cast<double>(options.integer("min_8bit_size").value_or(4096))),
        in_backward_(options.boolean("in_backward").value_or(false)),
        layout_(options),
        traffic_(options) {
    if (min_8bit_size_ < 0)
      options.fail("min_8bit_size", "must be 0 or more, got " + std::to_string(static_cast<int64_t>(min_8bit_size_)));
    const std::string library = options.string("library").value_or("bitsandbytes");
    if (library == "torchao") {
      torchao_ = true;
      step_moments_ = options.intern("optimizer_states.step_fp32_moments");
      if (in_backward_) last_gradient_ = options.intern("gradients.in_backward.last");
    } else if (library != "bitsandbytes") {
      options.fail("library", "is \"" + library + "\", not a library; use \"bitsandbytes\" or \"torchao\"");
    }
    if (!in_backward_) return;
    in_backward_gradient_ = options.intern("gradients.in_backward");
    memplan::support::require_in_backward_fits(options);
  }

  void apply(sdk::Context& ctx) {
    const memplan::support::RankLayout ranks = memplan::support::rank_layout(ctx, layout_);
    // The step's traffic: the gradient and the weight, and every state byte read and written.
    traffic_.add_per_item(ctx, [&](const sdk::ItemRef& weight, double gradient, double master) {
      return weight.elements() *
                 memplan::support::update_bytes_per_element(gradient, weight.bytes_per_element(), master) +
             2 * split_of(weight, ctx.model(), ranks).state_bytes();
    });
    // The states are appended after the weights, in the weights' order:
    // collected in batch_ (kept between evaluations) and added in one call.
    batch_.clear();
    for (const sdk::ItemRef weight : ctx.items()) {
      if (weight.role() != sdk::Role::weights || !weight.trainable()) continue;
      const Split split = split_of(weight, ctx.model(), ranks);
      // The weight's name as it is; the suffixed ones interned once per weight
      // name, and only for a part that has elements.
      // two 1-byte codes per element, one fp32 absmax per block and state,
      // and two fp32 states for the small tensors
      add(weight, sdk::Name{weight.raw().name}, 2 * split.quantized, 1.0);
      if (split.blocks > 0) add(weight, absmax_(ctx, weight), 2 * split.blocks, 4.0);
      if (split.small > 0) add(weight, fp32_(ctx, weight), 2 * split.small, split.small_bytes);
    }
    const size_t weights = ctx.size();
    ctx.add(batch_);
    if (in_backward_) step_in_backward(ctx, weights);
    if (torchao_) add_torchao_step(ctx, weights, ranks);
  }

 private:
  // The in-place 8-bit kernel adds no temporaries to the one gradient tensor.
  void step_in_backward(sdk::Context& ctx, size_t weights) const {
    memplan::support::gradients_in_backward(ctx, weights, layout_, in_backward_gradient_);
  }

  // torchao's step (adam.py single_param_adam, compiled per tensor, one
  // tensor at a time) keeps the tensor's two new moments in fp32 while it
  // re-quantizes them and updates the weight: 2 x 4 bytes per element of the
  // largest tensor. Without in_backward they meet all the gradients in the
  // optimizer phase. With it they meet where that tensor's hook fires: a tied
  // embedding (used by the first and the last layer) gets its gradient only
  // when the embedding lookup's backward has run, at the end of backward with
  // no activation left, so its step is counted in the optimizer phase with its
  // gradient; any other largest tensor is stepped inside backward, at its high point.
  void add_torchao_step(sdk::Context& ctx, size_t weights, const memplan::support::RankLayout& ranks) const {
    const double largest = memplan::support::largest_trainable_tensor(ctx, weights, layout_);
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
    double quantized = 0;  // elements with 8-bit states, per instance
    double blocks = 0;     // their quantization blocks
    double small = 0;      // elements with unquantized states
    double small_bytes = 4;  // their bytes per element: fp32 (bitsandbytes), the weight's dtype (torchao)

    // Bytes of state per instance: two 1-byte codes, two fp32 absmax per block, two small states.
    double state_bytes() const { return 2 * quantized + 2 * 4 * blocks + 2 * small_bytes * small; }
  };

  Split split_of(const sdk::ItemRef& weight, const memplan_model& model,
                 const memplan::support::RankLayout& ranks) const {
    const memplan::support::TensorShapes shapes = memplan::support::tensor_shapes(weight, model, ranks);
    Split split;
    if (torchao_) split.small_bytes = weight.bytes_per_element();  // adam.py _new_buffer: torch.zeros_like(p)
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
    if (size < min_8bit_size_ || (torchao_ && std::fmod(size, block_size_) != 0)) {
      split.small += tensors * size;
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
  double min_8bit_size_;
  bool in_backward_ = false;
  sdk::Name in_backward_gradient_;  // interned in the constructor when in_backward is on
  bool torchao_ = false;            // library = "torchao"
  sdk::Name step_moments_, last_gradient_;  // interned in the constructor for torchao
  memplan::support::LayoutReader layout_;  // ranks.tensor and layout.expert_parallel by handle
  memplan::support::OptimizerTraffic traffic_;
  sdk::SuffixedNames absmax_{".absmax"}, fp32_{".fp32"};  // interned once per weight name
  sdk::ItemBatch batch_;  // the state items, cleared each evaluation, its capacity kept
};

}  // namespace

MEMPLAN_PLUGIN(Adam8bitOptimizer)
