// The memory of a packed linear layer (weights below one byte per element)
// that dequantizes with PyTorch's own ops and multiplies with torch.matmul
// (megatron option packed_dequantize = "torch-ops").
//
// AutoGPTQ's QuantLinear of auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py
// (v0.4.2, the version Qwen's finetune stack pins; read at 179776bd in the
// stored mirror, the same forward) takes this path at kernel_switch_threshold
// (128) rows or more, and always when built trainable:
//   weight = bitwise_right_shift(qweight.unsqueeze(1).expand(...), wf).to(int8)
//     -- the shift's result is an int32 tensor of the whole matrix (in x out
//        elements), alive with its int8 cast: 5 bytes per element at once;
//   weight = scales * (weight - zeros)      -- fp16 (the scales' dtype), 2 bytes
//   out = torch.matmul(x.half(), weight)
// The dequantized weight is an ordinary tensor that needs no gradient, but x
// does (LoRA trains beneath it), so autograd's mm saves the weight for x's
// gradient (derivatives.yaml, mm: self's gradient reads mat2): every matrix
// of a layer stays dequantized from its forward to its backward, and backward
// dequantizes nothing again. bitsandbytes' MatMul4Bit and AutoGPTQ's tritonv2
// QuantLinearFunction (packed_dequantize = "kernel") save the packed weight and
// dequantize a temporary in backward instead.
#pragma once

#include <algorithm>
#include <initializer_list>

#include "transformer_activations.hpp"

namespace memplan::plugins {

// Which of a dense layer's projections are packed.
struct PackedProjections {
  bool attention_in = false;   // q, k and v
  bool attention_out = false;  // o
  bool mlp = false;            // gate and up (gated) or up, and down
};

struct TorchOpsDequantize {
  double forward = 0;          // a forward that saves nothing (no_grad): the largest matrix's unpack
  double saved_per_layer = 0;  // what one layer's forward leaves saved for its backward
  double recomputed = 0;       // the high point while backward recomputes one layer
  // A forward that saves (no recomputation), beyond the layer's own saves counted whole: at matrix i's unpack
  // the layer has saved the matrices before i, so the moment exceeds the whole layer's saves by
  // 5 m_i - 2 (m_i + ... + m_n), at least 0.
  double forward_beside_saves = 0;
};

inline constexpr double kTorchOpsUnpackBytes = 4 + 1;  // the int32 shift and its int8 cast, per element
inline constexpr double kTorchOpsWeightBytes = 2;      // the fp16 dequantized weight (the scales' dtype)

// Elements per matrix, in the order the layer's forward runs them: q, k, v, o,
// then the MLP's gate, up, down (up, down without a gate), each split t ways.
inline TorchOpsDequantize torch_ops_dequantize(const TransformerShape& x, PackedProjections packed, double t) {
  const double h = x.hidden;
  double matrices[7] = {};
  int n = 0;
  if (packed.attention_in)
    for (double width : {x.q_width, x.kv_width, x.kv_width}) matrices[n++] = h * width / t;
  if (packed.attention_out) matrices[n++] = x.q_width * h / t;
  if (packed.mlp) {
    if (x.gated) matrices[n++] = h * x.ffn / t;
    matrices[n++] = h * x.ffn / t;
    matrices[n++] = x.ffn * h / t;
  }
  TorchOpsDequantize result;
  double saved_before = 0;  // elements the recomputation has saved when the next matrix is unpacked
  for (int i = 0; i < n; ++i) {
    result.forward = std::max(result.forward, kTorchOpsUnpackBytes * matrices[i]);
    // The unpack (5 B an element) outweighs the matrix's own saved copy (2 B): the last unpack is never below
    // the layer's whole saves, so this is the recomputed layer's high point.
    result.recomputed =
        std::max(result.recomputed, kTorchOpsWeightBytes * saved_before + kTorchOpsUnpackBytes * matrices[i]);
    saved_before += matrices[i];
  }
  result.saved_per_layer = kTorchOpsWeightBytes * saved_before;
  double saved_from = 0;  // elements of matrices i..n
  for (int i = n - 1; i >= 0; --i) {
    saved_from += matrices[i];
    result.forward_beside_saves = std::max(result.forward_beside_saves,
                                           kTorchOpsUnpackBytes * matrices[i] - kTorchOpsWeightBytes * saved_from);
  }
  return result;
}

}  // namespace memplan::plugins
