// The tensors behind one weight item, for optimizers whose memory depends on
// tensor shapes rather than on element counts alone: Adafactor factors each
// matrix's second moment into a row and a column vector, bitsandbytes keeps
// tensors under 4096 elements in 32 bits and quantizes the rest per block, and
// a for-loop optimizer step allocates temporaries the size of one tensor.
//
// The core's inventory (docs/estimate.md, section 1) has one item per
// parameter class and layer group, so the shapes are derived from the class
// and the model's dimensions, in the unfused layout of Hugging Face models
// (separate q, k, v, o, gate, up and down projections):
//
//   class               matrices per instance   shape (rows x cols)
//   embedding           1                       h x V
//   position_embedding  1                       h x P   (P = elements / h)
//   attention (q, o)    1                       h x q   (q = heads x head_dim)
//   attention_kv (k, v) 1                       h x kv  (kv = kv_heads x head_dim)
//   attention_latent    1                       h x (elements / h): latent attention's q_a and kv_a
//   (under latent attention the attention items q_b, kv_b and o are not h
//   wide: they fall to the "split in a way this table does not know" rule
//   below, one matrix of h rows holding the item's elements)
//   mlp                 n (3 gated, 2 not)      h x f
//   expert              E n / expert-parallel   h x f_e
//   router              1                       h x E
//   lm_head             1                       h x V
//   norm                0 (1-D tensors of h)
//
// Megatron-style tensor parallelism never splits the hidden dimension h of
// these matrices: column-parallel layers (q, k, v, gate, up, vocabulary-
// parallel embedding and LM head) split their output dimension and
// row-parallel ones (o, down) their input dimension, which is q or f. So on a
// rank the rows stay h and the cols are divided as the tensor-parallel plugin
// divides the elements (plugins/strategies/tensor-parallel: 1/t, and for k and
// v kv_heads.hpp's share, 1/t or one whole kv head). Whatever an item holds beyond its matrices
// (qkv, output and MLP biases) is counted as 1-D tensors.
//
// Unknown classes (other, adapter) and params-only models have no known shape:
// callers treat such an item as one tensor or refuse, and say so.
#pragma once

#include <memplan/sdk.hpp>
#include <memplan/support/kv_heads.hpp>
#include <memplan/support/layout.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>

namespace memplan::support {

struct TensorShapes {
  bool known = false;          // false: the item's tensors cannot be told apart
  double matrices = 0;         // 2-D tensors per instance on this rank
  double rows = 0;             // the dimension no layout plugin splits (h)
  double cols = 0;             // the other dimension, on this rank
  double vector_elements = 0;  // elements in 1-D tensors per instance (norm weights, biases)
  double vector_size = 0;      // elements of one 1-D tensor (h for norms; cols for biases, approximately)

  double matrix_size() const { return rows * cols; }
  double matrix_elements() const { return matrices * rows * cols; }
  // Tensors of 1-D elements per instance.
  double vectors() const { return vector_size > 0 ? vector_elements / vector_size : 0; }
};

// Group sizes that change a rank's share of a tensor, from the layout plugins'
// attributes (sdk/include/memplan/conventions.h), with layout.hpp's default.
struct RankLayout {
  double tensor = 1;  // ranks.tensor
  double expert = 1;  // layout.expert_parallel: experts are divided over these ranks
};

// Through the handles of a LayoutReader the plugin made in its constructor:
// two host calls, no attribute looked up by name per evaluation.
inline RankLayout rank_layout(const sdk::Context& ctx, const LayoutReader& layout) {
  RankLayout ranks;
  ranks.tensor = static_cast<double>(layout.tensor(ctx));
  ranks.expert = static_cast<double>(layout.expert(ctx));
  return ranks;
}

// 1-D parameters that the inventory files under a matrix class because they
// split with it: an item of biases (gpt-oss's moe.experts_bias; names ending
// in "bias") and attention sinks (one logit per head, attn.sinks). Weight
// formats and fp8 recipes quantize or copy matrices, not these.
inline bool is_vector_weight(std::string_view name) {
  return name.ends_with("bias") || name.ends_with("sinks");
}

// The shapes of `elements` elements per instance of class `param_class`.
inline TensorShapes tensor_shapes(sdk::ParamClass param_class, double elements, const memplan_model& model,
                                  const RankLayout& ranks) {
  using sdk::ParamClass;
  TensorShapes shapes;
  if (!model.has_architecture || model.hidden <= 0) return shapes;
  const double h = static_cast<double>(model.hidden);
  const double t = ranks.tensor;
  const double head_dim = static_cast<double>(model.head_dim);
  const double q = static_cast<double>(model.heads) * head_dim;
  const double kv = static_cast<double>(model.kv_heads) * head_dim;
  const double n = model.gated_mlp ? 3.0 : 2.0;
  // The tensor-parallel plugin's share of k and v (kv_heads.hpp): 1/t, or one
  // whole kv head per rank when there are fewer kv heads than ranks.
  const double kv_share = kv_fraction(model.kv_heads, static_cast<int64_t>(t));

  switch (param_class) {
    case ParamClass::embedding:
    case ParamClass::lm_head:
      shapes.matrices = 1;
      shapes.cols = static_cast<double>(model.vocab) / t;
      break;
    case ParamClass::position_embedding:
      shapes.matrices = 1;
      shapes.cols = elements / h;
      break;
    case ParamClass::attention:
      shapes.matrices = 1;
      shapes.cols = q / t;
      break;
    case ParamClass::attention_kv:
      shapes.matrices = 1;
      shapes.cols = kv * kv_share;
      break;
    case ParamClass::attention_latent:
      // Latent attention's down-projections, h x latent, whole on every rank.
      shapes.matrices = 1;
      shapes.cols = elements / h;
      break;
    case ParamClass::mlp:
      shapes.matrices = n;
      shapes.cols = static_cast<double>(model.ffn_hidden) / t;
      break;
    case ParamClass::expert: {
      shapes.cols = static_cast<double>(model.expert_ffn_hidden) / t;
      // Whole h x f_e matrices: E n / ep of them, or fewer when a trainability
      // plugin split the experts (freeze's trained experts): count them from
      // the item rather than assume every expert is in it.
      const double whole = std::floor(elements / (h * shapes.cols) + 0.5);
      shapes.matrices = whole >= 1 ? std::min(whole, static_cast<double>(model.experts) * n / ranks.expert)
                                   : static_cast<double>(model.experts) * n / ranks.expert;
      break;
    }
    case ParamClass::router:
      shapes.matrices = 1;
      shapes.cols = static_cast<double>(model.experts);
      break;
    case ParamClass::norm:
    case ParamClass::final_norm:
      shapes.known = true;
      shapes.vector_elements = elements;
      shapes.vector_size = h;
      return shapes;
    default:
      return shapes;  // other, adapter: unknown
  }
  if (shapes.matrices <= 0 || shapes.cols <= 0) return shapes;
  shapes.known = true;
  shapes.rows = h;
  const double matrix_elements = shapes.matrix_elements();
  if (elements + 0.5 < matrix_elements) {
    // Split in a way this table does not know (a plugin other than the
    // built-in tensor-parallel one): keep h whole and scale the other side.
    shapes.cols = elements / (shapes.matrices * h);
    return shapes;
  }
  shapes.vector_elements = std::max(0.0, elements - matrix_elements);
  if (shapes.vector_elements > 0) shapes.vector_size = shapes.cols;
  return shapes;
}

// The shapes of an item: read in place (the fast path) or from a copy.
inline TensorShapes tensor_shapes(const sdk::ItemRef& item, const memplan_model& model, const RankLayout& ranks) {
  return tensor_shapes(item.param_class(), item.elements(), model, ranks);
}
inline TensorShapes tensor_shapes(const sdk::Item& item, const memplan_model& model, const RankLayout& ranks) {
  return tensor_shapes(item.param_class, item.elements, model, ranks);
}

}  // namespace memplan::support
