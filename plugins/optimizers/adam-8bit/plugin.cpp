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
// that works in place: no step temporaries and no `implementation` option
// (library = "torchao": the compiled step's fp32 moments, blockwise_adam.hpp).
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
//
// The rule and the class are shared with adam-4bit (torchao's 4-bit Adam):
// sdk/support/include/memplan/support/blockwise_adam.hpp.
#include <memplan/sdk.hpp>
#include <memplan/support/blockwise_adam.hpp>

#include <array>
#include <span>

namespace {

constexpr std::array<memplan_option_spec, 4> kOptions{{
    {"block_size", MEMPLAN_OPTION_INT,
     "elements per quantization block, each with one fp32 absmax per state (bitsandbytes >= 0.44: 256; the paper "
     "and bitsandbytes <= 0.43: 2048)",
     "256", nullptr},
    {"min_8bit_size", MEMPLAN_OPTION_INT, "tensors with fewer elements keep fp32 states (bitsandbytes' min_8bit_size)",
     "4096", nullptr},
    memplan::support::kInBackwardOption,
    {"library", MEMPLAN_OPTION_STRING,
     "whose 8-bit AdamW: \"bitsandbytes\" (one in-place CUDA kernel per tensor, no temporaries) or \"torchao\" "
     "(torchao.prototype.low_bit_optim: a compiled step per tensor that keeps both new moments in fp32, 8 bytes per "
     "element of the tensor being stepped; tensors not a multiple of block_size keep states in the weight's dtype)",
     "bitsandbytes", nullptr},
}};

struct Adam8bitTraits {
  static constexpr const char* name = "adam-8bit";
  static constexpr const char* version = "1.3.1";
  static constexpr const char* summary =
      "Adam with block-wise 8-bit states, bitsandbytes Adam8bit (Dettmers et al. 2022, arXiv 2110.02861)";
  static std::span<const memplan_option_spec> options() { return kOptions; }
  static constexpr double code_bytes = 1.0;
  static constexpr int64_t default_block_size = 256;
  static constexpr const char* min_size_option = "min_8bit_size";
  static constexpr bool library_option = true;
  static constexpr const char* scale_suffix = ".absmax";
  static constexpr const char* unquantized_suffix = ".fp32";
};

using Adam8bitOptimizer = memplan::support::BlockwiseAdam<Adam8bitTraits>;

}  // namespace

MEMPLAN_PLUGIN(Adam8bitOptimizer)
