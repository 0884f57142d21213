// Per-layer activation memory of a transformer layer, following Korthikanti et
// al. 2022, "Reducing Activation Recomputation in Large Transformer Models"
// (arXiv 2205.05198), section 4.1 and Table 2, generalized to grouped-query
// attention, gated MLPs, any activation dtype and optional dropout. With
// q_width = kv_width = h, ffn = 4h, a plain MLP, 2-byte activations and
// 1-byte dropout masks it reduces to the paper's formulas exactly:
//   no parallelism         sbh (34 + 5as/h)
//   tensor parallel        sbh (10 + 24/t + 5as/(ht))
//   + sequence parallel    sbh/t (34 + 5as/h)
//   + selective recompute  sbh (10 + 24/t), or sbh 34/t with sequence parallel
//   full recompute         2sbh (2sbh/t with sequence parallel)
// Header-only and free of plugin plumbing so tests can check it directly.
#pragma once

#include <cstdint>

namespace memplan::plugins {

enum class RecomputePolicy { none, selective, full };

struct TransformerShape {
  double seq = 0;        // s
  double batch = 0;      // b, the micro-batch
  double hidden = 0;     // h
  double heads = 0;      // a
  double q_width = 0;    // heads * head_dim
  double kv_width = 0;   // kv_heads * head_dim
  double ffn = 0;        // MLP inner width (per expert for MoE)
  bool gated = false;    // SwiGLU: gate and up outputs are both stored
  double top_k = 0;      // MoE: experts each token visits; 0 for a dense MLP
  double experts = 0;    // MoE: experts per layer (router logits)
  double kv_heads = 0;   // kv heads; 0: as many as the tensor-parallel ranks need (no replication)
};

struct ActivationSettings {
  double bytes = 2;            // activation dtype size
  bool dropout = true;         // Korthikanti et al. assume dropout (1-byte masks)
  bool flash_attention = false;
  double tensor_parallel = 1;  // t
  bool sequence_parallel = false;
  RecomputePolicy recompute = RecomputePolicy::none;
};

struct LayerActivations {
  double replicated = 0;      // norms, their outputs and dropout masks: split only with sequence parallelism
  double split = 0;           // projections and MLP: split t ways
  double split_kv = 0;        // K and V: split min(t, kv_heads) ways (ranks beyond kv_heads hold replicas)
  double attention_core = 0;  // softmax, its dropout, attention over V (or flash-attention statistics)
};

// The three groups of bytes one layer stores for one micro-batch, before
// parallelism and recomputation.
inline LayerActivations layer_activation_terms(const TransformerShape& x, const ActivationSettings& o) {
  const double sb = x.seq * x.batch;
  const double p = o.bytes;
  const double mask = o.dropout ? 1.0 : 0.0;
  LayerActivations terms;
  // Inputs of the two norms, the two norm outputs (inputs of QKV and of the
  // MLP), and the dropout masks after attention and after the MLP.
  terms.replicated = 2 * p * sb * x.hidden + 2 * p * sb * x.hidden + 2 * mask * sb * x.hidden;
  // Q for QK^T and the attention output entering the output projection; K (for
  // QK^T) and V (for attention over V) at the kv width of grouped-query attention.
  terms.split = p * sb * x.q_width + p * sb * x.q_width;
  terms.split_kv = p * sb * x.kv_width + p * sb * x.kv_width;
  // MLP: first projection's output(s) and the activation function's output.
  const double mlp = p * sb * x.ffn * (x.gated ? 2 : 1) + p * sb * x.ffn;
  if (x.top_k > 0)
    // Each token's hidden state is dispatched to top_k experts: per routed
    // token the expert keeps its input (the permuted copy of the hidden state)
    // and its MLP activations, and the weighted sum of the experts' outputs
    // keeps each output for the gradient of its routing weight (Hugging Face
    // Mixtral: expert_layer(x) * routing_weights; Megatron-LM: the unpermute
    // that applies the probabilities). Plus the router's probabilities, p sb E.
    terms.split += x.top_k * (2 * p * sb * x.hidden + mlp) + p * sb * x.experts;
  else
    terms.split += mlp;
  const double scores = x.heads * x.seq * x.seq * x.batch;
  if (o.flash_attention)
    // FlashAttention keeps no s x s matrices, only the fp32 log-sum-exp per
    // query row and head (Dao 2023, FlashAttention-2, algorithm 1).
    terms.attention_core = 4 * x.heads * sb;
  else
    // Softmax output, plus its dropout mask and dropout output when dropout is on.
    terms.attention_core = p * scores + (o.dropout ? (mask + p) * scores : 0);
  return terms;
}

// Ranks that share out the K and V heads: with fewer kv heads than
// tensor-parallel ranks, each rank keeps one whole (replicated) kv head.
inline double kv_divisor(const TransformerShape& x, const ActivationSettings& o) {
  return x.kv_heads > 0 && x.kv_heads < o.tensor_parallel ? x.kv_heads : o.tensor_parallel;
}

// Bytes one layer keeps from forward to backward for one micro-batch.
inline double stored_bytes_per_layer(const TransformerShape& x, const ActivationSettings& o) {
  const LayerActivations terms = layer_activation_terms(x, o);
  const double t = o.tensor_parallel;
  const double split = terms.split / t + terms.split_kv / kv_divisor(x, o);
  const double replicated = o.sequence_parallel ? terms.replicated / t : terms.replicated;
  switch (o.recompute) {
    case RecomputePolicy::full:
      // Only the layer's input survives (sequence-parallel ranks hold 1/t of it).
      return o.bytes * x.seq * x.batch * x.hidden / (o.sequence_parallel ? t : 1);
    case RecomputePolicy::selective:
      return replicated + split;
    default:
      return replicated + split + terms.attention_core / t;
  }
}

// Extra bytes alive while backward recomputes one layer.
inline double recompute_working_set(const TransformerShape& x, const ActivationSettings& o) {
  const LayerActivations terms = layer_activation_terms(x, o);
  const double t = o.tensor_parallel;
  switch (o.recompute) {
    case RecomputePolicy::full: {
      ActivationSettings stored = o;
      stored.recompute = RecomputePolicy::none;
      return stored_bytes_per_layer(x, stored);
    }
    case RecomputePolicy::selective: return terms.attention_core / t;
    default: return 0;
  }
}

// The activations outside the transformer layers, for one micro-batch, after
// tensor and sequence parallelism (Korthikanti et al. 2022, section 4.3, which
// counts the input embedding's dropout mask, the final norm, the output
// projection's input and the fp32 cross-entropy logits: sbh/t + 4sbh/t (1 + v/h)
// with sequence parallelism and 2-byte activations).
enum class CrossEntropy {
  unfused,         // fp32 logits kept, and the loss saves its own fp32 (log-)softmax of the same size
  vocab_parallel,  // Megatron-LM's vocab-parallel cross entropy: softmax computed in place in the fp32 logits
};

struct OutputShape {
  double seq = 0;     // s
  double batch = 0;   // b
  double hidden = 0;  // h
  double vocab = 0;   // v
};

struct OutputActivations {
  double embedding_dropout = 0;  // the embedding dropout's 1-byte mask, sbh (the stage holding the embedding)
  double final_norm = 0;         // final norm input and output (the output projection's input), 2p sbh
  double logits = 0;             // fp32 logits, 4 sbv / t (vocabulary-parallel)
  double cross_entropy = 0;      // the loss's saved fp32 softmax, 4 sbv / t, unless computed in place
};

// The embedding output itself is the first layer's input, which the layer
// formula already counts (the first norm's input); dropout keeps only its mask.
// The bf16 output of the LM head projection lives only until the upcast and is
// not counted.
inline OutputActivations output_activations(const OutputShape& x, const ActivationSettings& o, CrossEntropy loss) {
  const double sb = x.seq * x.batch;
  const double t = o.tensor_parallel;
  const double replicated_divisor = o.sequence_parallel ? t : 1;
  OutputActivations out;
  out.embedding_dropout = (o.dropout ? 1.0 : 0.0) * sb * x.hidden / replicated_divisor;
  out.final_norm = 2 * o.bytes * sb * x.hidden / replicated_divisor;
  out.logits = 4 * sb * x.vocab / t;
  out.cross_entropy = loss == CrossEntropy::unfused ? 4 * sb * x.vocab / t : 0;
  return out;
}

}  // namespace memplan::plugins
