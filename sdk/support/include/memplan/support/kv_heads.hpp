// K and V heads per rank under tensor parallelism: the one rule the built-in
// plugins share (tensor-parallel splits the k/v projections by it,
// parameter_shapes.hpp sizes their matrices by it, the megatron and inference
// activation models split K, V and the KV cache by it).
//
// Tensor parallelism splits attention by heads (Shoeybi et al. 2019, arXiv
// 1909.08053, section 3: the q, k and v projections are column-parallel, so
// each rank computes a subset of the heads). With
// grouped-query attention (Ainslie et al. 2023, arXiv 2305.13245) there are
// fewer k/v heads than query heads, and possibly fewer than ranks t:
//
//   kv_heads >= t   each rank keeps kv_heads / t of them (shared out);
//   kv_heads <  t   each rank keeps one whole kv head, replicated over
//                   t / kv_heads ranks.
//
// This is vLLM's rule, ModelConfig.get_num_kv_heads (vllm/config.py):
//   max(1, total_num_kv_heads // tensor_parallel_size)
// with the comment "If tensor parallelism is used, we divide the number of KV
// heads by the tensor parallel size. We will replicate the KV heads in the
// case where the number of KV heads is smaller than the tensor parallel size
// so each GPU has at least one KV head." The tensor-parallel plugin accepts
// only sizes that divide kv_heads or are multiples of it, so the split is
// exact; heads_per_rank rounds up (never loses a head) where a plugin is given
// another size.
#pragma once

#include <cstdint>

namespace memplan::support {

// Ranks over which the kv heads are shared out: t when there are at least t
// of them, else kv_heads (each of those ranks' groups holds replicas). A
// kv_heads of 0 means unknown (a model given only by its parameter count):
// then the heads are taken to split t ways like every other projection.
// Templated so that the activation models, which keep their shapes in
// doubles, apply the same comparison to the same values.
template <typename Number>
constexpr Number kv_ways(Number kv_heads, Number tensor_parallel) {
  return kv_heads > 0 && kv_heads < tensor_parallel ? kv_heads : tensor_parallel;
}

// The share of the k/v projections (and of K, V and the KV cache) one rank
// holds: 1 / t, or 1 / kv_heads with replication.
constexpr double kv_fraction(int64_t kv_heads, int64_t tensor_parallel) {
  return 1.0 / static_cast<double>(kv_ways(kv_heads, tensor_parallel));
}

// KV heads one rank keeps: vLLM's get_num_kv_heads, rounded up instead of
// down (equal for every size the tensor-parallel plugin accepts). At least one
// whenever t > 1, as vLLM's max(1, ...).
constexpr int64_t kv_heads_per_rank(int64_t kv_heads, int64_t tensor_parallel) {
  if (tensor_parallel <= 1) return kv_heads;
  return kv_heads >= tensor_parallel ? (kv_heads + tensor_parallel - 1) / tensor_parallel : 1;
}

}  // namespace memplan::support
