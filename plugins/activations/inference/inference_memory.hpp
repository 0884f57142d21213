// Inference memory of a decoder-only transformer on one rank: the KV cache
// and the largest forward transient. Header-only and free of plugin plumbing
// so tests can check the formulas directly (docs/inference.md derives them).
//
// KV cache. Every attention layer keeps, for every cached token, one key and
// one value vector per kv head:
//   bytes per layer = 2 x kv_heads_per_rank x head_dim x tokens x sequences x kv_bytes
// (kv_heads_per_rank: the one rule of memplan/support/kv_heads.hpp, vLLM's.)
// (Kwon et al. 2023, "Efficient Memory Management for Large Language Model
// Serving with PagedAttention", arXiv 2309.06180, section 3: OPT-13B needs
// 2 x 5120 x 40 x 2 bytes = 800 KB per token.) Grouped-query attention
// (Ainslie et al. 2023, arXiv 2305.13245) and multi-query attention (Shazeer
// 2019, arXiv 1911.02150) shrink kv_heads below the query heads.
// PagedAttention stores a sequence's tokens in fixed blocks of `block` tokens,
// so a sequence occupies ceil(tokens / block) blocks (section 4.1).
// Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434, section 2.1.2)
// caches one latent per token instead of keys and values: kv_lora_rank + the
// rope key's qk_rope_head_dim elements, shared by every head, so every
// tensor-parallel rank holds all of it. vLLM sizes it as one kv head of
// head_size kv_lora_rank + qk_rope_head_dim (ModelArchConfigConvertorBase.
// get_head_size) with no separate value (vllm/v1/kv_cache_interface.py @
// 001cabc1, MLAAttentionSpec.real_page_size_bytes: block_size x num_kv_heads
// x head_size x dtype size, without FullAttentionSpec's key + value):
//   bytes per layer = (kv_lora_rank + qk_rope_head_dim) x tokens x sequences x kv_bytes
// DeepSeek-V3: 576 elements per token per layer (DeepSeek-V2 paper, Table 1:
// (d_c + d_h^R) l = 4.5 d_h l with d_c = 4 d_h, d_h^R = d_h / 2, d_h = 128).
// A sliding window of W tokens (Mistral 7B, Jiang et al. 2023, arXiv
// 2310.06825, section 2: rolling buffer cache) caps a windowed layer at W.
//
// Forward transient: a first-order model of the largest temporary memory of
// one layer's forward pass over a chunk of c tokens (see layer_transient).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace memplan::plugins::inference {

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Tokens a sequence occupies once rounded up to whole blocks of `block` tokens
// (PagedAttention); block = 1 means no paging.
inline int64_t paged_tokens(int64_t tokens, int64_t block) { return ceil_div(tokens, block) * block; }

// Blocks holding the last `held` of `length` tokens: positions length - held
// to length - 1, in blocks of `block` tokens counted from position 0.
inline int64_t window_blocks(int64_t length, int64_t held, int64_t block) {
  if (held <= 0 || length <= 0) return 0;
  const int64_t first = length - held;
  return (length - 1) / block - first / block + 1;
}

// Which of the layers [first, first + count) attend globally and which through
// a window. `window` 0: every layer is global. `global_every` N > 0 (with a
// window): layers N-1, 2N-1, ... are global, the rest windowed (hybrid models
// such as Gemma 2, N = 2, and Gemma 3, N = 6). `global_every` 0 with a window:
// every layer is windowed (Mistral 7B).
struct LayerMix {
  int64_t global_first = -1;
  int64_t global_count = 0;
  int64_t window_first = -1;
  int64_t window_count = 0;
};

inline LayerMix classify_layers(int64_t first, int64_t count, int64_t window, int64_t global_every) {
  LayerMix mix;
  if (count <= 0) return mix;
  if (window <= 0) {
    mix.global_first = first;
    mix.global_count = count;
    return mix;
  }
  if (global_every <= 0) {
    mix.window_first = first;
    mix.window_count = count;
    return mix;
  }
  // Layer i is global when (i + 1) is a multiple of N: count the multiples of
  // N in [first + 1, first + count].
  const int64_t n = global_every;
  mix.global_count = (first + count) / n - first / n;
  mix.window_count = count - mix.global_count;
  if (mix.global_count > 0) mix.global_first = ceil_div(first + 1, n) * n - 1;
  if (mix.window_count > 0) mix.window_first = (first + 1) % n != 0 ? first : first + 1;
  return mix;
}

// Tokens of the prefill pass an engine sizes to the context length when no
// chunk is given (the inference plugin's prefill_rule = "context"): one pass
// must hold a whole prompt of `context` tokens, and at least `min_tokens`;
// above `long_above` tokens of context (> 0) the engine chunks prompts
// instead, `long_chunk` tokens a pass. vLLM V0: SchedulerConfig sets
// max_num_batched_tokens = max(max_model_len, 2048) without chunked prefill
// (vllm/config.py @ 02dbf30e9a, v0.6.4, lines 1103-1118), and
// EngineArgs.create_engine_config switches chunked prefill on for
// max_model_len > 32768 (vllm/engine/arg_utils.py @ 02dbf30e9a, lines 996-1020),
// then 512 tokens (2048 from PR #10544, v0.6.5).
inline int64_t context_prefill_tokens(int64_t context, int64_t min_tokens, int64_t long_above, int64_t long_chunk) {
  if (long_above > 0 && context > long_above) return long_chunk;
  return std::max(context, min_tokens);
}

struct KvShape {
  double kv_heads = 0;  // per rank
  double head_dim = 0;
  double bytes = 2;     // per element of the cache dtype
  bool latent = false;  // latent attention: one latent per token (kv_heads 1, head_dim kv_lora_rank + rope), no V
};

// The cache of a latent-attention model: one "head" of the latent and the
// rope key, whole on every rank.
inline KvShape latent_kv(double kv_lora_rank, double qk_rope_head_dim, double bytes) {
  return KvShape{1, kv_lora_rank + qk_rope_head_dim, bytes, true};
}

// Bytes one layer caches for `sequences` sequences of `tokens` tokens each.
inline double kv_bytes_per_layer(const KvShape& kv, double tokens, double sequences) {
  return (kv.latent ? 1 : 2) * kv.kv_heads * kv.head_dim * tokens * sequences * kv.bytes;
}

// The shape of one layer's forward on one tensor-parallel rank.
struct ForwardShape {
  double hidden = 0;         // h
  double heads = 0;          // query heads of the whole model
  double head_dim = 0;       // q and k head width
  double v_head_dim = 0;     // value head width; 0: head_dim
  double kv_heads_rank = 0;  // kv heads on this rank (memplan/support/kv_heads.hpp); latent attention: heads / t
  double latent = 0;         // latent attention: the replicated latents per token (q_lora_rank + kv_lora_rank + rope)
  double ffn = 0;            // MLP inner width f (per expert for MoE)
  bool gated = false;        // SwiGLU: gate, up and their product
  double top_k = 0;          // MoE: experts each token visits; 0 for a dense MLP
  double shared_ffn = 0;     // MoE: the shared expert's width (every token passes it); 0: none
  double dense_ffn = 0;      // MoE with dense first layers on this rank: their MLP width; 0: none
  bool routed_in_workspace = false;  // MoE: the routed experts' temporaries are a persistent workspace
                                     // (moe_workspace_bytes), counted apart from the layer
  double tensor = 1;         // t
  double bytes = 2;          // p, the activation dtype size
  bool flash_attention = true;
  double score_bytes = 0;    // bytes a score holds at eager attention's high point (eager_score_bytes); 0: p
  double dequantized = 0;    // D: what a projection's dequantization holds (weights.dequantized_transient),
                             // counted by the precision plugin as an item of its own; 0: none
};

// The largest transient of one layer's forward pass over c tokens whose
// queries attend to up to `context` keys (a first-order model, not a
// profiler's measurement):
//   residual stream in and out           2 p c h              (replicated across ranks)
//   + the larger of
//     attention: Q, K, V outputs         p c (q/t + 2 kv_rank)   q = heads x head_dim
//                (latent attention, prefill's up-projected path, vllm/v1/attention/
//                backends/mla/common.py: Q and K of heads/t x head_dim, V of
//                heads/t x v_head_dim, and the replicated latents q_c, kv_c, k_pe)
//                scores without FlashAttention   e (heads/t) c context
//                (e: what the softmax holds per score, eager_score_bytes; p by default)
//     MLP:       p c f (3 if gated, else 2) / t   gate and up outputs and their product
//                (x top_k for MoE: each token visits top_k experts; plus the
//                shared expert's p c f_s (3 or 2) / t, whose output waits for
//                the routed experts'; the dense first layers' MLP where the
//                rank holds any, whichever is larger)
// The two branches do not coexist: the attention temporaries are freed before
// the MLP runs. Prefill over a whole prompt is c = b s with context s; decode
// is c = b (one new token per sequence) with context s.
inline double layer_transient(const ForwardShape& x, double tokens, double context) {
  const double p = x.bytes;
  const double c = tokens;
  const double residual = 2 * p * c * x.hidden;
  const double v_head_dim = x.v_head_dim > 0 ? x.v_head_dim : x.head_dim;
  double attention =
      p * c * (x.heads * x.head_dim / x.tensor + x.kv_heads_rank * (x.head_dim + v_head_dim) + x.latent);
  if (!x.flash_attention) attention += (x.score_bytes > 0 ? x.score_bytes : p) * (x.heads / x.tensor) * c * context;
  const double projections = x.gated ? 3 : 2;
  double mlp = p * c * x.ffn * projections / x.tensor;
  if (x.top_k > 0)
    mlp = (x.routed_in_workspace ? 0 : mlp * x.top_k) + p * c * x.shared_ffn * projections / x.tensor;
  mlp = std::max(mlp, p * c * x.dense_ffn * projections / x.tensor);
  if (x.dequantized > 0 && x.top_k == 0) {
    // A dense MLP whose projections dequantize their weight (D) as they run, the precision plugin's item:
    // at up's matmul the activation of gate's output and up's output stand beside D, at down's the product
    // and down's output (p c h); without a gate up's output alone beside D, then the activation's output
    // and down's output. transformers' Qwen2MLP / LlamaMLP: down_proj(act_fn(gate_proj(x)) * up_proj(x)).
    // The layer's item is that high point less D, so that with the precision plugin's D the two make the
    // high point rather than the product moment plus D (found on the Qwen2.5 speed benchmark's AWQ and
    // GPTQ-Int8 prefills, +0.4 to +3.8 % before).
    const double f = p * c * x.ffn / x.tensor;
    const double down = f + x.dequantized + p * c * x.hidden / x.tensor;
    const double moments = x.gated ? std::max({3 * f, 2 * f + x.dequantized, down}) : std::max(2 * f, down);
    return residual + std::max(attention, moments) - x.dequantized;
  }
  return residual + std::max(attention, mlp);
}

// How eager attention's softmax treats the 16-bit scores (the inference
// plugin's eager_softmax), and so the bytes per score element (b x heads/t x
// c x context) at the attention's high point, p the activation dtype size:
//   dtype          p          the score matrix in the activation dtype (the
//                             first-order figure memplan used before 1.9.0)
//   fp32           p + 4 + 4  softmax(x, dtype=torch.float32) on a bf16 input:
//                             at::softmax converts the input to fp32 before
//                             _softmax (pytorch aten/src/ATen/native/SoftMax.cpp,
//                             softmax(input_, dim_, dtype): `input_.toType(dtype)`),
//                             so the input, the fp32 copy and the fp32 output
//                             coexist; AutoAWQ 0.1.6's fused attention alike
//                             (`F.softmax(scores.float(), dim=-1)`); the cast back
//                             (input p + output 4 + cast p) is below it
//   half-to-float  p + 4 + p  the same call on an fp16 CUDA input takes
//                             _softmax(input, dim, half_to_float=true): no copy;
//                             the input and the fp32 output (p + 4), then the
//                             `.to(dtype)` cast beside both (the input is still
//                             bound to attn_weights until the statement ends)
// With fp32 activations (p = 4) the conversion returns the input itself: 8.
enum class EagerSoftmax { dtype, fp32, half_to_float };

inline double eager_score_bytes(EagerSoftmax rule, double p) {
  switch (rule) {
    case EagerSoftmax::fp32:
      return p < 4 ? p + 8 : 8;
    case EagerSoftmax::half_to_float:
      return p < 4 ? 2 * p + 4 : 8;
    case EagerSoftmax::dtype:
      break;
  }
  return p;
}

// vLLM's fused-MoE workspace (the unquantized experts' TritonExperts run through
// FusedMoEModularKernel; vllm-project/vllm
// vllm/model_executor/layers/fused_moe/fused_moe.py, TritonExperts.workspace_shapes,
// and modular_kernel.py @ 003d383eb3f3275169256e85e5b0ae9d5455342a, _allocate_buffers):
// for M tokens, top-k experts per token, N = w1's rows on the rank (2 I / t for a
// gated MLP, I / t otherwise) and K = hidden,
//   workspace13 = M x top_k x max(N / 2 if gated else N, K)   the activation's output
//   workspace2  = M x top_k x max(N, K)                       w1's output, then w2's
// in the activation dtype; the fused output (M x K) reuses workspace13's memory.
// Both come from WorkspaceManager.get_simultaneous (vllm/v1/worker/workspace.py @
// 00606a9b82656be5769ab11e3fc0029675d6b375), one buffer of the two sizes each
// rounded up to 256 bytes, which the manager keeps and only grows: the largest MoE
// pass's workspace stays allocated from the first MoE layer on, through the rest
// of the forward pass and the sampler run that follows it.
inline double moe_workspace_bytes(double p, double tokens, double top_k, double expert_ffn_rank, double hidden,
                                  bool gated) {
  const double n = (gated ? 2 : 1) * expert_ffn_rank;
  const double activation_out = gated ? n / 2 : n;
  const auto aligned = [](double bytes) { return std::ceil(bytes / 256) * 256; };
  return aligned(p * tokens * top_k * std::max(activation_out, hidden)) +
         aligned(p * tokens * top_k * std::max(n, hidden));
}

// fp32 logits of `rows` positions over a vocabulary-parallel LM head.
inline double logits_bytes(double rows, double vocab, double tensor) { return 4 * rows * vocab / tensor; }

// Bytes per (row x vocabulary entry) that vLLM V1's start-up sampler run
// holds at its high point, on every tensor-parallel rank of the last pipeline
// stage (the logits are all-gathered: vllm/model_executor/layers/
// logits_processor.py, _gather_logits with use_all_gather, the V1 default).
// The dummy SamplingMetadata of _dummy_sampler_run sets temperature 0.5, top_p
// 0.9 and top_k = vocab - 1, no logprobs and no penalties
// (vllm/v1/worker/gpu_model_runner.py @ 4e1790651f), so top-k/top-p masking
// runs; what it holds depends on how vLLM masks (docs/inference.md section 5
// has the line-by-line derivations).
//
// "sort": the PyTorch sort path (vllm/v1/sample/ops/topk_topp_sampler.py,
// apply_top_k_top_p, up to vLLM 0.16). Its high point is inside
// logits.sort(), a segmented radix sort of r rows of V fp32 keys:
//   bf16 logits held by the caller (compute_logits)             2
//   fp32 copy in Sampler.forward, temperature divided in place   4
//   sort outputs: values (fp32) and indices (int64)              4 + 8
//   PyTorch's int64 iota of positions, the values' input         8
//     (aten/src/ATen/native/cuda/Sort.cu, reverse_indices)
//   cub's third key and value buffers (SortPairs without a       4 + 8
//     DoubleBuffer: DispatchSegmentedRadixSort::InvokePasses,
//     cub/device/dispatch/dispatch_radix_sort.cuh)
//                                                               38
// (after the sort the last two are freed; the masks and the scattered copy
// then reach 28 at most).
inline constexpr double kSamplerSortBytesPerElement = 38;
// "triton": vLLM 0.17's Triton top-k/top-p kernel (PR #33538,
// vllm/v1/sample/ops/topk_topp_triton.py) masks the fp32 logits in place for
// batches of at least 8 rows; the run then holds 2 (bf16 logits) + 4 (fp32
// logits) + 4 (probs = logits.softmax) + 4 (random_sample's q) = 14. The
// kernel's own workspace (one fp32 vocabulary row per Triton program, at
// most one per SM) is not counted.
inline constexpr double kSamplerTritonBytesPerElement = 14;
inline constexpr double kSamplerTritonMinRows = 8;

// "flashinfer": vLLM V1's TopKTopPSampler.forward_cuda, which V1 selects where
// FlashInfer >= 0.2.3 is installed and VLLM_USE_FLASHINFER_SAMPLER is not set to
// 0 ("In V0, None means False, while in V1, None means True"; the start-up log
// says "Using FlashInfer for top-p & top-k sampling"; vllm/v1/sample/ops/
// topk_topp_sampler.py @ v0.9.2, read in the ROCm/vllm mirror at f8c9a3852). With
// both top-k and top-p set, as the dummy run sets them, flashinfer_sample calls
// flashinfer.sampling.top_k_top_p_sampling_from_logits on the fp32 logits, whose
// default filter order "top_k_first" makes masked_logits = top_k_mask_logits(...)
// and probs = torch.softmax(masked_logits) before the rejection-sampling kernel
// (flashinfer/sampling.py, 0.2.x): 2 (bf16 logits) + 4 (fp32 logits) + 4 (masked)
// + 4 (probs) = 14, at any row count; no sort.
inline constexpr double kSamplerFlashInferBytesPerElement = 14;

// How the start-up sampler run masks top-k/top-p (the plugin's sampler_path).
enum class SamplerPath { sort, triton, flashinfer };

// The bytes per (row x vocabulary entry) of a masking path for `rows` sampled
// rows: vLLM 0.17's Triton path sends fewer than 8 rows to the sort path
// (apply_top_k_top_p: HAS_TRITON and logits.shape[0] >= 8).
inline double sampler_bytes_per_element(SamplerPath path, double rows) {
  switch (path) {
    case SamplerPath::flashinfer: return kSamplerFlashInferBytesPerElement;
    case SamplerPath::triton:
      return rows >= kSamplerTritonMinRows ? kSamplerTritonBytesPerElement : kSamplerSortBytesPerElement;
    case SamplerPath::sort: break;
  }
  return kSamplerSortBytesPerElement;
}

// What the sampler run of `rows` requests holds beyond the forward pass's own
// transients (`forward`: the layer's and the logits' bytes, which the host
// adds): the chunk's hidden states that profile_run keeps (c x h), their
// last-token rows and the random copy _dummy_sampler_run draws (2 r h), all in
// the activation dtype p, plus `per_element` x r x V. The sampler runs after
// the forward pass, so the phase's high point is max(forward, sampler run);
// the excess is what makes the host's sum reach it. Never negative.
inline double sampler_excess_bytes(double hidden, double chunk, double rows, double vocab, double p,
                                   double per_element, double forward) {
  const double run = p * hidden * (chunk + 2 * rows) + per_element * rows * vocab;
  return std::max(0.0, run - forward);
}

}  // namespace memplan::plugins::inference
