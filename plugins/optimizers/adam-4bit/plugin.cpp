// 'adam-4bit' optimizer: torchao's 4-bit Adam and AdamW (torchao.optim
// Adam4bit / AdamW4bit, formerly torchao.prototype.low_bit_optim), after Li
// et al. 2023, "Memory Efficient Optimizers with 4-bit States" (arXiv
// 2309.01507), without its rank-1 normalization of the second moment.
//
// pytorch/ao @ 1e7f132e3 (2024-09-05, #812), torchao/prototype/
// low_bit_optim/subclass_4bit.py OptimState4bit.zeros, the same at
// 36027d82d (2026-08-21) torchao/optim/subclass_4bit.py:
//
//   codes = torch.zeros(n_elems // 2, dtype=torch.uint8)   # two 4-bit codes a byte
//   scale = torch.zeros(n_elems // block_size)            # fp32, one per block
//   qmap  = 16 fp32 entries (signed map for exp_avg, linear unsigned for exp_avg_sq)
//
// block_size 128 by default (adam.py Adam4bit, AdamW4bit). adam.py
// _AdamBase._new_buffer quantizes a tensor only when it has at least 4096
// elements and a whole number of blocks, else torch.zeros_like(p), the
// weight's dtype. So per tensor of n elements, both moments:
//
//   quantized:  2 x (n / 2 + 4 n / B) bytes     (B = 128: 1.0625 B per element)
//   otherwise:  2 x n x the weight's bytes
//
// The two maps (2 x 16 fp32 per tensor) are not counted. The step is
// torchao's single_param_adam, the same function as for its 8-bit states
// (one torch.compile'd step per tensor that keeps both new moments in fp32:
// 2 x 4 bytes per element of the largest tensor); option in_backward as in
// adam-8bit. The rule and the class are shared with adam-8bit:
// sdk/support/include/memplan/support/blockwise_adam.hpp.
#include <memplan/sdk.hpp>
#include <memplan/support/blockwise_adam.hpp>

#include <array>
#include <span>

namespace {

constexpr std::array<memplan_option_spec, 2> kOptions{{
    {"block_size", MEMPLAN_OPTION_INT,
     "elements per quantization block, each with one fp32 scale per state (torchao's default: 128); even, since "
     "two codes share a byte",
     "128", nullptr},
    memplan::support::kInBackwardOption,
}};

struct Adam4bitTraits {
  static constexpr const char* name = "adam-4bit";
  static constexpr const char* version = "1.0.0";
  static constexpr const char* summary =
      "Adam with block-wise 4-bit states, torchao Adam4bit/AdamW4bit (Li et al. 2023, arXiv 2309.01507)";
  static std::span<const memplan_option_spec> options() { return kOptions; }
  static constexpr double code_bytes = 0.5;
  static constexpr int64_t default_block_size = 128;
  static constexpr const char* min_size_option = nullptr;  // torchao's fixed 4096
  static constexpr bool library_option = false;            // torchao only
  static constexpr const char* scale_suffix = ".scale";
  static constexpr const char* unquantized_suffix = ".unquantized";
};

using Adam4bitOptimizer = memplan::support::BlockwiseAdam<Adam4bitTraits>;

}  // namespace

MEMPLAN_PLUGIN(Adam4bitOptimizer)
