// Layer shapes and activation settings the eager-layer and autocast tests
// share (the 'megatron' plugin's transformer_activations.hpp types).
#pragma once

#include "../../plugins/activations/megatron/transformer_activations.hpp"

namespace memplan::testing {

// A Llama-style layer for one token of one sequence, so stored_bytes_per_layer is bytes per token.
inline plugins::TransformerShape llama(double hidden, double heads, double kv_heads, double ffn) {
  plugins::TransformerShape x;
  x.seq = 1;
  x.batch = 1;
  x.hidden = hidden;
  x.heads = heads;
  x.q_width = hidden;
  x.kv_width = hidden / heads * kv_heads;
  x.kv_heads = kv_heads;
  x.ffn = ffn;
  x.gated = true;
  return x;
}

// Eager modules in bf16 with SDPA's flash path and no dropout.
inline plugins::ActivationSettings eager_bf16_flash() {
  plugins::ActivationSettings o;
  o.bytes = 2;
  o.dropout = false;
  o.flash_attention = true;
  o.layer = plugins::LayerImplementation::eager;
  return o;
}

// The same with every base weight of the layer frozen (LoRA and QLoRA's base).
inline plugins::ActivationSettings eager_bf16_flash_frozen() {
  plugins::ActivationSettings o = eager_bf16_flash();
  o.eager.norms_trainable = false;
  o.eager.attention_trainable = o.eager.output_trainable = false;
  o.eager.mlp_trainable = o.eager.down_trainable = false;
  return o;
}

// BERT-large's layer (h 1024, 16 heads, f 4096) at s 512, b 1.
inline plugins::TransformerShape bert_large_layer() {
  plugins::TransformerShape x;
  x.seq = 512;
  x.batch = 1;
  x.hidden = 1024;
  x.heads = 16;
  x.q_width = 1024;
  x.kv_width = 1024;
  x.ffn = 4096;
  return x;
}

// Hugging Face's eager BERT layer with dropout, LayerNorm and no FlashAttention, in `bytes` per activation.
inline plugins::ActivationSettings bert_eager(double bytes) {
  plugins::ActivationSettings o;
  o.bytes = bytes;
  o.dropout = true;
  o.flash_attention = false;
  o.layer = plugins::LayerImplementation::eager;
  o.eager.rms_norm = false;
  return o;
}

}  // namespace memplan::testing
