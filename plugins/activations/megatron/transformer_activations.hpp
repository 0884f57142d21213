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

#include <memplan/support/kv_heads.hpp>

#include <algorithm>
#include <cstdint>

namespace memplan::plugins {

enum class RecomputePolicy {
  none,
  selective,  // Korthikanti et al.: recompute the attention core
  full,       // keep each layer's input, recompute the layer
  per_op,     // torchtitan's op-level SAC: keep every other matmul's output and attention's, recompute the rest
};

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
  // Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434), when kv_latent > 0: q_width and kv_width
  // are then heads x the q/k head width (no-rope part + rope part), kv_heads = heads.
  double q_latent = 0;     // q_lora_rank: the query latent (0: queries projected from the hidden state)
  double kv_latent = 0;    // kv_lora_rank: the key/value latent
  double rope = 0;         // qk_rope_head_dim: the rope key every head shares, beside the kv latent
  double v_width = 0;      // heads x v_head_dim: V and the attention output
  double kv_up_width = 0;  // heads x (no-rope + v_head_dim): the kv up-projection's output
  double shared_ffn = 0;   // MoE: the width of the shared expert every token passes (0: none)

  bool latent() const { return kv_latent > 0; }
};

// How a layer is written, which decides what autograd keeps (eager_layer_terms).
enum class LayerImplementation {
  fused,   // Megatron-LM with Transformer Engine: Korthikanti et al.'s tensors
  eager,   // PyTorch modules as Hugging Face Transformers and torchtune write them
  legacy,  // Megatron-LM's own layers before Megatron-Core (megatron/model/transformer.py): fused, plus two copies
};

// What the eager implementation keeps depends on which weights train: an
// nn.Linear keeps its input only for its weight's gradient, a norm's weight
// multiply keeps the normalized tensor only when the weight trains (PyTorch's
// autograd saves a tensor only when the gradient that uses it is computed:
// tools/autograd/gen_variable_type.py, guard_for; derivatives.yaml).
struct EagerLayer {
  bool rms_norm = true;              // RMSNorm upcasts its input to fp32; LayerNorm keeps its input and mean/rstd
  // Norms of width h per layer: 2, or 4 where each block also has a norm after it (Gemma 2 and 3's
  // post_attention_layernorm and post_feedforward_layernorm, which read the block's output): each keeps what a
  // norm keeps; only the two before the blocks feed projections.
  double layer_norms = 2;
  // RMSNorm multiplies by its weight in fp32 (Gemma's output * (1 + weight.float()), then the cast back): a trained
  // norm's weight gradient reads the fp32 normalized tensor, 4h, not its 16-bit cast (memplan_model.norm_scale_fp32).
  bool norm_scale_fp32 = false;
  bool norms_trainable = true;
  bool attention_trainable = true;   // q, k, v projections
  bool output_trainable = true;      // o projection
  bool mlp_trainable = true;         // gate/up (first) projections
  bool down_trainable = true;        // down (second) projection
  bool repeat_kv = true;             // K and V copied to every query head before attention (repeat_kv)
  // LoRA adapters (PEFT LoRA Linear.forward): lora_A keeps its (dropped-out) input, lora_B the r-wide product.
  double adapter_inputs = 0;         // input elements per token per layer of all adapted matrices (sum of d_in)
  double adapter_distinct_inputs = 0;  // the same, counting a shared input once (q, k, v share theirs)
  double adapter_rank = 0;           // r x adapted matrices per layer: lora_B's inputs
  double adapter_bytes = 2;          // the adapters' dtype
  double adapter_dropout = 0;        // lora_dropout: > 0 keeps a 1-byte mask and a dropped copy per adapted matrix
  bool adapter_mlp = false;          // the dense MLP's matrices are adapted through PEFT (lora.mlp): peft_mlp_excess
  bool adapter_o = false;            // o is adapted through PEFT (lora.o): its lora_A reads the attention output
  bool adapter_qkv = false;          // q, k or v is adapted (lora.qkv): read by compiled layers only
  // DoRA (lora.dora_outputs, lora.dora_weights; dora_saves below): the adapted matrices' output widths summed, per
  // token, and their d_in x d_out summed, per layer. 0: no DoRA.
  double dora_outputs = 0;
  double dora_weights = 0;
  // The forward runs under torch.autocast in the activations' dtype over 16-bit weights (the HF Trainer and
  // accelerate with bf16/fp16 on a model loaded in that dtype: megatron's autocast): adapters in a wider dtype
  // compute in the activations' (eager_layer_terms, peft_mlp_excess).
  bool adapter_autocast = false;
  // Fused LoRA autograd functions (lora.kernels: axolotl's kernels/lora.py @ 8c6a6ea6e LoRA_QKV, LoRA_O,
  // LoRA_MLP, after Unsloth's fast_lora.py): each keeps its input in the activations' dtype, whatever trains;
  // LoRA_MLP keeps X, gate and up (save_for_backward(X, gate, up, ...)) and recomputes the SwiGLU product in
  // backward, so neither silu's output nor down's input is kept. Their adapters keep nothing of their own.
  bool kernel_qkv = false;
  bool kernel_o = false;
  bool kernel_mlp = false;
  bool kernel_adds_in_place = false;  // Unsloth's matmul_lora (out.addmm_); axolotl's adds a temporary (p x d_out)
  // PyTorch up to 1.10 saves the softmax's input (fp32, a s per token) beside its output: derivatives.yaml's
  // `_softmax: self: _softmax_backward_data(grad, result, dim, self)` passed the input for its dtype only;
  // pytorch PR #65242 / #66018 (relanded 2021-10-01, first released in 1.11) passes the dtype instead.
  bool softmax_keeps_input = false;
  // Eager attention's softmax runs in fp32 on 16-bit scores (softmax(..., dtype=torch.float32), or autocast):
  // the transients eager_attention_transients counts.
  bool softmax_upcast = false;
  // bitsandbytes' MatMul4Bit (autograd/_functions.py @ 0.42.0 to 0.43.1) keeps its input A for backward whenever A
  // or the weight needs a gradient (ctx.tensors = (A, B)), though only the weight's gradient, which it never
  // computes, would use it: a 4-bit linear layer keeps its input even with its weight frozen. 0.43.2 (pull request
  // #1270) keeps (None, B).
  bool packed_inputs_kept = false;
  // The layer's linear weights are packed below one byte (a 4-bit base), whatever keeps their inputs: under
  // autocast PEFT's bitsandbytes Linear4bit casts nothing for its adapters (peft tuners/lora/bnb.py:
  // requires_conversion = not torch.is_autocast_enabled()), where a 16-bit Linear's adapters get a cast copy.
  bool packed_base = false;
  // fp32 norm weights ahead of bitsandbytes 4-bit MLP linears in a 16-bit run (PEFT's
  // prepare_model_for_kbit_training casts every non-quantized parameter to fp32: peft src/peft/utils/other.py
  // @ v0.15.2 lines 136-141): a norm returns weight x normalized in fp32 (transformers' LlamaRMSNorm), and
  // Linear4bit returns its input's dtype (bitsandbytes nn/modules.py, Linear4bit.forward: out.to(inp_dtype)), so
  // gate, up, SiLU's output and their product are fp32, down's output too and with it the residual stream
  // (ActivationSettings::residual_bytes = 4 from the plugin). Attention's 16-bit casts under autocast are as before.
  bool packed_outputs_fp32 = false;
  // RMSNorm computes in its input's dtype instead of upcasting to fp32 (lit_gpt/rmsnorm.py @ 8641822: x * rsqrt(mean(x
  // * x) + eps), no .float()): it keeps its input at the residual's width and the rsqrt per token, not 4h + 4.
  bool rms_norm_upcast = true;
  // LitGPT's CausalSelfAttention (lit_gpt/model.py @ 8641822): q, k and v are views of the fused qkv linear's
  // output (view, permute, split; the reshape to heads keeps a view when every head has its own kv group), RoPE's
  // torch.cat makes q and k new tensors, and SDPA saves v, a strided view that holds the whole qkv output (q + 2 kv
  // wide) alive. At micro-batch 1 the o projection reads a copy of SDPA's output: PyTorch 2.1's flash path
  // (aten/src/ATen/native/transformers/cuda/attention.cu, _scaled_dot_product_flash_attention_cuda and
  // _flash_attention_forward) reshapes q to (B*T, heads, head_dim), a view when B = 1, and allocates the output
  // empty_like it (head-major), so LitGPT's y.transpose(1, 2).reshape(B, T, C) copies; at B > 1 the reshape copies q
  // and the output is token-major, the reshape a view. An o that keeps its input then keeps a second q-wide tensor.
  bool fused_qkv = false;
  // Per-head RMSNorms on q and k before RoPE (Qwen3's q_norm/k_norm: models/qwen3/modeling_qwen3.py,
  // Qwen3Attention.forward; OLMo2's over the whole width counts the same but for 4 (a - 1) bytes of rsqrt a token):
  // each keeps what a norm keeps, at q's and k's widths, with one rsqrt per head and token.
  bool qk_norm = false;
  // K and V (at the kv heads) are held by the model's KV cache object, which a caller keeps beyond the layer's
  // backward: counted outside the layer (the activation plugin's kv_cache item), not as the layer's saved tensors.
  // Applies where attention reads K and V at the kv heads (no repeat_kv); repeated copies stay the layer's.
  bool kv_in_cache = false;
  // SDPA with a boolean attention mask (a padded batch, transformers >= 4.53's masking_utils) converts the mask
  // into an additive bias of the query's dtype in every call, which the memory-efficient kernel keeps for backward:
  // b x s x s x p bytes per layer, whatever the heads (torch aten/src/ATen/native/transformers/attention.cpp,
  // convert_boolean_attn_mask; measured: validation/measured/h100-2026-11-26.jsonl).
  bool attention_bias = false;
  // transformers' OPTAttention (models/opt/modeling_opt.py, from OPT's addition in v4.19 to the attention-interface
  // refactor) adds the additive mask to the 16-bit scores and clamps them with torch.max(scores, finfo.min) before
  // the softmax; maximum(self, other) saves both inputs (tools/autograd/derivatives.yaml), so eager attention also
  // keeps the masked scores, p a s bytes per token.
  bool masked_scores_kept = false;
  // Eager attention soft-caps its scores (Gemma 2's attn_logit_softcapping: transformers' eager_attention_forward
  // divides by the cap, takes tanh and multiplies back before the mask and softmax): tanh saves its output, p a s
  // bytes per token. SDPA has no soft-capping (transformers runs it without).
  bool attention_softcap = false;
  // The two-projection MLP's activation is ReLU (OPT): relu saves its result (derivatives.yaml: threshold_backward
  // (grad, result, 0)), the tensor the second projection keeps as its input; GELU also keeps its input (p f).
  bool relu_mlp = false;
  // The two-projection MLP's activation is the tanh GELU written as tensor ops (the model's gelu_new, where the
  // framework runs transformers' NewGELUActivation: 0.5 * x * (1.0 + tanh(c * (x + 0.044715 * pow(x, 3.0))))):
  // pow keeps x (GELU's input, counted), tanh its output, and the last multiply both its operands, 0.5 x and
  // 1 + tanh (tools/autograd/derivatives.yaml: pow, tanh (result), mul (self, other)): three more tensors of the
  // MLP's width beside GELU's input and output (megatron 1.36.0).
  bool composite_gelu = false;
  // SwiGLU as one autograd function that keeps its inputs (gate and up) and recomputes silu in backward (Liger's
  // LigerSiLUMulFunction: ctx.save_for_backward(a, b), liger_kernel/ops/swiglu.py @ ead96b61): silu's output is
  // not kept; the product still is where down keeps its input.
  bool fused_swiglu = false;
  // Eager attention drops out its probabilities (a 1-byte mask and the dropped copy) when dropout is on; OPT's
  // attention_dropout is 0.0 beside a residual dropout of 0.1 (F.dropout with p = 0 returns its input, no mask).
  bool attention_dropout = true;
};

struct ActivationSettings {
  double bytes = 2;            // activation dtype size
  bool dropout = true;         // Korthikanti et al. assume dropout (1-byte masks)
  bool flash_attention = false;
  double tensor_parallel = 1;  // t
  // The ranks each expert's matrices are split over (layout.expert_tensor_parallel; t unless the expert-parallel
  // plugin's tensor_size says otherwise). The dispatcher gathers the routed tokens over them before fc1.
  double expert_tensor_parallel = 1;
  bool sequence_parallel = false;
  RecomputePolicy recompute = RecomputePolicy::none;
  bool reentrant = false;      // recompute.reentrant: the whole layer is rerun and its output held in its backward
  // dtype.linear_inputs: bytes per element of what the linear layers save of their inputs (Transformer Engine's
  // fp8: 1); 0: the input itself, at `bytes`. Read by fused layers.
  double linear_input_bytes = 0;
  // The loop's wrapper casts the model's returned 16-bit logits to fp32 as the forward returns: accelerate's
  // convert_outputs_to_fp32 under native AMP (Accelerator.prepare_model wraps model.forward in autocast and
  // convert_outputs_to_fp32 for fp16 and bf16: accelerate v0.30.1 accelerator.py 1356-1365, utils/operations.py
  // 768-815, convert_to_fp32's tensor.float(); the same at 1.13.0), which the Hugging Face Trainer applies: 4 bytes
  // a returned logit at the forward's end, beside what the loss keeps, until the loop drops the output.
  bool returned_logits_fp32_copy = false;
  // After the loss, while its saves and the returned logits are alive (the graph stands until backward), the loop
  // computes metrics over the returned logits in their dtype as it sees them (fp32 with returned_logits_fp32_copy):
  // TRL's SFTTrainer.compute_loss (trl/trainer/sft_trainer.py, token accuracy from v0.15.0, entropy from v0.22.0).
  // `returned_logits_shifted_copies`: copies of the logits without their last position held at once
  // (logits[..., :-1, :].contiguous(), or reshape of that slice), made only where the micro-batch has more than
  // one row: at one row the slice is contiguous (a size-1 dimension's stride is not checked) and both return it.
  // `returned_logits_chunk_copies` tensors of a chunk of `returned_logits_chunk_rows` rows (0: one batch row, s
  // tokens) at once (entropy_from_logits: log_softmax, exp and their product). The two run one after the other:
  // the larger counts, beside the returned logits, at the forward's end.
  double returned_logits_shifted_copies = 0;
  double returned_logits_chunk_copies = 0;
  double returned_logits_chunk_rows = 0;
  // The model soft-caps its logits (Gemma 2's final_logit_softcapping: cap x tanh(logits / cap) before returning
  // them): tanh saves its output, p per logit, from the head's forward to its backward (output_activations).
  bool logit_softcap = false;
  LayerImplementation layer = LayerImplementation::fused;
  // The layers run under torch.compile (layer = "compiled"): AOTAutograd's partitioner saves only the tensors
  // the backward graph reads, so under the per_op policy a must-save output backward never reads is not kept
  // (per_op_saved_down below). Read by the per_op policy and by output_activations (the final norm and the
  // LM head outside the compiled blocks stay eager); the layers' other terms are the fused layer's.
  bool compiled = false;
  // Megatron-Core from core_r0.13.0 applies the router's probabilities inside each expert, to the activation's
  // output (fused_layer MoE term below); before, the unpermute multiplied the experts' outputs by them.
  bool moe_probs_in_expert = false;
  EagerLayer eager;  // the eager layer's; compiled layers read what trains, fused layers qk_norm
  // Eager layers under autocast over wider weights (dtype.residual): the
  // residual stream and the norms keep this dtype while the matrix multiplies
  // compute in `bytes`. 0 (or not wider than `bytes`): no autocast.
  double residual_bytes = 0;
};

// Whether an eager layer keeps its MLP's normed input: a trained first projection, bitsandbytes' MatMul4Bit
// (packed_inputs_kept), or a fused LoRA_MLP function (its X).
inline bool mlp_input_kept(const EagerLayer& e) { return e.mlp_trainable || e.packed_inputs_kept || e.kernel_mlp; }

// The residual stream's bytes per element: `residual_bytes` under autocast,
// else the activations' (docs/formulas.md, "Eager layers under autocast").
inline double residual_dtype_bytes(const ActivationSettings& o) {
  return o.residual_bytes > o.bytes ? o.residual_bytes : o.bytes;
}

// The forward runs under torch.autocast: over fp32 weights (an fp32 residual) or over 16-bit ones
// (EagerLayer::adapter_autocast). Autocast's fp32 op list has softmax: its input is cast to fp32 first.
inline bool under_autocast(const ActivationSettings& o) {
  return residual_dtype_bytes(o) > o.bytes || o.eager.adapter_autocast;
}

// Eager attention's softmax output bytes: fp32 where it runs in fp32 (softmax_upcast's dtype=torch.float32, or
// autocast), the model's own dtype otherwise (GPT-2's and BERT's eager attention in pure fp16).
inline double softmax_output_bytes(const ActivationSettings& o) {
  return o.eager.softmax_upcast || under_autocast(o) || o.bytes >= 4 ? 4 : o.bytes;
}

struct LayerActivations {
  double replicated = 0;      // norms, their outputs and dropout masks: split only with sequence parallelism
  double split = 0;           // projections and MLP: split t ways
  double split_kv = 0;        // K and V: split min(t, kv_heads) ways (ranks beyond kv_heads hold replicas)
  double attention_core = 0;  // softmax, its dropout, attention over V (or flash-attention statistics)
  double attention_mask = 0;  // SDPA's 16-bit bias from a boolean padding mask: per layer, not split by heads
};

// What DoRA adds to a layer's saves (docs/formulas.md, "DoRA"): per token,
// bytes; per layer, bytes. PEFT's DoRA (peft src/peft/tuners/lora/dora.py @
// d787f51b, DoraLinearLayer.forward 132-166; variants.py DoraLinearVariant.forward
// 218-246; lora/layer.py 1056: x cast to the adapters' dtype) and torchtune's
// (torchtune/modules/peft/dora.py @ 1814feb1, DoRALinear.forward 126-162) compute
//   mag_norm_scale = magnitude / weight_norm.detach()      (paper, section 4.3)
//   (mag_norm_scale - 1) * base_result + mag_norm_scale * lora_result * scaling
// where both products save their d_out-wide operand for the trainable
// magnitude's gradient (derivatives.yaml, mul: other for self's gradient):
// base_result, the base layer's output (p), and lora_result = lora_B(lora_A(x)),
// lora_B's output: in the adapters' dtype p_a where PEFT cast x to it, in p
// under autocast (which runs lora_B in p). With lora_dropout in training PEFT
// recomputes base_result = F.linear(dropout(x), W.to(x.dtype)) (the dropped
// input's dtype: p_a, or p under autocast), and that matmul saves its weight
// for the input's gradient: a copy of each adapted weight (d_in x d_out per
// matrix and layer) wherever W.to(x.dtype) (or dequantize_module_weight, for
// a packed base) or autocast's cast makes a new tensor: at p_a without
// autocast, at p under it; none for a 16-bit base whose weight is used as is.
// torchtune reuses the undropped base_out (no copy; not told apart here: a
// dropout above 0 counts PEFT's). The weight norm itself is detached: its
// tensors are transients of the forward (dora_weight_norm_bytes).
struct DoraSaves {
  double per_token = 0;  // bytes a token: the base and lora_B outputs of every DoRA-adapted matrix
  double per_layer = 0;  // bytes a layer: the weight copies PEFT's dropped path saves
};
inline DoraSaves dora_saves(const ActivationSettings& o) {
  const EagerLayer& e = o.eager;
  if (e.dora_outputs <= 0) return {};
  const double p = o.bytes;
  const bool autocast = residual_dtype_bytes(o) > p;
  const bool in_p = autocast || e.adapter_autocast;  // lora_B (and a dropped base matmul) compute in p
  const bool dropped = e.adapter_dropout > 0;
  const double lora_out = in_p ? p : e.adapter_bytes;
  const double base_out = dropped && !in_p ? e.adapter_bytes : p;
  DoraSaves saves;
  saves.per_token = e.dora_outputs * (base_out + lora_out);
  if (dropped) {
    // Under autocast over fp32 weights autocast casts every weight to p; over 16-bit weights the 16-bit
    // Linear's W.to(fp32) is cast back to p (new) unless the adapters are p (W itself), and a packed base's
    // dequantized p copy is used as is; without autocast W.to(p_a) is new when p_a differs, a packed base's
    // always.
    const bool new_copy = e.packed_base || e.adapter_bytes != p;
    const double copy = autocast ? p : !new_copy ? 0 : e.adapter_autocast ? p : e.adapter_bytes;
    saves.per_layer = e.dora_weights * copy;
  }
  return saves;
}

// The high point of DoRA's weight norm in one adapted matrix's forward, bytes
// (one matrix at a time, while a layer's forward runs and, recomputed, while
// its backward recomputes it). PEFT's get_lora_weight (dora.py @ d787f51b
// 94-99) runs lora_B(lora_A(x_eye)) on an identity of d_in x d_in in the
// adapters' dtype p_a, which lora_A's graph keeps while the product lives
// (to the end of forward); forward 137-145 holds lora_weight (d_in x d_out,
// cast to x's dtype p_x), W.to(p_x) (a new tensor for a packed base or p_x
// other than the weights' dtype), and get_weight_norm (85-91) adds the scaled
// product to the weight: two more d_in x d_out tensors at once, before the
// d_out norm. torchtune's forward (dora.py @ 1814feb1, 148-156) the same with
// x_eye in x's dtype. lora_A(x_eye), d_in x r, is left out.
//   widest_input^2 p_a + (3 + [new weight copy]) p_x largest_matrix
// with the largest d_in and d_in x d_out of the DoRA-adapted matrices.
inline double dora_weight_norm_bytes(const ActivationSettings& o, double widest_input, double largest_matrix) {
  const EagerLayer& e = o.eager;
  if (e.dora_outputs <= 0) return 0;
  const double p = o.bytes;
  const double r = residual_dtype_bytes(o);
  // x's dtype at the adapters: the layer's input dtype (the residual's under autocast over fp32 weights), cast
  // to p_a by PEFT where it differs, except bitsandbytes' Linear4bit under autocast (no conversion).
  const double input = r > p ? r : p;
  const bool cast = e.adapter_bytes != input && !(e.adapter_autocast && e.packed_base);
  const double x_bytes = cast ? e.adapter_bytes : input;
  const double weight_bytes = r > p ? r : p;  // an unpacked base's weights
  const bool new_copy = e.packed_base || x_bytes != weight_bytes;
  return widest_input * widest_input * e.adapter_bytes + (3 + (new_copy ? 1 : 0)) * x_bytes * largest_matrix;
}

// What an eager layer keeps for backward, per token, from the autograd rules
// of each op (PyTorch tools/autograd/derivatives.yaml; Hugging Face
// transformers models/llama/modeling_llama.py and models/bert/modeling_bert.py,
// torchtune modules/rms_norm.py, attention.py, feed_forward.py; the
// derivation, tensor by tensor, is in docs/formulas.md, "Eager layers"):
//   RMSNorm      its input upcast to fp32 (4h) and rsqrt (4), and the
//                normalized tensor cast back (p h) when its weight trains
//   LayerNorm    its input (p h) and fp32 mean and rstd (8)
//   linear       its input (p x d_in) when its weight trains
//   SDPA flash   q, k, v, its output (= the o projection's input) and the
//                fp32 log-sum-exp (4 a); K and V at every query head after
//                repeat_kv (a real copy when kv heads < heads)
//   eager attn   q, k (QK^T), the softmax in fp32 (4 a s), the probabilities
//                cast back (p a s) or, with dropout, its 1-byte mask and the
//                dropped copy, v, and the transposed copy that enters o;
//                up to PyTorch 1.10 also the softmax's fp32 input (4 a s,
//                softmax_keeps_input)
//   SwiGLU       gate output (silu's input), silu's output and the up output
//                (the product's operands), and the product (down's input)
//   GELU MLP     the first projection's output and GELU's output
//   dropout      a 1-byte mask after attention and after the MLP
// With p = 2, RMSNorm, SwiGLU, flash attention, every weight trained and K/V
// repeated this is (24h + 8f + 4a + 8) bytes per token (HF Llama, torchtune);
// with p = 4, LayerNorm, GELU, eager attention and dropout it is
// (34h + 8f + 9as + 16): Korthikanti et al.'s tensors in fp32 (HF BERT).
//
// Under autocast over fp32 weights (residual_bytes r = 4 > p; pytorch
// aten/src/ATen/autocast_mode.cpp @ 008ec6b1840c94ff6d0f685bc10fbf585167c673:
// layer_norm on the fp32 list, linear on the lower-precision list, casts of
// non-leaf tensors not cached) the residual stream stays fp32 (the 16-bit
// output of o or down plus the fp32 residual promotes), so a norm keeps its
// input at r (LayerNorm r h + 8; RMSNorm's normalized copy, cast back to the
// fp32 input dtype, r h), and each trained projection that reads a norm's fp32
// output casts it into a 16-bit copy of its own that it saves: q, k and v
// three (p h each), a gated MLP's gate and up two, a plain MLP's first one.
// Everything after a projection is 16-bit as before. For HF BERT (LayerNorm,
// GELU, eager attention, dropout, p = 2) that is 8h bytes per token more than
// at p = 2 without autocast: 2 x 2h (the norms' inputs) + 2 x 2h (k's and v's
// copies).
inline LayerActivations eager_layer_terms(const TransformerShape& x, const ActivationSettings& o) {
  const EagerLayer& e = o.eager;
  const double sb = x.seq * x.batch;
  const double p = o.bytes;
  const double r = residual_dtype_bytes(o);
  const bool autocast = r > p;
  const double mask = o.dropout ? 1.0 : 0.0;
  const double rms_kept = e.rms_norm_upcast ? 4 * x.hidden + 4 : r * x.hidden + r;  // input (+ fp32 upcast), rsqrt
  const double normalized = e.norm_scale_fp32 && e.rms_norm_upcast ? 4 : r;  // the weight multiply's other input
  const double norm = e.rms_norm ? rms_kept + (e.norms_trainable ? normalized * x.hidden : 0) : r * x.hidden + 8;
  // Copies of a norm's output the projections after it keep: one shared, or under autocast one per projection
  // (multi-head latent attention's down-projections are left at one).
  double attention_copies = autocast && !x.latent() ? 3 : 1;
  double mlp_copies = autocast && x.gated ? 2 : 1;
  // fp32 inputs kept by bitsandbytes <= 0.43.1's MatMul4Bit (packed_inputs_kept): its Linear4bit switches the
  // compute dtype to an fp32 input's (set_compute_type, before bitsandbytes pull request #1623), so x.to(compute)
  // is x itself: one fp32 tensor shared by the projections that read it, not a 16-bit cast each.
  const bool fp32_kept = e.packed_outputs_fp32 && e.packed_inputs_kept;
  double kept_bytes = p;
  if (fp32_kept) {
    attention_copies = mlp_copies = 1;
    kept_bytes = 4;
  }
  LayerActivations terms;
  // The norms, the norm outputs the trained projections keep, the residual dropout masks, and the adapters.
  const bool attention_input = e.attention_trainable || e.packed_inputs_kept || e.kernel_qkv;
  const bool mlp_input = mlp_input_kept(e);
  terms.replicated = sb * (e.layer_norms * norm + (attention_input ? attention_copies * kept_bytes * x.hidden : 0) +
                           (mlp_input ? mlp_copies * kept_bytes * x.hidden : 0) + 2 * mask * x.hidden);
  if (e.adapter_rank > 0) {
    // PEFT casts each adapted layer's input to its adapters' dtype (peft src/peft/tuners/lora/layer.py @ d787f51b,
    // Linear.forward: x = self._cast_input_dtype(x, lora_A.weight.dtype), which returns x itself when the dtypes
    // match and x.to(dtype), a new tensor, otherwise): adapters in another dtype than the activations (fp32 adapters
    // on a bf16 base, PEFT's autocast_adapter_dtype) keep one cast copy per adapted matrix, a shared input included.
    // Under autocast (residual wider than the activations) the old count stands.
    // Under autocast over 16-bit weights (EagerLayer::adapter_autocast: the HF Trainer with bf16/fp16) the
    // adapters compute in the activations' dtype: bitsandbytes' Linear4bit skips the cast (bnb.py:
    // requires_conversion = not torch.is_autocast_enabled()), so lora_A keeps its input itself (below), or with
    // dropout its own dropped copy and mask (p + 1 per matrix);
    // the 16-bit Linear casts x to fp32 and autocast casts that back for lora_A, which keeps the 16-bit copy,
    // one per matrix (p, with dropout p + 1); lora_B's inputs are 16-bit. Adapters already in the activations'
    // dtype are cast by neither: the count below.
    // Undropped over a 4-bit base, lora_A keeps x itself: the tensor MatMul4Bit keeps where it keeps its input
    // (bitsandbytes <= 0.43.1: nothing more), else lora_A alone keeps it, each distinct input once (less o's where
    // SDPA or o keeps it: the split terms below).
    // o's lora_A reads the attention output, which the layer keeps already where SDPA saves it (flash) or o
    // keeps its input (the split terms below): not again where lora_A keeps it itself.
    const bool o_input_kept =
        e.adapter_o && !x.latent() && (o.flash_attention || e.output_trainable || e.packed_inputs_kept);
    if (e.adapter_autocast && !autocast && e.adapter_bytes != p) {
      double kept_inputs = e.adapter_inputs * p;
      if (e.adapter_dropout > 0) {
        kept_inputs = e.adapter_inputs * (p + 1);
      } else if (e.packed_base) {
        kept_inputs = e.packed_inputs_kept ? 0 : (e.adapter_distinct_inputs - (o_input_kept ? x.q_width : 0)) * p;
      }
      terms.replicated += sb * (kept_inputs + e.adapter_rank * p);
    } else {
      const bool cast_per_matrix = e.adapter_bytes != p && !autocast;
      // Uncast and undropped, lora_A keeps x itself: under a 4-bit base the very tensor MatMul4Bit keeps, which
      // the layer's inputs above count already.
      const bool shares_base_input = !cast_per_matrix && e.adapter_dropout == 0 && e.packed_inputs_kept && !autocast;
      const double distinct = e.adapter_distinct_inputs - (o_input_kept ? x.q_width : 0);
      const double kept_inputs =
          e.adapter_dropout > 0 ? e.adapter_inputs * (e.adapter_bytes + 1)
          : shares_base_input   ? 0
                                : (cast_per_matrix ? e.adapter_inputs : distinct) * e.adapter_bytes;
      terms.replicated += sb * (kept_inputs + e.adapter_rank * e.adapter_bytes);
    }
  }
  if (x.latent()) {
    // Multi-head latent attention as transformers' DeepseekV3Attention writes it (docs/formulas.md,
    // section 6, "megatron: multi-head latent attention, ..."): each latent (q_a's output, kv_a's first
    // kv_lora_rank columns) passes an RMSNorm, which keeps what a norm keeps, and the up-projection keeps
    // the normed latent when it trains. The latents are whole on every rank. The rope slice of kv_a's
    // output keeps nothing (rope saves only cos and sin).
    const double latent = x.q_latent + x.kv_latent;
    const double norms = x.q_latent > 0 ? 2 : 1;
    const double latent_norms = e.rms_norm ? 4 * latent + 4 * norms + (e.norms_trainable ? p * latent : 0)
                                           : p * latent + 8 * norms;
    terms.replicated += sb * (latent_norms + (e.attention_trainable ? p * latent : 0));
    // Q and K (torch.cat copies, heads x (nope + rope)); V: SDPA keeps the split view of kv_b's output, which
    // holds all of it (heads x (nope + v)), eager attention's matmul a contiguous copy (heads x v); the
    // attention output (heads x v) when SDPA saves it or o trains.
    terms.split = sb * p * (x.q_width + x.kv_width + (o.flash_attention ? x.kv_up_width : x.v_width) +
                            (o.flash_attention || e.output_trainable ? x.v_width : 0));
    terms.split_kv = 0;
  } else {
    const double kv_width = e.repeat_kv ? x.q_width : x.kv_width;
    // q and the attention output at the query width; K and V at the width attention sees them (at the kv heads
    // and held by a KV cache object: counted with the cache, EagerLayer::kv_in_cache).
    terms.split =
        sb * p * x.q_width * (o.flash_attention || e.output_trainable || e.packed_inputs_kept || e.kernel_o ? 2 : 1);
    terms.split_kv = e.kv_in_cache && !e.repeat_kv ? 0 : sb * 2 * p * kv_width;
    if (e.repeat_kv) {  // the repeated copies have as many heads as q: split like q
      terms.split += terms.split_kv;
      terms.split_kv = 0;
    }
    if (e.fused_qkv) {
      // V's view holds the fused qkv output: q and k widths besides v's (a GQA layer expands and copies v,
      // repeat_kv, and holds nothing more); o's input is a copy of SDPA's output at micro-batch 1, kept when o keeps
      // its input.
      if (!e.repeat_kv) terms.split += sb * p * (x.q_width + x.kv_width);
      if (o.flash_attention && x.batch == 1 && (e.output_trainable || e.packed_inputs_kept))
        terms.split += sb * p * x.q_width;
    }
  }
  if (e.qk_norm && !x.latent()) {
    // q_norm and k_norm: the fp32 upcast input (or the input itself without the upcast) and one rsqrt per head,
    // and the normalized copy cast back when the norm weights train (in fp32 where the norm multiplies by its
    // weight in fp32: norm_scale_fp32); RoPE after them saves only cos and sin.
    const auto norm_kept = [&](double width, double heads) {
      return (e.rms_norm_upcast ? 4 * width + 4 * heads : p * width + p * heads) +
             (e.norms_trainable ? (e.norm_scale_fp32 && e.rms_norm_upcast ? 4 : p) * width : 0);
    };
    terms.split += sb * norm_kept(x.q_width, x.heads);
    terms.split_kv += sb * norm_kept(x.kv_width, x.kv_heads > 0 ? x.kv_heads : x.heads);
  }
  if (e.attention_bias && o.flash_attention) terms.attention_mask = x.batch * x.seq * x.seq * p;
  // DoRA's saved outputs beside the adapters' (replicated, as the adapters' terms), and with dropout PEFT's weight
  // copies (split: a weight's shard per rank; dora_saves).
  const DoraSaves dora = dora_saves(o);
  terms.replicated += sb * dora.per_token;
  terms.split += dora.per_layer;
  auto mlp_of = [&](double ffn) {
    if (e.kernel_mlp && x.gated) return 2 * p * ffn;  // LoRA_MLP: gate and up (X is the MLP input above)
    const bool down_input = e.down_trainable || e.packed_inputs_kept;
    // The activation's saves at the linears' output dtype (fp32 under packed_outputs_fp32); what down keeps of
    // its input: the fp32 product itself where MatMul4Bit keeps its input (fp32_kept), else p.
    const double a = e.packed_outputs_fp32 ? 4 : p;
    const double down_bytes = fp32_kept ? 4 : p;
    if (!x.gated && e.relu_mlp) return a * ffn;  // ReLU's result: also the second projection's input
    if (!x.gated && e.composite_gelu) return 4 * a * ffn + (down_input ? down_bytes * ffn : 0);
    return x.gated ? (e.fused_swiglu ? 2 : 3) * a * ffn + (down_input ? down_bytes * ffn : 0)
                   : a * ffn + (down_input ? down_bytes * ffn : 0);
  };
  const double mlp = mlp_of(x.ffn);
  terms.split += sb * (x.top_k > 0 ? x.top_k * (2 * p * x.hidden + mlp) + p * x.experts : mlp);
  // The shared expert (DeepseekV3MoE.shared_experts, Qwen2MoeSparseMoeBlock.shared_expert): a dense MLP of its
  // own width on the same normed input, which the routed experts' input already counts.
  if (x.top_k > 0 && x.shared_ffn > 0) terms.split += sb * mlp_of(x.shared_ffn);
  if (o.flash_attention) {
    terms.attention_core = 4 * x.heads * sb;
  } else {
    const double scores = x.heads * x.seq * x.batch * x.seq;
    const bool dropped = o.dropout && e.attention_dropout;
    // The softmax keeps its output for its backward: fp32 where it runs in fp32 (softmax_upcast, or any softmax
    // under autocast, whose fp32 op list has softmax), and the matmul with V keeps the 16-bit cast of it (or the
    // dropped copy); in the model's 16 bits without autocast (HF BERT and GPT-2 eager attention in pure fp16:
    // modeling_bert.py BertSelfAttention, nn.functional.softmax(attention_scores, dim=-1)) the one 16-bit output
    // is both, and only dropout adds its copy. PyTorch up to 1.10 also keeps the softmax's input
    // (softmax_keeps_input): fp32 under autocast, which casts it first; otherwise the 16-bit scores themselves,
    // softmax(x, dtype=float32) on fp16 taking _softmax's half_to_float path without a copy.
    const double probabilities = softmax_output_bytes(o);
    const double kept_input = under_autocast(o) || p >= 4 ? 4 : p;
    terms.attention_core = scores * (probabilities + (probabilities != p || dropped ? p : 0) + (dropped ? 1.0 : 0.0) +
                                     (e.softmax_keeps_input ? kept_input : 0) + (e.masked_scores_kept ? p : 0) +
                                     (e.attention_softcap ? p : 0));
  }
  return terms;
}

// The three groups of bytes one layer stores for one micro-batch, before
// parallelism and recomputation.
inline LayerActivations layer_activation_terms(const TransformerShape& x, const ActivationSettings& o) {
  if (o.layer == LayerImplementation::eager) return eager_layer_terms(x, o);
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
  if (x.latent()) {
    // Multi-head latent attention as Megatron-Core writes it (MLASelfAttention with Transformer Engine;
    // docs/formulas.md, section 6, "megatron: multi-head latent attention, ..."): the down-projections
    // are plain linears every tensor-parallel rank runs whole (sequence parallelism splits their
    // tokens), and each latent enters
    // a fused norm + column-parallel up-projection that keeps the norm's input and output. The rope key
    // slice keeps nothing. Q and K are heads x (nope + rope), V and the attention output heads x v.
    terms.replicated += 2 * p * sb * (x.q_latent + x.kv_latent);
    terms.split = p * sb * x.q_width + p * sb * x.v_width;
    terms.split_kv = p * sb * x.kv_width + p * sb * x.v_width;
  }
  // MLP: first projection's output(s) and the activation function's output.
  auto mlp_of = [&](double ffn) { return p * sb * ffn * (x.gated ? 2 : 1) + p * sb * ffn; };
  // Megatron-Core's token dispatchers gather the routed tokens over the expert tensor-parallel group before fc1
  // (moe/token_dispatcher.py @ core_v0.13.0: the all-to-all dispatcher's all-gather over the expert TP group,
  // 646-654; the all-gather dispatcher over TP x EP, 244-258), so each rank's experts keep hidden-width rows for
  // ETP times its own routed tokens (the split terms are divided by t below): the expert's input, and before
  // core_r0.13.0 its output too. The MLP's own terms are each matrix's 1 / ETP slice of those rows: 1 / t in all.
  const double routed_gather = std::max(1.0, o.expert_tensor_parallel);
  const double mlp = mlp_of(x.ffn);
  // The shared expert every token passes (Megatron-Core SharedExpertMLP): a dense MLP of its width on the
  // pre-MLP norm's output, which the norm terms already count.
  if (x.top_k > 0 && x.shared_ffn > 0) terms.split += mlp_of(x.shared_ffn);
  if (x.top_k > 0 && o.moe_probs_in_expert)
    // Megatron-Core from core_r0.13.0 (2659630721, 2025-04-09, "Memory efficient token permutation"; tag
    // core_v0.13.0, 2025-07-25) passes the permuted probabilities into the experts and multiplies the
    // activation's output by them (megatron/core/transformer/moe/experts.py @ 5fe3f06658, TEGroupedMLP's
    // bias_act_func: activation_func(x) * permuted_probs, then .to(dtype); SequentialMLP through mlp.py's
    // activation_func_with_probs; the fused weighted_bias_swiglu_impl for SwiGLU, which saves its input and the
    // probabilities); the unpermute then sums the experts' outputs unweighted, keeping none of them. Per routed
    // token: the expert's input (p h), the MLP's saves, and for a two-projection MLP the weighted product beside
    // the activation's output the multiply keeps (p f more; SwiGLU's fused function keeps its inputs only).
    terms.split += x.top_k * (p * sb * x.hidden * routed_gather + mlp + (x.gated ? 0 : p * sb * x.ffn)) +
                   p * sb * x.experts;
  else if (x.top_k > 0)
    // Each token's hidden state is dispatched to top_k experts: per routed
    // token the expert keeps its input (the permuted copy of the hidden state)
    // and its MLP activations, and the weighted sum of the experts' outputs
    // keeps each output for the gradient of its routing weight (Hugging Face
    // Mixtral: expert_layer(x) * routing_weights; Megatron-LM: the unpermute
    // that applies the probabilities). Plus the router's probabilities, p sb E.
    terms.split += x.top_k * (2 * p * sb * x.hidden * routed_gather + mlp) + p * sb * x.experts;
  else
    terms.split += mlp;
  if (o.layer == LayerImplementation::fused && !o.compiled && o.linear_input_bytes > 0 && x.top_k == 0 &&
      !x.latent()) {
    // Transformer Engine's fp8 modules save the fp8 cast of each linear layer's input for the weight gradient
    // (TE v1.9: LayerNormLinear writes ln_out in fp8 and saves it, layernorm_linear.py 137 and 317-327; Linear
    // saves the fp8 transpose it casts, linear.py 118-150 and 299-337; LayerNormMLP's activation writes its output
    // in fp8 and saves it beside the 16-bit fc1 output, layernorm_mlp.py 264-275 and 462-478; Megatron-Core's
    // TELayerNormColumnParallelLinear and TERowParallelLinear are the first two): the two norms' outputs and the
    // activation's output at l bytes, not p; the projection's fp8 copy of the attention output beside the 16-bit
    // output flash attention keeps (without flash, only the copy: the output is kept by nothing else). Dense layers
    // (routed experts' grouped linears not read).
    const double l = o.linear_input_bytes;
    terms.replicated += 2 * (l - p) * sb * x.hidden;
    terms.split += (o.flash_attention ? l : l - p) * sb * x.q_width + (l - p) * sb * x.ffn;
  }
  if (o.layer == LayerImplementation::fused && !o.compiled && o.eager.qk_norm && !x.latent()) {
    // Megatron-Core's --qk-layernorm: q_layernorm and k_layernorm run on each head of query and key after the
    // split (megatron/core/transformer/attention.py, SelfAttention.get_query_key_value_tensors: lines 657/660 @
    // core_v0.11.0, 1029/1032 @ core_r0.14.0), modules of the layer spec (TENorm: Transformer Engine's RMSNorm or
    // LayerNorm), which keep their contiguous 16-bit input and one fp32 rstd per row, that is per head and token
    // (transformer_engine/pytorch/ops/basic/rmsnorm.py @ 02dc7709, RMSNorm.op_forward: x = input_.contiguous(),
    // ctx.save_for_backward(x, rstdevs)). Their outputs go through RoPE into attention, which keeps its own Q and K
    // (counted above).
    // TE's LayerNorm keeps the mean too (mu and rsigma, 8 bytes a row).
    const double kv_heads = x.kv_heads > 0 ? x.kv_heads : x.heads;
    const double stats = o.eager.rms_norm ? 4 : 8;
    terms.split += sb * (p * x.q_width + stats * x.heads);
    terms.split_kv += sb * (p * x.kv_width + stats * kv_heads);
  }
  if (o.layer == LayerImplementation::legacy && !x.latent()) {
    // Megatron-LM's legacy layers (megatron/model/transformer.py @ b35d061e, the ParallelTransformerLayer
    // of --use-legacy-models; docs/formulas.md, "megatron: legacy layers"):
    // - ParallelMLP runs SwiGLU as PyTorch ops, F.silu(x[0]) * x[1] after a separate bias add (bias_gelu_fusion
    //   is GELU's only): the product keeps silu's output besides its operands, p f more than the fused kernel;
    // - flash attention: FlashSelfAttention saves its output, and ParallelAttention rearranges it
    //   'b s h d -> s b (h d)' with .contiguous() into the dense projection's input, a second p h_q (a copy
    //   when the micro-batch is above 1; at 1 the rearranged view is already contiguous).
    // - grouped-query attention: K and V are repeat_interleave'd to every query head before attention (flash or
    //   not), and attention saves the repeated copies: at the query width, split like Q.
    // - RMSNorm is PyTorch ops (megatron/model/rms_norm.py: self._norm(x.float()).type_as(x) * self.weight): each
    //   of the two norms keeps its fp32 input copy and rsqrt (4h + 4) besides what the fused count keeps (its
    //   input's place is taken by the normalized copy the weight multiply saves). LayerNorm is apex's
    //   MixedFusedLayerNorm, as fused.
    if (o.eager.rms_norm) terms.replicated += 2 * sb * (4 * x.hidden + 4);
    if (x.gated && x.top_k == 0) terms.split += p * sb * x.ffn;
    if (o.flash_attention && x.batch > 1) terms.split += p * sb * x.q_width;
  }
  if (o.compiled && x.top_k == 0 && !x.latent()) {
    // AOTAutograd traces the layer's forward and backward as one graph and its partitioner
    // (torch/_functorch/partitioners.py) saves only what the backward graph reads; a frozen projection's
    // backward computes its input's gradient alone (grad @ W), so nothing reads its input unless an adapter's
    // lora_A does (the same tensor): the normed input of q, k and v, the MLP's normed input, and the
    // activation's output that enters down. The r-wide lora_A outputs are kept for lora_B's gradients. Inputs
    // stay where the code outside the compiled graph keeps them: bitsandbytes' MatMul4Bit (an autograd
    // Function dynamo does not trace, which saves its input whatever trains: packed_inputs_kept) and the fused
    // LoRA functions (kernel_qkv, kernel_mlp: each keeps its input). With lora_dropout each adapted matrix's
    // lora_A reads its own dropped copy, which the partitioner may not recompute (dropout is random): the
    // copy and its 1-byte mask, per adapted matrix.
    const EagerLayer& e = o.eager;
    const bool kept = e.packed_inputs_kept;
    if (!e.attention_trainable && !e.adapter_qkv && !kept && !e.kernel_qkv) terms.replicated -= p * sb * x.hidden;
    if (!e.mlp_trainable && !e.adapter_mlp && !kept && !e.kernel_mlp) terms.replicated -= p * sb * x.hidden;
    if (!e.down_trainable && !e.adapter_mlp && !kept && !e.kernel_mlp) terms.split -= p * sb * x.ffn;
    terms.replicated += e.adapter_bytes * sb * e.adapter_rank;
    if (e.adapter_dropout > 0) terms.replicated += (e.adapter_bytes + 1) * sb * e.adapter_inputs;
    // DoRA's two saved outputs and, with dropout, the weights' copies (dora_saves): the magnitude's gradient reads
    // the base output and lora_B's, both matmul outputs, which the partitioner never recomputes (partitioners.py
    // should_ban_recomputation: compute-intensive ops), and the dropped path's F.linear reads its weight copy.
    const DoraSaves dora = dora_saves(o);
    terms.replicated += sb * dora.per_token;
    terms.split += dora.per_layer;
  }
  // K and V copied to every query head before attention, and kept at its width (split like Q): in Megatron-LM's
  // legacy layers (above), and in compiled layers where the model repeats them (torchtune's expand and reshape,
  // torchtitan's repeat_kv), since attention's backward reads the copies and the partitioner never recomputes a
  // node the backward materializes (partitioners.py should_ban_recomputation).
  const bool repeated = (o.layer == LayerImplementation::legacy && !x.latent()) ||
                        (o.compiled && x.top_k == 0 && !x.latent() && o.eager.repeat_kv);
  if (repeated && x.kv_width < x.q_width) {
    terms.split += 2 * p * sb * x.q_width;
    terms.split_kv = 0;
  }
  const double scores = x.heads * x.seq * x.seq * x.batch;
  if (o.flash_attention)
    // FlashAttention keeps no s x s matrices, only the fp32 log-sum-exp per
    // query row and head (Dao 2023, FlashAttention-2, algorithm 1).
    terms.attention_core = 4 * x.heads * sb;
  else if (o.eager.softmax_upcast && !o.compiled && p < 4)
    // Megatron's unfused softmax in fp32 (FusedScaleMaskSoftmax.forward_torch_softmax: --no-masked-softmax-fusion,
    // or a shape its kernels refuse, with attention_softmax_in_fp32, which --apply-query-key-layer-scaling forces;
    // megatron/core/fusions/fused_softmax.py @ d98e8a64 299-341, megatron/model/fused_softmax.py alike): the
    // scores go to fp32 (input.float()), torch's softmax saves its fp32 output and the 16-bit cast of it feeds
    // the dropout (which keeps its mask) or the matmul with V (which keeps its input): 4 + p a score, and the
    // mask, where the fused kernel keeps one 16-bit output (2 p and the mask with dropout).
    terms.attention_core = scores * (4 + p + (o.dropout ? mask : 0));
  else
    // Softmax output, plus its dropout mask and dropout output when dropout is on.
    terms.attention_core = p * scores + (o.dropout ? (mask + p) * scores : 0);
  return terms;
}

// Ranks that share out the K and V heads: with fewer kv heads than
// tensor-parallel ranks, each rank keeps one whole (replicated) kv head
// (memplan/support/kv_heads.hpp, the rule tensor-parallel splits the k and v
// weights by).
inline double kv_divisor(const TransformerShape& x, const ActivationSettings& o) {
  return memplan::support::kv_ways(x.kv_heads, o.tensor_parallel);
}

// Whether torchtitan's op-level SAC keeps the down projection's output (the
// MLP's last multiply, which feeds only the residual add) when the save list
// reaches it. Eager SAC (torch/utils/checkpoint.py,
// _CachingTorchDispatchMode) stores the output of every MUST_SAVE op as it
// runs, read or not. Under torch.compile the policy only tags the graph's
// nodes (MUST_SAVE bans recomputation, PREFER_RECOMPUTE forces it), and
// AOTAutograd's min_cut_rematerialization_partition (pytorch/pytorch
// torch/_functorch/partitioners.py @ c28ba8e5, solve_min_cut) saves the cut
// between the source and the nodes the backward graph needs: a banned node
// with no path to the backward is never cut. Nothing in the layer's backward
// reads the down output (its weight gradient takes the SwiGLU product, its
// input gradient the weight; the residual add's gradient is the identity),
// so the compiled layer does not keep it. The other saved outputs are read:
// q and v by SDPA's backward (through the rotary for q), the MLP's first
// output by the SwiGLU product's recomputation, SDPA's output by o's weight
// gradient and SDPA's backward, and o's output (a latent layer's 5th
// multiply) by the recomputed residual h that the second norm reads.
inline bool per_op_saved_down(const ActivationSettings& o) { return !o.compiled; }

// torchtitan's op-level selective checkpointing of a multi-head latent
// attention layer (torchtitan models/deepseek_v3/model/model.py, Attention:
// wq_a, wq_b or wq, then wkv_a, wkv_b, wo; then the MLP's w1, w2, w3 as in
// Llama): the layer's input, the 1st, 3rd, 5th ... matrix multiply's output
// (with a query latent: q_a's, kv_a's (latent + rope) and o's; without: q's
// and kv_b's), then the MLP's in the same alternation, and SDPA's output
// (heads x v) and fp32 log-sum-exp. The latents are whole on every rank.
inline double per_op_latent_bytes(const TransformerShape& x, const ActivationSettings& o) {
  const double sb = x.seq * x.batch;
  const double t = o.tensor_parallel;
  const double whole_divisor = o.sequence_parallel ? t : 1;
  double whole = x.hidden;  // the layer's input
  double split = 0;
  int attention_matmuls = 0;
  if (x.q_latent > 0) {
    whole += x.q_latent + x.kv_latent + x.rope;  // q_a (1st), kv_a (3rd)
    split += x.hidden;                           // o (5th): the row-parallel output, per rank before its reduce
    attention_matmuls = 5;
  } else {
    split += x.q_width + x.kv_up_width;  // q (1st), kv_b (3rd)
    attention_matmuls = 4;
  }
  // The MLP's multiplies w1 (gate), w3 (up), w2 (down) for SwiGLU, up and down otherwise, continuing the count.
  const bool odd_next = attention_matmuls % 2 == 0;  // the MLP's first multiply is an odd one
  if (x.gated) split += odd_next ? x.ffn + (per_op_saved_down(o) ? x.hidden : 0) : x.ffn;
  else split += odd_next ? x.ffn : x.hidden;
  const double attention = o.flash_attention ? o.bytes * x.v_width + 4 * x.heads : 0;
  return o.bytes * sb * whole / whole_divisor + sb * (o.bytes * split + attention) / t;
}

// Bytes one layer keeps from forward to backward for one micro-batch.
inline double stored_bytes_per_layer(const TransformerShape& x, const ActivationSettings& o) {
  const LayerActivations terms = layer_activation_terms(x, o);
  const double t = o.tensor_parallel;
  const double split = terms.split / t + terms.split_kv / kv_divisor(x, o);
  const double replicated = o.sequence_parallel ? terms.replicated / t : terms.replicated;
  switch (o.recompute) {
    case RecomputePolicy::full:
      // Only the layer's input survives (sequence-parallel ranks hold 1/t of it), in the residual stream's dtype.
      return residual_dtype_bytes(o) * x.seq * x.batch * x.hidden / (o.sequence_parallel ? t : 1);
    case RecomputePolicy::per_op: {
      // The layer's input, and the outputs of the save-listed ops: the odd
      // matrix multiplies of q, k, v, o, then gate, up, down (SwiGLU) or up,
      // down (GELU) -- q, v, the MLP's first, and down for SwiGLU -- and
      // SDPA's output and fp32 log-sum-exp (flash; an eager attention's ops
      // are not on the list and are recomputed).
      const double sb = x.seq * x.batch;
      if (x.latent()) return per_op_latent_bytes(x, o);
      // Under torch.compile the down output is not kept (per_op_saved_down).
      const double matmuls = x.q_width + x.kv_width + x.ffn + (x.gated && per_op_saved_down(o) ? x.hidden : 0);
      const double attention = o.flash_attention ? o.bytes * x.q_width + 4 * x.heads : 0;
      return residual_dtype_bytes(o) * sb * x.hidden / (o.sequence_parallel ? t : 1) +
             sb * (o.bytes * matmuls + attention) / t;
    }
    case RecomputePolicy::selective:
      return replicated + split;
    default:
      return replicated + split + terms.attention_core / t + terms.attention_mask;
  }
}

// The residual as the layer's forward holds it in a Python local (transformers' LlamaDecoderLayer: residual =
// hidden_states) beyond what the layer saves: only where the post-attention norm keeps a copy of its own rather
// than the residual tensor itself. Hugging Face's RMSNorm saves hidden_states.to(float32), a new tensor for a
// 16-bit residual; LayerNorm, a norm in its input's dtype (Unsloth's, Liger's, LitGPT's: rms_norm_upcast =
// false) and an fp32 residual (.to(float32) returns it) keep the residual itself.
inline double residual_local_bytes(const TransformerShape& x, const ActivationSettings& o) {
  const EagerLayer& e = o.eager;
  const double r = residual_dtype_bytes(o);
  const bool own_copy = e.rms_norm && e.rms_norm_upcast && r < 4;
  return own_copy ? r * x.hidden / (o.sequence_parallel ? o.tensor_parallel : 1) : 0;
}

// What an eager layer with PEFT's LoRA on its dense MLP holds beyond all it
// saves while it computes the MLP (in forward, or recomputing it), per token;
// 0 where that stays below the saves. PEFT's LoRA Linear.forward (peft
// src/peft/tuners/lora/layer.py @ d787f51b; bnb.py's Linear4bit the same after
// a defensive clone) computes result = base_layer(x), casts x to the adapters'
// dtype p_a where it differs, then result + lora_B(lora_A(dropout(x))) *
// scaling: lora_B's output and its scaled copy (then the scaled copy and the
// sum) at once, while the base output stands where the saved output will be.
// Beside them the forward holds the residual (residual_local_bytes) and the
// MLP's normed input where nothing saves it (mlp_input_kept). Two moments:
//   up (the later of gate and up): + 2 p_a f, less what the layer saves only
//     later: SwiGLU's product where something keeps it (down training,
//     MatMul4Bit, or down's lora_A reading it uncast and undropped: p f) and
//     the down adapter's own kept input (its cast copy p_a f, or its dropped
//     copy and mask (p_a + 1) f);
//   down: + the product where nothing keeps it (p f), the cast copy where
//     dropout keeps a dropped one instead (p_a f), down's base output (p h),
//     and, when the recomputation is reentrant (it runs down to its end rather
//     than stopping at the last saved tensor), lora_B's two outputs (2 p_a h).
// Measured (validation/measured, snapshot-llama-3.2-3b-lora-r16-all-gc-bs8-
// s2048: fp32 adapters on every linear of a bf16 base, no dropout,
// non-reentrant): the up moment, 16,384 tokens x (2 x 2h + 2 x 4f - 4f) B =
// 738,197,504 B above the saves, the snapshot 737,148,928 (events 8100 and
// 8122); the down moment, stopped at down's lora_A (event 8114), 6h + 2f a
// token. Under autocast over 16-bit weights (adapter_autocast) the adapters'
// outputs are 16-bit and bitsandbytes' path casts nothing (the branch below);
// under autocast over fp32 weights (an fp32 residual): not modelled (0).
inline double peft_mlp_excess(const TransformerShape& x, const ActivationSettings& o) {
  const EagerLayer& e = o.eager;
  if (o.layer != LayerImplementation::eager || !e.adapter_mlp || e.adapter_rank <= 0 || x.top_k > 0) return 0;
  const double p = o.bytes;
  if (residual_dtype_bytes(o) > p) return 0;
  const double t = o.tensor_parallel;
  const double whole = o.sequence_parallel ? t : 1;
  const bool dropped = e.adapter_dropout > 0;
  // Whether PEFT casts x to the adapters' dtype: where they differ, except bitsandbytes' Linear4bit under
  // autocast over 16-bit weights (it casts nothing then).
  const double a = e.adapter_bytes;
  const bool cast = a != p && !(e.adapter_autocast && e.packed_base);
  // The MLP's normed input is a local unless a save holds it: a trained first projection, MatMul4Bit, or gate's
  // and up's lora_A reading it uncast and undropped.
  const bool mlp_input_saved = mlp_input_kept(e) || (!cast && !dropped);
  const double locals = residual_local_bytes(x, o) + (mlp_input_saved ? 0 : p * x.hidden / whole);
  const bool product_kept = e.down_trainable || e.packed_inputs_kept || (!cast && !dropped);
  double up = 0, down = 0;
  if (e.adapter_autocast) {
    // Autocast over 16-bit weights: lora_B's outputs in p. The 16-bit Linear's fp32 cast of x (p_a) is a local
    // beside the 16-bit copy autocast makes of it and lora_A keeps (with dropout: the fp32 dropped copy too, at
    // lora_A's call, and the mask).
    const double fp32_cast = cast ? a : 0;  // per input element
    const double down_adapter_kept = dropped ? p + 1 : (cast ? p : 0);
    up = locals + fp32_cast * x.hidden / whole + (2 * p - (product_kept ? p : 0) - down_adapter_kept) * x.ffn / t;
    down = locals + ((product_kept ? 0 : p) + fp32_cast * (dropped ? 2 : 1)) * x.ffn / t +
           (p + (o.reentrant ? 2 * p : 0)) * x.hidden;
  } else {
    const double down_adapter_kept = dropped ? a + 1 : (cast ? a : 0);  // per f, beside the product
    // With dropout the cast copy is a local at up's moment too (the dropped copy is what lora_A keeps).
    up = locals + (cast && dropped ? a : 0) * x.hidden / whole +
         (2 * a - (product_kept ? p : 0) - down_adapter_kept) * x.ffn / t;
    down = locals + ((product_kept ? 0 : p) + (cast && dropped ? a : 0)) * x.ffn / t +
           (p + (o.reentrant ? 2 * a : 0)) * x.hidden;
  }
  const double excess = std::max({0.0, up, down});
  return x.seq * x.batch * excess;
}

// The same for a fused LoRA_MLP (EagerLayer::kernel_mlp: axolotl's kernels/lora.py @ 8c6a6ea6e, Unsloth's
// kernels/fast_lora.py @ 015bdef0d9), per token, the larger of:
//   forward: the SwiGLU product h (p f), which the function does not keep, and down's output (p h), beside the
//     residual; axolotl's matmul_lora adds the adapters through a temporary of the output's width (out += (X @ A)
//     @ (s B): p h more), Unsloth's in place (out.addmm_);
//   backward: DW = dY @ down^T (p f; with axolotl's matmul_lora a temporary as wide, p f more) beside dY (p h),
//     and the layer's output (p h) where the recomputation is reentrant (it holds the rerun layer's output; so
//     does Unsloth's checkpoint function).
inline double kernel_mlp_excess(const TransformerShape& x, const ActivationSettings& o) {
  const EagerLayer& e = o.eager;
  if (o.layer != LayerImplementation::eager || !e.kernel_mlp || !x.gated || x.top_k > 0) return 0;
  const double p = o.bytes;
  const double t = o.tensor_parallel;
  const double temporary = e.kernel_adds_in_place ? 0 : 1;  // axolotl's adapter temporary, in outputs' widths
  const double forward = residual_local_bytes(x, o) + p * x.ffn / t + (1 + temporary) * p * x.hidden;
  const double backward = (1 + temporary) * p * x.ffn / t + (1 + (o.reentrant ? 1 : 0)) * p * x.hidden;
  return x.seq * x.batch * std::max(forward, backward);
}

// Eager attention without flash attention (transformers' eager_attention_forward and the older
// LlamaAttention.forward: scores = q k^T (16-bit), the mask added, softmax(scores, dtype=torch.float32), cast
// back for the product with V), per layer and micro-batch on the rank, in bytes, beyond what the layer saves
// (4 + p a score: the fp32 softmax that _softmax saves, and its 16-bit cast that the matmul saves):
//   forward, at the softmax: its input (p), the fp32 copy the upcast makes of a 16-bit input (4: at::softmax
//     converts before _softmax; autocast's fp32 cast alike) and the fp32 output (4): under recomputation none of
//     it is saved, so all of it (p + 4 + 4) is the layer's forward high point; otherwise the copy alone is
//     beyond the saves (the input makes way for the cast the matmul saves);
//   backward, at _softmax_backward_data: the saved fp32 output, the output's fp32 gradient (the cast's
//     backward) and the input's fp32 gradient, 12 bytes, where the 16-bit cast is freed once V's matmul has run
//     backward: 12 - the saves' 4 + p.
// (A 16-bit fp16 input with dtype=float32 takes _softmax's half_to_float path without the copy: over-counted
// by 4 bytes a score there.) Measured: an allocator history's recomputed eager layer holds four fp32
// score-sized blocks (validation/H100-gemma2-9b-trainer-lora-r16-all-gc-eager-bs1-s4096: four segments of
// 16 x 4,096^2 x 4 B); llama-recipes PR #41's forward peak sits at the last layer's softmax (validation/LR-pr41-*).
struct AttentionTransients {
  double forward = 0;   // what the layer's forward holds beyond its saves (all of it under recomputation)
  double backward = 0;  // what the layer's backward holds beyond its saves
};
// Megatron's unfused fp32 softmax (layer_activation_terms) makes the same fp32 copy and output: these hold for
// its layers too.
inline AttentionTransients eager_attention_transients(const TransformerShape& x, const ActivationSettings& o) {
  if (o.compiled || o.flash_attention || x.latent() || !o.eager.softmax_upcast) return {};
  const double p = o.bytes;
  const double scores = x.heads * x.seq * x.seq * x.batch / o.tensor_parallel;
  const double copy = p < 4 ? 4 : 0;
  const double saved = 4 + (p < 4 ? p : 0);
  const bool recomputed = o.recompute == RecomputePolicy::full || o.recompute == RecomputePolicy::per_op;
  return {scores * (recomputed ? p + copy + 4 : copy), scores * std::max(0.0, 12 - saved)};
}

// Extra bytes alive while backward recomputes one layer: what the layer saves,
// and the high point of its adapted MLP beyond that.
inline double recompute_working_set(const TransformerShape& x, const ActivationSettings& o) {
  const LayerActivations terms = layer_activation_terms(x, o);
  const double t = o.tensor_parallel;
  switch (o.recompute) {
    case RecomputePolicy::per_op:
    case RecomputePolicy::full: {
      ActivationSettings stored = o;
      stored.recompute = RecomputePolicy::none;
      // Beside its saves the recomputation holds the residual the layer's forward keeps as a local where the
      // post-attention norm saved a copy of its own (residual_local_bytes): the recomputation stops at the MLP's
      // last saved tensor, before the residual's add. The adapters' moments (peft_mlp_excess, kernel_mlp_excess)
      // count it with what else they hold. Measured (snapshot-llama-3.2-3b-trainer-full-gcdefault-bs4-s2048, full
      // fine-tuning under the 5.17 Trainer): the recomputation rises 137,320 bytes a token, the saves 131,176
      // and the residual 2h = 6,144.
      const double residual = o.layer == LayerImplementation::eager && !o.compiled
                                  ? x.seq * x.batch * residual_local_bytes(x, stored)
                                  : 0;
      // The attention's backward moment (eager_attention_transients) comes before the MLP's adapters' and
      // after the residual's: the largest of the three.
      return stored_bytes_per_layer(x, stored) +
             std::max({residual, peft_mlp_excess(x, stored) + kernel_mlp_excess(x, stored),
                       eager_attention_transients(x, stored).backward});
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
//
// The loss is the one place where what a framework writes changes the memory by
// whole bytes per logit: each mode gives the bytes per logit element (tokens x
// V / t) kept from forward to backward, and the extra bytes alive at the
// loss's forward and backward high points (docs/formulas.md, "Logits and loss").
enum class CrossEntropy {
  unfused,            // fp32 logits kept, and the loss saves its own fp32 (log-)softmax of the same size
  vocab_parallel,     // Megatron-LM: fp32 copy of the 16-bit logits, softmax in place and saved (4; 6 at both peaks)
  vocab_parallel_copy,  // Megatron-LM before core_r0.8.0: the max subtracted out of place, a second fp32 copy (4; 10, 6)
  // Megatron-Core's --cross-entropy-loss-fusion (native impl) under torch.compile: the in-place updates of the
  // fp32 logits written out of place, one more fp32 copy at each pass's high point (4; 10, 10)
  vocab_parallel_fused,
  upcast_shift_copy,  // HF transformers <= 4.45: fp32 logits in the output, a shifted fp32 copy, log-softmax (4; 12, 12)
  shift_copy,         // the same without the upcast (GPT-2 and others before 4.46, user losses): all in 16 bits (p; 3p, 3p)
  upcast_in_loss_shift_copy,  // HF 4.46-4.48: 16-bit logits in the output, fp32 copy, shifted copy (4; 14, 12)
  upcast_in_loss,     // HF >= 4.49: 16-bit logits in the output, the loss's fp32 copy, log-softmax (4; 10, 12)
  upcast,             // the model returns fp32 logits, held while the loss runs (torchtune: 4; 8, 12)
  chunked,            // logits projected and upcast chunk by chunk (torchtune CEWithChunkedOutputLoss): 4; 6 + 4/n, 4 + 8/n
  compiled,           // cross_entropy(logits.float()) under torch.compile (torchtitan with compile, 2025-04 on): p; p, 2p
  loss_parallel,      // PyTorch DTensor loss_parallel() on vocabulary-sharded logits (torchtitan with TP): 4; 12 + p, 16
  // torch.compile'd losses (torchtune's compile_loss): AOTAutograd's min-cut partitioner saves the loss's
  // input and its per-row reductions and recomputes the log-softmax in backward
  upcast_compiled,    // "upcast" with the loss compiled: the fp32 logits saved (4; 4 + p, 8)
  chunked_compiled,   // "chunked" with compute_cross_entropy compiled: the 16-bit chunks saved (p; p, p + p/n)
  // Cut Cross-Entropy (Wijmans et al. 2024, arXiv 2411.09009; apple/ml-cross-entropy, axolotl's
  // CutCrossEntropyPlugin): the loss from the head's input and weight, no logits in global memory (0; 0, 0)
  cut,
  // The head and the loss chunk by chunk inside the forward, the head input's gradient computed there and kept
  // for backward (unsloth-zoo's unsloth_fused_ce_loss): one chunk's 16-bit logits and gradient (0; 2p/n, 0)
  chunked_fused,
  // The same with each chunk computed eagerly (UNSLOTH_FUSED_CE_COMPILE_DISABLE=1, or where torch.compile
  // fails): the chunk's 16-bit logits, fp32 copy, log-softmax and two fp32 gradients (0; (p + 16)/n, 0)
  chunked_fused_eager,
  // The 16-bit logits kept and the loss kernel writing their gradient over them in backward (Unsloth's Triton
  // fast_cross_entropy_loss): p; 0, 0
  in_place,
};

// The losses that save the head's input (or a tensor of its size) whether or not the head trains: Cut
// Cross-Entropy's save_for_backward(e, c, ...), the fused chunked loss's input-gradient buffer.
inline bool keeps_head_input(CrossEntropy loss) {
  return loss == CrossEntropy::cut || loss == CrossEntropy::chunked_fused ||
         loss == CrossEntropy::chunked_fused_eager;
}

// The eager losses that compute on the whole logits the model returns (not chunked, compiled, fused or
// vocabulary-parallel): their fp32 gradients are freed before the LM head's backward, and a model's soft-capping
// (logit_softcap) runs on those logits.
inline bool eager_whole_logits_loss(CrossEntropy loss) {
  switch (loss) {
    case CrossEntropy::unfused:
    case CrossEntropy::upcast_shift_copy:
    case CrossEntropy::shift_copy:
    case CrossEntropy::upcast_in_loss_shift_copy:
    case CrossEntropy::upcast_in_loss:
    case CrossEntropy::upcast: return true;
    default: return false;
  }
}

// Bytes per logit element: saved, and the extra at the forward and backward
// high points of the loss (beyond the saved bytes).
struct LossBytes {
  double saved_logits = 0;   // what the model keeps as fp32 logits into backward
  double saved_loss = 0;     // what the loss keeps (its fp32 softmax or log-softmax)
  double forward_extra = 0;  // transient at the end of the loss's forward
  double backward_extra = 0; // transient at the start of the loss's backward
};

// `p` is the 16-bit (or wider) dtype the LM head computes in, `chunks` the
// chunk count of the chunked loss. Sources: Megatron-LM core_r0.14.0
// megatron/core/tensor_parallel/cross_entropy.py (logits.float(), exp and
// division in place, save_for_backward of the softmax; the backward casts the
// fp32 gradient to 16 bits); transformers v4.38 models/llama/modeling_llama.py
// (logits.float(), shift_logits ... .contiguous(), CrossEntropyLoss), v4.46
// src/transformers/loss/loss_utils.py (ForCausalLMLoss upcasts, shifts with a
// copy), PR #35646 (no shift copy); torchtune @ 1814feb1
// recipes/full_finetune_single_device.py and
// modules/loss/ce_chunked_output_loss.py; PyTorch's log_softmax and nll_loss
// keep only the log-softmax (derivatives.yaml). In every eager mode the
// backward high point is the saved log-softmax, the gradient of the loss
// w.r.t. it and w.r.t. the logits, all fp32 (12 bytes), before the cast back.
//
// Compiled (torchtune @ 1814feb1 training/_compile.py: compile_loss compiles
// the whole loss module, or for CEWithChunkedOutputLoss its
// compute_cross_entropy, logits.float() + F.cross_entropy, per chunk; the
// model's layers are compiled separately and the output projection and the
// model's .float() stay eager). AOTAutograd splits the compiled graph with
// min_cut_rematerialization_partition (pytorch/pytorch @ c28ba8e5
// torch/_functorch/partitioners.py): a reduction whose output is 4x smaller
// than its input is never recomputed (ban_if_reduction: the per-row max and
// log-sum-exp are saved), fusible pointwise intermediates weigh twice their
// size and graph inputs once, so the cheapest cut saves the loss's input, not
// its fp32 log-softmax, and backward recomputes the softmax from it in one
// fused kernel writing the gradient in the input's dtype (no fp32 copy
// materialized in either pass). Per logit element:
//   upcast_compiled:  the fp32 logits the model returned are saved (4, and they
//                     are no longer freed by the recipe's `del logits`); the
//                     16-bit projection output p beside them during the cast;
//                     backward the fp32 gradient 4 beside them
//   chunked_compiled: the 16-bit chunks are saved (p); nothing more in forward;
//                     backward one chunk's 16-bit gradient p/n
// The per-row statistics (8 bytes per token) are not counted.
inline LossBytes loss_bytes(CrossEntropy mode, double p, double chunks) {
  switch (mode) {
    case CrossEntropy::unfused: return {4, 4, 0, 0};
    case CrossEntropy::vocab_parallel: return {4, 0, p, p};  // the softmax lives in the fp32 logits' buffer
    // Before core_r0.8.0 (NVIDIA/Megatron-LM 9634c0e4, 2024-06-13, "Reduce logit memory pressure by using
    // in-place operation"; core_r0.7.0 megatron/core/tensor_parallel/cross_entropy.py:24) the forward computed
    // vocab_parallel_logits = vocab_parallel_logits - logits_max.unsqueeze(-1): a new fp32 tensor beside the
    // caller's output.float(), which the call's argument keeps: 4 bytes more at the forward's high point.
    case CrossEntropy::vocab_parallel_copy: return {4, 0, p + 4, p};
    // Megatron-Core's fused loss (--cross-entropy-loss-fusion, cross_entropy_fusion_impl "native":
    // megatron/core/fusions/fused_cross_entropy.py, added 7b4a6d76, 2024-06-14; read @ d98e8a64) runs the same
    // steps as vocab_parallel_cross_entropy in helpers wrapped in jit_fuser, which megatron/core/jit.py makes
    // torch.compile for torch >= 2.2. Those helpers update their fp32 input in place (the max subtracted and
    // exp'd in calculate_predicted_logits; divided by the sum in calculate_cross_entropy_loss; in backward the
    // target's entry and the scaling of the saved softmax in calculate_gradients, then .to(bfloat16)).
    // AOTAutograd functionalizes a compiled graph's mutation of its input: the graph computes the updated
    // values into a buffer of its own and copies them back into the input at its end, so each pass holds one
    // more fp32 tensor of the logits' size than the eager loss: p + 4 beyond the kept 4 at the forward's
    // high point (the 16-bit logits, the new buffer) and at the backward's (the new buffer, the 16-bit
    // gradient). Measured: Megatron-LM's CI goldens (tests/functional_tests/test_cases/gpt/
    // gpt3_mcore_te_tp2_pp2_resume_torch_dist and ..._cross_entropy_loss_fusion @ d98e8a64, dev_dgx_h100):
    // the fused run's mem-max-allocated-bytes 0.381 GiB above the unfused one, one fp32 copy of the last
    // stage's 4 x 1024 x 25,216 logits (0.385 GiB). The A100 "dev" goldens show two copies (0.78 GiB): not
    // modelled (another container's torch).
    case CrossEntropy::vocab_parallel_fused: return {4, 0, p + 4, p + 4};
    case CrossEntropy::upcast_shift_copy: return {0, 4, 8, 8};
    // The 16-bit logits (the model's output) and their shifted copy beside the
    // saved log-softmax; backward: the log-softmax and two 16-bit gradients.
    case CrossEntropy::shift_copy: return {0, p, 2 * p, 2 * p};
    case CrossEntropy::upcast_in_loss_shift_copy: return {0, 4, 8 + p, 8};
    case CrossEntropy::upcast_in_loss: return {0, 4, 4 + p, 8};
    case CrossEntropy::upcast: return {0, 4, 4, 8};
    case CrossEntropy::chunked: return {0, 4, p + 4 / chunks, 8 / chunks};
    // Inductor fuses the upcast, log-softmax and nll: the graph saves its 16-bit
    // input (and per-row statistics) and writes the 16-bit gradient in backward;
    // no fp32 buffer of the logits' size (docs/formulas.md, "Logits and loss").
    case CrossEntropy::compiled: return {p, 0, 0, p};
    // torch/distributed/tensor/parallel/loss.py: _log_softmax makes `shifted`
    // and exp(shifted) beside the fp32 copy; the fused nll/log-softmax backward
    // holds zeros_like(x), exp(x) and two results beside the saved log-softmax.
    case CrossEntropy::loss_parallel: return {0, 4, p + 8, 12};
    // The compiled losses save their input, which is the logits the model
    // returned (saved_logits: a held output is that same tensor).
    case CrossEntropy::upcast_compiled: return {4, 0, p, 4};
    case CrossEntropy::chunked_compiled: return {p, 0, 0, p / chunks};
    // Cut Cross-Entropy (apple/ml-cross-entropy @ d42911f9 cut_cross_entropy/cce.py, LinearCrossEntropyFunction):
    // forward computes the target logit and the log-sum-exp over the vocabulary block by block in on-chip
    // memory and saves (e, c, bias, lse, targets, valids): the head's input and weight, which exist anyway, and
    // fp32 per-token statistics (not counted, as above); backward recomputes the blocks and writes only the
    // gradients of e (and of c when it trains). Nothing of the logits' size in either pass.
    case CrossEntropy::cut: return {0, 0, 0, 0};
    // unsloth-zoo's UnslothFusedLoss.forward (unsloth_zoo/fused_losses/cross_entropy_loss.py @ ce232d6c):
    // torch.func.grad_and_value of compute_fused_ce_loss (linear, .float(), cross_entropy) per chunk of rows,
    // under torch.compile, writing each chunk's input gradient into one b x s x h buffer it saves for
    // backward (the head's input size, counted as `cut` counts the head's input); backward scales that buffer
    // (out of place from 46d587c4, 2026-04-23: a second one at backward's start, not counted). Inside a chunk the compiled graph materializes the matmul's 16-bit logits and the 16-bit gradient
    // it feeds to the gradient's matmul, the upcast and log-softmax fused into the kernels between them (the
    // same reading as `compiled`'s backward, 2p; not measured here): 2p per element of one chunk, at the
    // forward's end (the plugin adds the head's input and a trained head's gradient there). Nothing of the
    // logits' size outlives the call.
    case CrossEntropy::chunked_fused: return {0, 0, 2 * p / chunks, 0};
    // Eager (torch.func.grad_and_value without torch.compile): linear's p-byte logits, .float()'s fp32 copy,
    // log_softmax's fp32 output, and in its backward nll_loss's fp32 gradient and log_softmax's fp32 gradient
    // before the cast back: p + 16 bytes a chunk element. Measured: 18.00-18.02 bytes an element at p = 2 for
    // linear -> .float() -> cross_entropy -> backward at 1,024-4,096 tokens, vocabulary 151,936, on two GPUs
    // (unslothai/unsloth-zoo issue #946, 2026-07-25), 18.34 in the fused loss's own operation order on Kaggle
    // T4 and P100 (pull request #947, 2026-08-19).
    case CrossEntropy::chunked_fused_eager: return {0, 0, (p + 16) / chunks, 0};
    // Unsloth's Fast_CrossEntropyLoss (unsloth/kernels/cross_entropy_loss.py @ 734a9a0611): forward writes an
    // fp32 loss and log-sum-exp per row (not counted, as above) and saves the logits, the LM head's 16-bit
    // output; backward's _cross_entropy_backward writes the gradient into those logits and returns them.
    // CausalLM_fast_forward's logits.to(config.torch_dtype) copies only where the config's dtype differs from
    // the run's (not counted: transformers' from_pretrained sets the config's dtype to the loaded one).
    case CrossEntropy::in_place: return {p, 0, 0, 0};
  }
  return {};
}

// The bytes per logit element of the logits the model returns in its output
// object (the caller's to keep or drop): fp32 where the model upcasts before
// returning (transformers <= 4.45, torchtune's unchunked path), the LM head's
// dtype `p` where the loss upcasts its own copy (transformers >= 4.46) or the
// model returns 16-bit chunks (torchtune's chunked path); Megatron-LM's
// vocabulary-parallel loss runs inside the model, which returns the loss only.
inline double returned_logit_bytes(CrossEntropy mode, double p) {
  switch (mode) {
    case CrossEntropy::unfused:
    case CrossEntropy::upcast_shift_copy:
    case CrossEntropy::upcast:
    case CrossEntropy::upcast_compiled: return 4;
    case CrossEntropy::upcast_in_loss_shift_copy:
    case CrossEntropy::upcast_in_loss:
    case CrossEntropy::chunked:
    case CrossEntropy::chunked_compiled:
    case CrossEntropy::shift_copy:
    case CrossEntropy::compiled:       // torchtitan: the model returns 16-bit logits, the compiled loss upcasts
    case CrossEntropy::in_place:       // Unsloth: the 16-bit logits in the output (their storage the gradient's)
    case CrossEntropy::loss_parallel:  // the 16-bit vocabulary shard (a DTensor)
      return p;
    case CrossEntropy::vocab_parallel:
    case CrossEntropy::vocab_parallel_copy:
    case CrossEntropy::vocab_parallel_fused:
    // Cut Cross-Entropy's patched forward returns logits=None when it computes the loss
    // (apple/ml-cross-entropy @ d42911f9 cut_cross_entropy/transformers/llama.py, cce_forward).
    case CrossEntropy::cut:
    // Unsloth's CausalLM_fast_forward returns EMPTY_LOGITS beside the fused loss.
    case CrossEntropy::chunked_fused:
    case CrossEntropy::chunked_fused_eager: return 0;
  }
  return 0;
}

struct OutputShape {
  double seq = 0;     // s
  double batch = 0;   // b
  double hidden = 0;  // h
  double vocab = 0;   // v
};

struct OutputActivations {
  double embedding_dropout = 0;  // the embedding dropout's 1-byte mask, sbh (the stage holding the embedding)
  double final_norm = 0;         // final norm input and output (the output projection's input), 2p sbh
  double head_input = 0;         // of which the output projection's saved input (its own, or the norm's output)
  double logits = 0;             // fp32 logits kept into backward, 4 sbv / t (vocabulary-parallel)
  double cross_entropy = 0;      // the loss's saved fp32 softmax, 4 sbv / t, unless computed in place
  double loss_forward = 0;       // transient at the loss's forward high point
  double loss_backward = 0;      // transient at the loss's backward high point
  double held_output = 0;        // the returned logits a loop keeps until the next output replaces them
  double held_overlap = 0;       // of which the logits kept into backward (the same tensor), per micro-batch
  double softcap = 0;            // the soft-capping's saved tanh output, p sbv / t (logit_softcap)
};

// The embedding output itself is the first layer's input, which the layer
// formula already counts (the first norm's input); dropout keeps only its mask.
// The 16-bit output of the LM head projection is counted where it is alive
// with the fp32 copy (the loss's transients).
//
// `output_held`: the training loop keeps the model's output object after the
// loss (`output = model(...); loss = output.loss; loss.backward()`, as
// Answer.AI's fsdp_qlora train.py @ 50efa1e does): its logits stay alive
// through backward, the optimizer step and the next forward, until the next
// output replaces them, so they are alive in every phase from the first step
// on. They are the logits the model keeps into backward where it keeps them
// (saved_logits), so those are not counted twice.
//
// `frozen_norm` / `frozen_head` (eager RMSNorm only): a final norm or an LM
// head that computes no weight gradient saves no operand for one. The norm's
// last step, weight x normalized (transformers LlamaRMSNorm.forward @ v4.38),
// then keeps only the frozen weight, not the normalized copy; the head's
// matrix multiply keeps only its weight, not its input. Autograd saves an
// operand of mul and mm only for the other operand's gradient
// (pytorch/pytorch tools/autograd/gen_variable_type.py, guard_for: a saved
// input that one derivative uses is saved under should_compute_output;
// derivatives.yaml mul.Tensor, mm).
inline OutputActivations output_activations(const OutputShape& x, const ActivationSettings& o, CrossEntropy loss,
                                            double chunks = 8, bool output_held = false, bool frozen_norm = false,
                                            bool frozen_head = false) {
  const double sb = x.seq * x.batch;
  const double t = o.tensor_parallel;
  const double replicated_divisor = o.sequence_parallel ? t : 1;
  OutputActivations out;
  out.embedding_dropout = (o.dropout ? 1.0 : 0.0) * sb * x.hidden / replicated_divisor;
  // Under autocast the final norm's input and normalized copy are in the residual dtype, the LM head's input
  // is its 16-bit cast (residual_dtype_bytes is the activations' dtype otherwise).
  const double r = residual_dtype_bytes(o);
  // Compiled layers (layer = "compiled") leave the final norm and the LM head eager: torchtitan's
  // apply_compile and torchtune's compile_model compile the decoder blocks one by one, nothing outside them
  // (torchtitan models/llama3/infra/parallelize.py @ 9dec370 and @ 6fc499f6; torchtune training/_compile.py).
  if (o.layer == LayerImplementation::legacy && o.eager.rms_norm) {
    // Megatron-LM's legacy RMSNorm (megatron/model/rms_norm.py) keeps the fp32 input copy, rsqrt and the
    // normalized copy; the output layer keeps its input on the rank's tokens (as the fused path).
    out.final_norm = sb * (4 * x.hidden + 4 + r * x.hidden + o.bytes * x.hidden) / replicated_divisor;
    out.head_input = sb * o.bytes * x.hidden / replicated_divisor;
  } else if ((o.layer == LayerImplementation::eager || o.compiled) && o.eager.rms_norm) {
    // The final RMSNorm's fp32 input copy and rsqrt and its normalized copy,
    // on the tokens the rank holds (a sequence-parallel norm: torchtitan's
    // "norm": SequenceParallel()), and the LM head's input, whole: DTensor's
    // ColwiseParallel all-gathers Shard(1) to Replicate before the matmul,
    // which saves the gathered input for the weight's gradient
    // (torchtitan models/llama3/infra/parallelize.py @ v0.2.2; Megatron-LM's
    // fused path saves the sharded input and gathers again in backward). A norm that computes in its input's
    // dtype (rms_norm_upcast = false: LitGPT's RMSNorm, Unsloth's Triton kernel) keeps that input and its
    // rsqrt, as the layers' norms do (eager_layer_terms).
    out.head_input = frozen_head ? 0 : sb * o.bytes * x.hidden;
    out.final_norm = sb *
                         ((o.eager.rms_norm_upcast ? 4 * x.hidden + 4 : r * x.hidden + r) +
                          (frozen_norm ? 0 : (o.eager.norm_scale_fp32 && o.eager.rms_norm_upcast ? 4 : r) * x.hidden)) /
                         replicated_divisor +
                     out.head_input;
  } else {
    out.final_norm = (r + o.bytes) * sb * x.hidden / replicated_divisor;
    out.head_input = o.bytes * sb * x.hidden / replicated_divisor;
  }
  const double logit_elements = sb * x.vocab / t;
  LossBytes bytes = loss_bytes(loss, o.bytes, chunks);
  const double returned = returned_logit_bytes(loss, o.bytes);
  double held = output_held ? returned : 0;
  double held_overlap = std::min(held, bytes.saved_logits);
  if (o.returned_logits_fp32_copy && returned > 0 && returned < 4) {
    // At the return: the fp32 copy, beside the 16-bit logits unless the loss keeps them (counted as saved) and
    // the loss's own saves; the loss paths whose forward high point already holds as much stay as they are.
    bytes.forward_extra = std::max(bytes.forward_extra, (bytes.saved_logits >= returned ? 0 : returned) + 4);
    // A loop that holds the output holds the copy, a tensor of its own.
    if (output_held) {
      held = 4;
      held_overlap = 0;
    }
  }
  // The loop's metrics over the returned logits after the loss (TRL's SFTTrainer.compute_loss): beside the
  // logits as the loop sees them (unless the loss keeps that very tensor) and the loss's saves, the larger of the
  // shifted copies (micro-batches of more than one row) and the metric's chunks, in the logits' dtype as seen.
  if (returned > 0) {
    const double seen = o.returned_logits_fp32_copy && returned < 4 ? 4 : returned;
    const double rows = x.seq * x.batch;
    const double shifted = x.batch > 1 ? o.returned_logits_shifted_copies : 0;
    const double chunk_rows =
        o.returned_logits_chunk_rows > 0 ? std::min(o.returned_logits_chunk_rows, rows) : std::min(x.seq, rows);
    const double chunks = rows > 0 ? o.returned_logits_chunk_copies * chunk_rows / rows : 0;
    const double copies = std::max(shifted, chunks);
    if (copies > 0)
      bytes.forward_extra =
          std::max(bytes.forward_extra, (bytes.saved_logits >= seen ? 0 : seen) + copies * seen);
  }
  out.held_output = held * logit_elements;
  out.logits = bytes.saved_logits * logit_elements;
  out.held_overlap = held_overlap * logit_elements;
  out.cross_entropy = bytes.saved_loss * logit_elements;
  out.loss_forward = bytes.forward_extra * logit_elements;
  out.loss_backward = bytes.backward_extra * logit_elements;
  // The soft-capping runs in the model on its whole logits: in the eager losses that read them whole (not the
  // chunked, compiled or fused ones, which take the head's input; Megatron-LM's vocabulary-parallel loss has no
  // soft-capping).
  if (o.logit_softcap && eager_whole_logits_loss(loss)) out.softcap = o.bytes * logit_elements;
  return out;
}

}  // namespace memplan::plugins
