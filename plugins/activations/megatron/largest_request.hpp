// The largest single tensor a transformer layer requests from the caching
// allocator in a training step, per micro-batch on the rank: the size that
// decides which of the step's blocks a later request can take (best fit,
// memplan/support/caching_allocator.hpp). Read where a request's place among
// the cached blocks matters: the backward thread's cuBLAS workspace finds a
// block of the layers' freed tensors only where one is at least its size
// (loss_requests.hpp).
//
// Counted: the hidden-wide tensors (the residual stream, an eager RMSNorm's
// fp32 upcast), the projections' outputs (q, or the fused q, k and v; K and V
// repeated to every query head are q-wide), the MLP's inner tensors (gate, up
// and their product, each ffn wide), eager attention's scores and
// probabilities (heads x s per token; fp32 where the softmax upcasts) and
// SDPA's additive mask bias (s per token). Mixture-of-experts and latent
// attention layers are not worked out: infinity (nothing is assumed to fit).
#pragma once

#include "transformer_activations.hpp"

#include <algorithm>
#include <limits>

namespace memplan::plugins {

inline double largest_layer_request(const TransformerShape& x, const ActivationSettings& o) {
  if (x.top_k > 0 || x.latent()) return std::numeric_limits<double>::infinity();
  const double tokens = x.batch * x.seq;
  const double t = o.tensor_parallel;
  const double sequence_split = o.sequence_parallel ? t : 1;
  const bool eager = o.layer == LayerImplementation::eager;
  double hidden_bytes = std::max(o.bytes, o.residual_bytes);
  if (eager && o.eager.rms_norm && o.eager.rms_norm_upcast) hidden_bytes = std::max(hidden_bytes, 4.0);
  const double hidden = tokens * x.hidden / sequence_split * hidden_bytes;
  const double projection =
      tokens * ((eager && o.eager.fused_qkv) ? x.q_width + 2 * x.kv_width : std::max(x.q_width, x.kv_width)) / t *
      o.bytes;
  const double mlp = tokens * x.ffn / t * o.bytes;
  double attention = 0;
  if (!o.flash_attention) {
    // The softmax output's bytes as the eager layer's terms read them (fp32 under softmax_upcast or autocast).
    const double probability_bytes = eager ? softmax_output_bytes(o) : o.bytes;
    attention = tokens * x.heads / t * x.seq * probability_bytes;
  }
  const double bias = eager && o.eager.attention_bias ? tokens * x.seq * o.bytes : 0;
  return std::max({hidden, projection, mlp, attention, bias});
}

}  // namespace memplan::plugins
