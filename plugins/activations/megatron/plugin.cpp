// 'megatron': training activations per transformer layer from Korthikanti et
// al. 2022 (see transformer_activations.hpp), for the layers and in-flight
// micro-batches of the reported pipeline stage, plus the activations outside
// the layers (section 4.3): the embedding dropout's mask on the stage that
// holds the embedding; the final norm, the fp32 logits and the loss's saved
// softmax on the stage that holds the LM head. Reads the layout the strategies
// declared: tensor-parallel ranks, sequence parallelism, stage layers and
// contents, in-flight micro-batches and the recompute policy.
#include <memplan/conventions.h>
#include <memplan/dtypes.hpp>
#include <memplan/sdk.hpp>
#include <memplan/support/cublas_workspace.hpp>
#include <memplan/support/items.hpp>
#include <memplan/support/layout.hpp>
#include <memplan/support/sharding.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fused_loss_chunks.hpp"
#include "largest_request.hpp"
#include "loss_requests.hpp"
#include "torch_ops_dequantize.hpp"
#include "transformer_activations.hpp"

namespace {

using memplan::plugins::ActivationSettings;
using memplan::plugins::CrossEntropy;
using memplan::plugins::LayerImplementation;
using memplan::plugins::RecomputePolicy;
using memplan::plugins::TransformerShape;

constexpr std::array<memplan_option_spec, 45> kOptions{{
    {"flash_attention", MEMPLAN_OPTION_BOOL, "attention keeps no s x s score matrices (FlashAttention)", "false",
     "true"},
    {"dropout", MEMPLAN_OPTION_BOOL, "dropout layers store 1-byte masks (Korthikanti et al. assume so)", "true",
     nullptr},
    {"cross_entropy", MEMPLAN_OPTION_STRING,
     "the loss path: \"unfused\" (fp32 logits and the loss's fp32 softmax both kept), \"vocab-parallel\" "
     "(Megatron-LM: softmax in place in an fp32 copy of the logits), \"vocab-parallel-copy\" (Megatron-LM before "
     "core_r0.8.0: the max subtracted out of place, a second fp32 copy at the forward), \"vocab-parallel-fused\" "
     "(Megatron-Core's --cross-entropy-loss-fusion under torch.compile: one more fp32 copy in each pass), "
     "\"upcast-shift-copy\" (Hugging Face "
     "transformers <= 4.45), \"shift-copy\" (the same in the logits' 16 bits: GPT-2 and other models without the "
     "upcast before 4.46, user losses), \"upcast-in-loss-shift-copy\" (transformers 4.46-4.48), \"upcast-in-loss\" "
     "(transformers >= 4.49), \"upcast\" (fp32 logits held while the loss runs: torchtune), \"chunked\" (chunk by "
     "chunk: torchtune CEWithChunkedOutputLoss), \"compiled\" (cross_entropy on upcast logits under torch.compile: "
     "the 16-bit logits kept, no fp32 copies; torchtitan with compile), \"loss-parallel\" (PyTorch's DTensor "
     "loss_parallel() on vocabulary-sharded logits: torchtitan with tensor parallelism), "
     "\"upcast-compiled\" and \"chunked-compiled\" (the same losses under torch.compile, torchtune's compile: "
     "True: the loss's input is saved, not its fp32 log-softmax), \"cut\" (Cut Cross-Entropy, axolotl's "
     "CutCrossEntropyPlugin: no logits materialized), \"chunked-fused\" (the head and the loss chunk by chunk "
     "inside the forward, the input's gradient computed there: unsloth-zoo's fused loss; one chunk's 16-bit "
     "logits and gradient at the forward's end), \"chunked-fused-eager\" (the same computed without "
     "torch.compile: p + 16 bytes a chunk element), \"in-place\" (the 16-bit logits kept, the loss kernel writing "
     "their gradient over them: Unsloth's Triton fast_cross_entropy_loss)",
     "\"unfused\"", nullptr},
    {"short_batch_tokens", MEMPLAN_OPTION_INT,
     "micro-batches of at most this many tokens (micro_batch x seq_len) take short_batch_cross_entropy instead "
     "(Unsloth from 2024.12.5 to 2025.10.7: 1,024), counted per context-parallel rank; 0: none",
     "0", nullptr},
    {"short_batch_cross_entropy", MEMPLAN_OPTION_STRING,
     "the loss path of the short micro-batches (one of cross_entropy's names)", "\"in-place\"", nullptr},
    {"loss_chunks", MEMPLAN_OPTION_INT,
     "chunks of the chunked cross entropy; for \"chunked-fused\" a fixed count instead of the target's rule",
     "8 (torchtune's num_output_chunks); chunked-fused: by loss_chunk_target_gib", nullptr},
    {"loss_chunk_target_gib", MEMPLAN_OPTION_DOUBLE,
     "chunked-fused: the GiB of fp32 logits one chunk is sized to (unsloth-zoo's target_gb); 0: no fixed target",
     "4 (unsloth-zoo from 2026.7.1)", nullptr},
    {"loss_chunk_free_share", MEMPLAN_OPTION_DOUBLE,
     "chunked-fused: a target of this share of the GPU's memory (unsloth-zoo takes half the free memory; the GPU's "
     "whole memory stands for it, an upper bound); the smaller of the two targets holds; 0: none",
     "0.5", nullptr},
    {"loss_chunk_rounding", MEMPLAN_OPTION_STRING,
     "chunked-fused: \"nearest\" (n = max(round(F / T / 4) x 4, 1), unsloth-zoo before 2026.7.1) or \"up\" "
     "(1 chunk where F <= T, else ceil(F / T / 4) x 4), F the fp32 logits and T the target in GiB",
     "\"up\"", nullptr},
    {"layer", MEMPLAN_OPTION_STRING,
     "\"fused\": Megatron-LM / Transformer Engine layers (Korthikanti et al.'s tensors); \"eager\": PyTorch "
     "modules as Hugging Face Transformers and torchtune write them (fp32 RMSNorm inputs, K/V repeated to every "
     "query head, SwiGLU's product, inputs kept only for trained weights); \"compiled\": those modules under "
     "torch.compile, whose partitioner recomputes the pointwise ops and saves what fused kernels save (counted "
     "as \"fused\", with K and V repeated per repeat_kv and frozen projections' inputs left out); \"legacy\": "
     "Megatron-LM's layers before Megatron-Core (megatron/model, "
     "--use-legacy-models): \"fused\" plus SwiGLU's silu output (eager SwiGLU) and, with flash attention and a "
     "micro-batch above 1, the attention output's contiguous copy; K and V repeated to every query head under "
     "grouped-query attention",
     "\"fused\"", nullptr},
    {"repeat_kv", MEMPLAN_OPTION_BOOL,
     "eager and compiled layers: K and V are copied to every query head before attention (transformers' repeat_kv, "
     "torchtune's expand, torchtitan's repeat_kv; false where SDPA's enable_gqa reads the kv heads directly)",
     "true", nullptr},
    {"offload", MEMPLAN_OPTION_BOOL,
     "move the layers' stored activations to host memory during forward and back in backward (torchtune's "
     "enable_activation_offloading): the GPU keeps two layers' worth in forward and offload_backward_layers' in "
     "backward",
     "false", nullptr},
    {"offload_scope", MEMPLAN_OPTION_STRING,
     "with offload: what goes to the host: \"model\" (torchtune's OffloadActivations around the model's whole "
     "forward but its output head, NoOpManager on model.output: the layers' saves and the final norm's) or "
     "\"layers\" (Unsloth's offloaded gradient checkpointing: the checkpointed layers' inputs only); "
     "nothing where offload is false",
     "\"model\"", nullptr},
    {"dequantized_buffer", MEMPLAN_OPTION_BOOL,
     "a base packed below one byte is dequantized for the forward's matmuls into one buffer kept across steps "
     "(Unsloth's fast_dequantize with use_global_buffer, 2025.2.1 on): the largest matrix persistent, and a "
     "temporary only in a layer's backward",
     "false", nullptr},
    {"packed_dequantize", MEMPLAN_OPTION_STRING,
     "how a linear layer packed below one byte dequantizes for its matmul: \"kernel\" (bitsandbytes' MatMul4Bit, "
     "AutoGPTQ's tritonv2 QuantLinearFunction: a temporary in forward and again in backward) or \"torch-ops\" "
     "(AutoGPTQ 0.4's qlinear_cuda_old at 128 rows or more: an int32 unpack of the whole matrix, then "
     "torch.matmul, whose autograd saves the fp16 weight: every packed matrix of a layer stays dequantized from "
     "its forward to its backward)",
     "\"kernel\"", nullptr},
    {"dequantized_copies", MEMPLAN_OPTION_INT,
     "copies of a base matrix packed below one byte that its matmul holds dequantized at once: 2 where bitsandbytes' "
     "MatMul4Bit dequantizes to the quant_state's dtype and casts to another compute dtype (Lightning Fabric "
     "quantizes from fp16 for bf16 compute)",
     "1", nullptr},
    {"offload_backward_layers", MEMPLAN_OPTION_INT,
     "with offload: how many layers' stored activations the GPU holds in backward: 2 (torchtune's "
     "OffloadActivations: the layer in flight and the next one brought back; Unsloth from 2025.3.2: its reload "
     "buffer and the last layer's input, which it does not offload) or 1 (Unsloth before 2025.3.2: "
     "Unsloth_Offloaded_Gradient_Checkpointer copies each layer's input back when that layer's backward starts)",
     "2", nullptr},
    {"rope_cache", MEMPLAN_OPTION_BOOL,
     "every attention layer's rotary embedding keeps cos and sin tables of max_context x head_dim as module "
     "buffers (Hugging Face transformers up to 4.38); a model with learned positions has none",
     "false", nullptr},
    {"layer_causal_mask", MEMPLAN_OPTION_BOOL,
     "every attention layer registers its own max_context x max_context 1-byte causal mask as a buffer "
     "(transformers' GPT2Attention `bias`, uint8 then bool; GPT-Neo and GPT-J alike), learned positions or not",
     "false", nullptr},
    {"causal_mask_buffer", MEMPLAN_OPTION_BOOL,
     "the model keeps a max_context x max_context bool causal mask as a buffer and expands it each forward to "
     "micro_batch x max_context^2 in the activations' dtype (transformers 4.38's LlamaModel)",
     "false", nullptr},
    {"output_held", MEMPLAN_OPTION_BOOL,
     "the training loop keeps the model's output object (its logits) after the loss, until the next forward's "
     "output replaces it (`output = model(...); loss = output.loss; loss.backward()`): the returned logits are "
     "alive in every phase (none under a loss that returns no logits: cut, vocab-parallel); with "
     "packed_linear_keeps_input and no recomputation also the 4-bit layers' inputs (activations.held_packed_inputs)",
     "false", nullptr},
    {"returned_logits_fp32_copy", MEMPLAN_OPTION_BOOL,
     "the loop's wrapper casts the model's returned 16-bit logits to fp32 as the forward returns (accelerate's "
     "convert_outputs_to_fp32 under fp16/bf16 mixed precision, which the Hugging Face Trainer applies): 4 bytes a "
     "returned logit at the forward's end beside what the loss keeps, and a held output holds that copy",
     "false", nullptr},
    {"returned_logits_shifted_copies", MEMPLAN_OPTION_INT,
     "after the loss, the loop copies the returned logits without their last position for its metrics "
     "(logits[..., :-1, :].contiguous(): TRL's SFTTrainer token accuracy): this many such copies at once, in the "
     "logits' dtype as the loop sees them (fp32 with returned_logits_fp32_copy), beside them and the loss's saves "
     "at the forward's end; none at a micro-batch of one row, whose slice is already contiguous",
     "0", nullptr},
    {"returned_logits_chunk_copies", MEMPLAN_OPTION_INT,
     "after the loss, the loop computes a metric over the returned logits chunk by chunk (TRL's "
     "entropy_from_logits: log_softmax, exp and their product, 3): tensors of one chunk held at once, at the "
     "forward's end; the larger of this and returned_logits_shifted_copies counts (one runs after the other)",
     "0", nullptr},
    {"returned_logits_chunk_rows", MEMPLAN_OPTION_INT,
     "the rows (tokens) of returned_logits_chunk_copies' chunk (TRL from v0.23.0: 128); 0: one batch row, "
     "seq_len tokens (TRL v0.22)",
     "0", nullptr},
    {"output_held_until", MEMPLAN_OPTION_STRING,
     "with output_held: \"next-forward\" (the output stays bound until the next forward's output replaces it) "
     "or \"step-end\" (the loop drops it after backward and the optimizer step, before the next forward: "
     "fsdp_qlora train.py's `output = None`): the held logits (and the KV cache, and the 4-bit layers' inputs "
     "it keeps) are then alive in backward and the optimizer step, not in the next forward; nothing where "
     "output_held is false",
     "\"next-forward\"", nullptr},
    {"softmax_keeps_input", MEMPLAN_OPTION_BOOL,
     "eager attention: the softmax also keeps its fp32 input for backward, as PyTorch up to 1.10 did (its "
     "_softmax_backward_data took the input for its dtype; 1.11 passes the dtype); no effect with flash_attention "
     "or fused layers",
     "false", nullptr},
    {"cache_under_recompute", MEMPLAN_OPTION_BOOL,
     "with use_cache: the layers are recomputed by a wrapper transformers does not see (torch's checkpoint_wrapper "
     "through FSDP's apply_activation_checkpointing, as llama-recipes did before its PR #165), so the model keeps "
     "use_cache on and its output's cache holds every layer's K and V through the forward (and the held output's "
     "into the next one); false: recomputation turns the cache off, as transformers' own gradient checkpointing does",
     "false", nullptr},
    {"composite_gelu_new", MEMPLAN_OPTION_BOOL,
     "eager layers of a model whose activation is gelu_new ([model] activation; GPT-2's config): the framework "
     "writes it as tensor ops, transformers' NewGELUActivation, whose autograd keeps tanh's output, 0.5 x and "
     "1 + tanh beside GELU's input and output (three more tensors of the MLP's width); false: one op or a fused "
     "kernel (LitGPT's F.gelu(approximate=\"tanh\"))",
     "true", nullptr},
    {"softmax_upcast", MEMPLAN_OPTION_BOOL,
     "eager attention without flash: the softmax runs in fp32 on the 16-bit scores (transformers' Llama-family "
     "eager attention, softmax(..., dtype=torch.float32), and any softmax under autocast), so one layer's forward "
     "holds its input, an fp32 copy and the fp32 output, and its backward three fp32 score-sized tensors "
     "(activations.attention_forward, activations.attention_backward) and the kept probabilities are the fp32 "
     "output beside its 16-bit cast; false (and no autocast): the softmax runs in the model's 16 bits, as GPT-2's "
     "and BERT's eager attention in pure fp16, and keeps one 16-bit output, with none of those transients. "
     "Megatron's own layers without flash: the unfused fp32 softmax (FusedScaleMaskSoftmax.forward_torch_softmax "
     "under --no-masked-softmax-fusion with attention_softmax_in_fp32), the same fp32 output and transients",
     "false; the hf-transformers profile sets true", nullptr},
    {"masked_scores_kept", MEMPLAN_OPTION_BOOL,
     "eager attention: the masked 16-bit scores pass torch.max(scores, finfo.min) before the softmax, which keeps "
     "them for backward (transformers' OPTAttention): p a s bytes per token and layer more; no effect with "
     "flash_attention or fused layers",
     "false", nullptr},
    {"relu_mlp", MEMPLAN_OPTION_BOOL,
     "eager layers: the two-projection MLP's activation is ReLU (OPT), which keeps only its output, the second "
     "projection's input (GELU also keeps its input); not with a gated MLP",
     "false", nullptr},
    {"attention_dropout", MEMPLAN_OPTION_BOOL,
     "eager attention: with dropout, the probabilities are dropped out too (a 1-byte mask and the dropped copy); "
     "false for models whose attention dropout is 0 beside a residual dropout (OPT)",
     "the value of dropout", nullptr},
    {"packed_linear_keeps_input", MEMPLAN_OPTION_BOOL,
     "eager layers: a linear layer whose weight is packed below one byte keeps its input for backward even when "
     "the weight is frozen (bitsandbytes' MatMul4Bit up to 0.43.1: ctx.tensors = (A, B); 0.43.2 keeps none: set "
     "false); the hf-transformers profile sets it",
     "false", nullptr},
    {"rms_norm_upcast", MEMPLAN_OPTION_BOOL,
     "eager layers: RMSNorm upcasts its input to fp32 and keeps it (4h + 4 bytes a token); false: it computes in the "
     "input's dtype and keeps the input and rsqrt (LitGPT's lit_gpt/rmsnorm.py @ 8641822)",
     "true", nullptr},
    {"autocast", MEMPLAN_OPTION_BOOL,
     "eager layers: the forward runs under torch.autocast in the activations' dtype over 16-bit weights (the "
     "Hugging Face Trainer and accelerate with bf16/fp16 on a model loaded in that dtype): adapters in a wider "
     "dtype compute in the activations' (PEFT's Linear4bit skips its cast; the Linear's lora_A keeps autocast's "
     "16-bit copy); the autocast precision recipe (fp32 weights) says it by itself",
     "false", nullptr},
    {"fused_swiglu", MEMPLAN_OPTION_BOOL,
     "eager layers: SwiGLU is one autograd function that keeps its inputs (the gate and up outputs) and recomputes "
     "silu in backward, so silu's output (p f a token) is not kept: Liger's LigerSiLUMulFunction "
     "(liger_kernel/ops/swiglu.py @ ead96b61, HF's use_liger_kernel)",
     "false", nullptr},
    {"defer_embedding_wgrad", MEMPLAN_OPTION_BOOL,
     "Megatron-Core's --defer-embedding-wgrad-compute: the output layer's backward keeps each micro-batch's logits "
     "gradient (and its forward each micro-batch's input) in buffers drained after the step's last micro-batch, for "
     "up to wgrad_deferral_limit micro-batches (tensor_parallel/layers.py, grad_output_buffer; "
     "pipeline_parallel/schedules.py, finish_embedding_wgrad_compute): item activations.deferred_wgrad on the stage "
     "with the output layer, in forward and backward",
     "false", nullptr},
    {"wgrad_deferral_limit", MEMPLAN_OPTION_INT,
     "with defer_embedding_wgrad: the micro-batches whose logits gradient is kept (Megatron-Core's "
     "--wgrad-deferral-limit; 0: every micro-batch of the step, Megatron's default)",
     "0", nullptr},
    {"moe_probs_in_expert", MEMPLAN_OPTION_BOOL,
     "fused layers with routed experts: the router's probabilities multiply each expert's activation output "
     "inside the expert and the unpermute sums the outputs unweighted (Megatron-Core from core_r0.13.0: "
     "moe/experts.py, activation_func(x) * permuted_probs), so a routed token keeps the expert's input, the MLP's "
     "saves and, for a two-projection MLP, the weighted product (p (h + mlp + f)); false: the unpermute weights the "
     "outputs and keeps each (p (2h + mlp)); sizes nothing in eager or legacy layers or without experts",
     "false; the megatron-lm and megatron-core profiles set true from core_r0.13.0", nullptr},
    {"fused_qkv", MEMPLAN_OPTION_BOOL,
     "eager layers written as LitGPT's CausalSelfAttention (lit_gpt/model.py @ 8641822): q, k, v are views of the "
     "fused qkv output and SDPA's saved v holds all of it (MHA), and o's input is a copy of SDPA's output at micro-batch 1",
     "false", nullptr},
    {"padding_mask", MEMPLAN_OPTION_BOOL,
     "eager layers: the batches are padded to their longest sample and carry an attention mask (dynamic padding), "
     "so attention runs with an explicit mask: SDPA's memory-efficient kernel, which reads K and V at every query "
     "head whatever repeat_kv says (transformers' use_gqa_in_sdpa: enable_gqa only without a mask), and with "
     "mask_bias_per_layer the bias in the activations' dtype it keeps per layer; false: every sample fills seq_len "
     "(fixed length, packing) and the mask is None. SDPA only: flash_attention_2 unpads the batch (leave it false). "
     "Compiled layers repeat K and V with it too; fused and legacy layers: nothing",
     "false", nullptr},
    {"mask_bias_per_layer", MEMPLAN_OPTION_BOOL,
     "eager layers on transformers >= 4.53's masking_utils. Eager attention (flash_attention = false): a float "
     "b x s x s mask in the activations' dtype per kind of layer, always. SDPA: where attention needs a mask "
     "(padding_mask; or, without padding, the model's windowed layers once seq_len reaches sliding_window) the "
     "model builds a b x s x s boolean mask per kind of layer, which every attention call converts into a "
     "b x s x s bias in the activations' dtype and keeps for backward (the hf-transformers profile sets it from "
     "4.53). flash_attention_2 takes no mask: set it false for those runs. Other layers than eager: nothing",
     "false", nullptr},
    {"use_cache", MEMPLAN_OPTION_BOOL,
     "eager layers of a decoder: the forward fills a KV cache (Hugging Face use_cache, on by default in decoder "
     "configs and off under gradient checkpointing) that the returned output holds: each layer's K and V at the kv "
     "heads stay alive while the output does (with output_held, into the next forward); no effect with recompute or "
     "latent attention. Encoders (BERT) have none, and the 5.17 Trainer, TRL >= 0.22 and fsdp_qlora turn it off: "
     "set false there. Other layers than eager: nothing (a compiled model's cache is not modelled)",
     "false", nullptr},
    {"buffer_dtype", MEMPLAN_OPTION_STRING,
     "the rotary tables' dtype: torch's default dtype when the model was built (fp32 unless from_pretrained or "
     "from_config got torch_dtype), or the dtype of a later model.to()",
     "the layers' norm weights' dtype", nullptr},
}};

struct LossMode {
  const char* name;
  CrossEntropy mode;
};
constexpr std::array<LossMode, 18> kLossModes{{
    {"unfused", CrossEntropy::unfused},
    {"vocab-parallel", CrossEntropy::vocab_parallel},
    {"vocab-parallel-copy", CrossEntropy::vocab_parallel_copy},
    {"vocab-parallel-fused", CrossEntropy::vocab_parallel_fused},
    {"upcast-shift-copy", CrossEntropy::upcast_shift_copy},
    {"shift-copy", CrossEntropy::shift_copy},
    {"upcast-in-loss-shift-copy", CrossEntropy::upcast_in_loss_shift_copy},
    {"upcast-in-loss", CrossEntropy::upcast_in_loss},
    {"upcast", CrossEntropy::upcast},
    {"chunked", CrossEntropy::chunked},
    {"compiled", CrossEntropy::compiled},
    {"loss-parallel", CrossEntropy::loss_parallel},
    {"upcast-compiled", CrossEntropy::upcast_compiled},
    {"chunked-compiled", CrossEntropy::chunked_compiled},
    {"cut", CrossEntropy::cut},
    {"chunked-fused", CrossEntropy::chunked_fused},
    {"chunked-fused-eager", CrossEntropy::chunked_fused_eager},
    {"in-place", CrossEntropy::in_place},
}};

class MegatronActivations {
 public:
  static constexpr memplan::sdk::PluginInfo info{
      "megatron", "1.36.0",
      "Transformer activations (Korthikanti et al. 2022, Table 2 per layer), embedding dropout, final norm and logits",
      memplan::sdk::Kind::activations, memplan::sdk::Phase::activations, memplan::sdk::Reads::batch_and_seq_len};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit MegatronActivations(memplan::sdk::Options& options)
      : flash_attention_(options.boolean("flash_attention").value_or(false)),
        dropout_(options.boolean("dropout").value_or(true)),
        attributes_(options),
        layout_(options),
        names_(options) {
    long_loss_ = loss_mode(options, "cross_entropy", "unfused");
    // A framework that takes another loss path for short micro-batches (Unsloth's CausalLM_fast_forward
    // from 2024.12.5 to 2025.10.7: bsz * q_len <= 1024 materializes the logits). Checked whether or not it
    // applies.
    const int64_t short_tokens = options.integer("short_batch_tokens").value_or(0);
    if (short_tokens < 0)
      options.fail("short_batch_tokens", "must be 0 (no short path) or a positive token count, got " +
                                             std::to_string(short_tokens));
    short_batch_tokens_ = static_cast<double>(short_tokens);
    short_loss_ = loss_mode(options, "short_batch_cross_entropy", "in-place");
    if (options.string("short_batch_cross_entropy") && !options.integer("short_batch_tokens"))
      options.fail("short_batch_cross_entropy", "needs short_batch_tokens, the micro-batch tokens up to which "
                                                "it applies; set it, or remove this option");
    cross_entropy_ = long_loss_;
    const auto chunks = [](CrossEntropy mode) {
      return mode == CrossEntropy::chunked || mode == CrossEntropy::chunked_compiled || fused_chunks(mode);
    };
    loss_chunks_ = static_cast<double>(options.positive_integer("loss_chunks", 8));
    if (options.integer("loss_chunks") && !chunks(long_loss_) && !(short_batch_tokens_ > 0 && chunks(short_loss_)))
      options.fail("loss_chunks",
                   "applies to cross_entropy = \"chunked\", \"chunked-compiled\", \"chunked-fused\" or "
                   "\"chunked-fused-eager\" only");
    read_fused_chunking(options);
    const std::string layer = options.string("layer").value_or("fused");
    if (layer != "fused" && layer != "eager" && layer != "compiled" && layer != "legacy")
      options.fail("layer", "must be \"fused\", \"eager\", \"compiled\" or \"legacy\", not \"" + layer + "\"");
    // torch.compile'd eager modules save what fused kernels save: Inductor
    // trains through AOTAutograd with min_cut_rematerialization_partition
    // (torch/_inductor/compile_fx.py), which recomputes the pointwise ops in
    // backward (the RMSNorm's fp32 upcast, pow, mean and rsqrt, SwiGLU's
    // silu and product, RoPE's rotations) and saves only the inputs of the
    // fused regions (torch/_functorch/partitioners.py @ c28ba8e5).
    layer_ = layer == "eager"    ? LayerImplementation::eager
             : layer == "legacy" ? LayerImplementation::legacy
                                 : LayerImplementation::fused;
    compiled_ = layer == "compiled";
    repeat_kv_ = options.boolean("repeat_kv").value_or(true);
    offload_ = options.boolean("offload").value_or(false);
    offload_backward_layers_ = static_cast<double>(options.positive_integer("offload_backward_layers", 2));
    if (const std::optional<std::string> scope =
            qualifier(options, "offload_scope", {"model", "layers"}, offload_))
      offload_model_ = *scope == "model";
    dequantized_buffer_ = options.boolean("dequantized_buffer").value_or(false);
    dequantized_copies_ = options.positive_integer("dequantized_copies", 1);
    const std::string dequantize = options.string("packed_dequantize").value_or("kernel");
    if (dequantize != "kernel" && dequantize != "torch-ops")
      options.fail("packed_dequantize", "must be \"kernel\" or \"torch-ops\", not \"" + dequantize + "\"");
    torch_ops_dequantize_ = dequantize == "torch-ops";
    if (torch_ops_dequantize_) {
      // Those options describe bitsandbytes' and Unsloth's kernels, which the torch-ops path replaces.
      const auto kernel_only = [&](const char* key) {
        options.fail(key, "describes a dequantizing kernel's temporaries; with packed_dequantize = \"torch-ops\" "
                          "the matmul saves the dequantized weight instead: remove one of the two");
      };
      if (dequantized_buffer_) kernel_only("dequantized_buffer");
      if (dequantized_copies_ != 1) kernel_only("dequantized_copies");
      if (options.model().has_architecture && (options.model().experts > 0 || options.model().kv_lora_rank > 0))
        options.fail("packed_dequantize", "\"torch-ops\" sizes dense layers with q, k, v and o projections; the "
                                          "model's experts or latent attention are not modelled: use \"kernel\"");
    }
    if (dequantized_copies_ > 2)
      options.fail("dequantized_copies", "must be 1 or 2 (the dequantized matrix, and its cast to the compute "
                                         "dtype), got " + std::to_string(dequantized_copies_));
    rope_cache_ = options.boolean("rope_cache").value_or(false);
    softmax_keeps_input_ = options.boolean("softmax_keeps_input").value_or(false);
    softmax_upcast_ = options.boolean("softmax_upcast").value_or(false);
    masked_scores_kept_ = options.boolean("masked_scores_kept").value_or(false);
    relu_mlp_ = options.boolean("relu_mlp").value_or(false);
    composite_gelu_new_ = options.boolean("composite_gelu_new").value_or(true);
    attention_dropout_ = options.boolean("attention_dropout").value_or(true);
    if (relu_mlp_ && options.model().has_architecture && options.model().gated_mlp != 0)
      options.fail("relu_mlp", "sizes a two-projection MLP's activation, but the model's MLP is gated (SwiGLU): "
                               "remove relu_mlp or give the model mlp = \"gelu\"");
    packed_linear_keeps_input_ = options.boolean("packed_linear_keeps_input").value_or(false);
    rms_norm_upcast_ = options.boolean("rms_norm_upcast").value_or(true);
    fused_qkv_ = options.boolean("fused_qkv").value_or(false);
    fused_swiglu_ = options.boolean("fused_swiglu").value_or(false);
    moe_probs_in_expert_ = options.boolean("moe_probs_in_expert").value_or(false);
    defer_embedding_wgrad_ = options.boolean("defer_embedding_wgrad").value_or(false);
    if (const auto limit = options.integer("wgrad_deferral_limit")) {
      if (*limit < 0 || *limit > 1'000'000)
        options.fail("wgrad_deferral_limit", "must be 0 (every micro-batch of the step) or a number of micro-batches, "
                                             "got " + std::to_string(*limit));
      if (!defer_embedding_wgrad_)
        options.fail("wgrad_deferral_limit", "limits the deferred output-layer gradients, but defer_embedding_wgrad "
                                             "is not set; set defer_embedding_wgrad = true or remove it");
      wgrad_deferral_limit_ = *limit;
    }
    autocast_ = options.boolean("autocast").value_or(false);
    if (fused_swiglu_ && options.model().has_architecture && options.model().gated_mlp == 0)
      options.fail("fused_swiglu", "sizes a gated MLP's SwiGLU, but the model's MLP has two projections; remove "
                                   "fused_swiglu");
    for (const char* key : {"fused_swiglu", "autocast"})
      if (options.boolean(key).value_or(false) && layer_ != LayerImplementation::eager)
        options.fail(key, "describes eager layers; it needs layer = \"eager\"");
    for (const char* key : {"fused_qkv", "masked_scores_kept", "relu_mlp", "attention_dropout"})
      if (options.boolean(key) && layer_ != LayerImplementation::eager)
        options.fail(key, "describes eager layers; it needs layer = \"eager\"");
    // rms_norm_upcast = false and repeat_kv = false say what fused layers do anyway (a norm in the input's
    // dtype, K and V at the kv heads): a profile that sets them for its eager layers (unsloth) still lets a
    // scenario choose layer = "fused". Compiled layers read repeat_kv (their K and V copies are saved). Legacy
    // layers upcast and repeat: there either value is refused (repeat_kv is checked below, after the legacy
    // layers' own checks).
    const auto eager_only = [&](const char* key) {
      const std::optional<bool> value = options.boolean(key);
      if (value && ((*value && layer_ != LayerImplementation::eager) || layer_ == LayerImplementation::legacy))
        options.fail(key, "describes eager layers; it needs layer = \"eager\"");
    };
    eager_only("rms_norm_upcast");
    // OPT's options act only where they have something to size: explicit attention scores, a dropout to skip.
    if (masked_scores_kept_ && flash_attention_)
      options.fail("masked_scores_kept", "sizes the explicit attention scores the clamp keeps, but flash_attention = "
                                         "true keeps none; remove masked_scores_kept or set flash_attention = false");
    if (options.boolean("attention_dropout").value_or(false) && !dropout_)
      options.fail("attention_dropout", "drops out the attention probabilities, but dropout = false: set dropout = "
                                        "true, or remove attention_dropout");
    padding_mask_ = options.boolean("padding_mask").value_or(false);
    mask_bias_per_layer_ = options.boolean("mask_bias_per_layer").value_or(false);
    use_cache_ = options.boolean("use_cache").value_or(false);
    cache_under_recompute_ = options.boolean("cache_under_recompute").value_or(false);
    if (cache_under_recompute_ && !use_cache_)
      options.fail("cache_under_recompute", "keeps the KV cache on under recomputation, but use_cache is off; set "
                                            "use_cache = true (the model's config default) or remove it");
    // padding_mask, mask_bias_per_layer and use_cache describe what Hugging Face's modules build around their
    // layers; the hf-transformers profile sets them, and a scenario under it may choose compiled (torch.compile)
    // or fused layers: there they size nothing (the masks' biases and the cache are counted for eager layers
    // only; a compiled model's cache is not modelled), as before, but are not refused.
    causal_mask_buffer_ = options.boolean("causal_mask_buffer").value_or(false);
    layer_causal_mask_ = options.boolean("layer_causal_mask").value_or(false);
    output_held_ = options.boolean("output_held").value_or(false);
    returned_logits_fp32_copy_ = options.boolean("returned_logits_fp32_copy").value_or(false);
    // The loop's metrics over the returned logits after the loss (ActivationSettings): counts, each 0 or more.
    for (auto [key, target] : {std::pair{"returned_logits_shifted_copies", &returned_logits_shifted_copies_},
                               std::pair{"returned_logits_chunk_copies", &returned_logits_chunk_copies_},
                               std::pair{"returned_logits_chunk_rows", &returned_logits_chunk_rows_}}) {
      const int64_t value = options.integer(key).value_or(0);
      if (value < 0)
        options.fail(key, std::string("must be 0 or a positive count, got ") + std::to_string(value));
      *target = static_cast<double>(std::max<int64_t>(value, 0));
    }
    const bool until_step_end =
        qualifier(options, "output_held_until", {"next-forward", "step-end"}, output_held_) == "step-end";
    held_ = !output_held_     ? memplan::plugins::HeldOutput::dropped
            : until_step_end ? memplan::plugins::HeldOutput::through_step
                             : memplan::plugins::HeldOutput::next_forward;
    // A loss that returns no logits (Megatron-LM's vocabulary-parallel loss inside the model, Cut
    // Cross-Entropy) leaves a held output nothing of the logits' size (returned_logit_bytes: 0); the loop still
    // holds the loss's graph (held_packed_inputs). Not an error: the fsdp-qlora profile holds the output and a
    // scenario under it may choose such a loss.
    if (const std::optional<std::string> dtype = options.string("buffer_dtype")) {
      const std::optional<double> bytes = memplan::sdk::dtype_bytes(*dtype);
      if (!bytes)
        options.fail("buffer_dtype", "is \"" + *dtype + "\", not a known dtype; use " + memplan::sdk::dtype_names());
      buffer_bytes_ = *bytes;
    }
    if (layer_ == LayerImplementation::legacy) {
      if (options.model().kv_lora_rank > 0)
        options.fail("layer", "is \"legacy\", but the model has multi-head latent attention (kv_lora_rank), which "
                              "only Megatron-Core writes; use layer = \"fused\"");
      if (options.model().experts > 0)
        options.fail("layer", "is \"legacy\", but the model has experts: memplan models Megatron-LM's legacy layers "
                              "for dense models only (its SwitchMLP routes top-1 with sinkhorn); use layer = \"fused\"");
      if (offload_)
        options.fail("offload", "is torchtune's activation offloading, which Megatron-LM's legacy layers do not have");
    }
    // Compiled layers repeat K and V where the model's code does (torchtune's expand and reshape, torchtitan's
    // repeat_kv): the copies feed attention, whose backward reads them, so the partitioner saves them.
    if (const std::optional<bool> repeat = options.boolean("repeat_kv");
        repeat && ((*repeat && layer_ != LayerImplementation::eager && !compiled_) ||
                   layer_ == LayerImplementation::legacy))
      options.fail("repeat_kv", "describes eager and compiled layers; it needs layer = \"eager\" or \"compiled\"");
    if (!options.model().has_architecture)
      options.fail("needs the model's architecture (layers, hidden, heads) but the scenario gives only params; use "
                   "a preset or an inline architecture in [model], or [activations] use = \"none\"");
    if (!options.training())
      options.fail("models training (activations kept for backward) but the scenario has mode = \"infer\"");
    if (options.workload().seq_len <= 0)
      options.fail("needs the sequence length: set [batch] seq_len");
    model_ = options.model();
    model_shape_ = layer_shape(model_);
    if (model_.experts > 0 && model_.dense_layers > 0) dense_shape_ = dense_layer_shape(model_shape_, model_);
  }

  void apply(memplan::sdk::Context& ctx) {
    const memplan_model& model = model_;
    const memplan_workload& workload = ctx.workload();
    TransformerShape shape = model_shape_;
    shape.seq = static_cast<double>(workload.seq_len);
    shape.batch = static_cast<double>(workload.micro_batch);
    const Attributes& a = attributes_;
    const memplan::support::Layout layout = layout_.read(ctx);
    // The loss path of this micro-batch's size (short_batch_tokens): the tokens one forward of this rank sees
    // (context parallelism splits them; sequence parallelism gathers them before the head). The members below
    // read cross_entropy_.
    cross_entropy_ = short_batch_tokens_ > 0 &&
                             shape.batch * shape.seq / static_cast<double>(layout.context) <= short_batch_tokens_
                         ? short_loss_
                         : long_loss_;
    ActivationSettings settings;
    settings.bytes = activation_bytes(ctx);
    settings.dropout = dropout_;
    settings.flash_attention = flash_attention_;
    settings.tensor_parallel = static_cast<double>(layout.tensor);
    settings.expert_tensor_parallel = static_cast<double>(layout.expert_tensor);
    settings.sequence_parallel = layout.sequence_parallel;
    const std::string_view policy = ctx.attr_string(a.recompute_policy, "none");
    settings.recompute = policy == "full"        ? RecomputePolicy::full
                         : policy == "selective" ? RecomputePolicy::selective
                         : policy == "op"        ? RecomputePolicy::per_op
                                                 : RecomputePolicy::none;
    settings.reentrant = ctx.attr_int(a.recompute_reentrant, 0) != 0;
    settings.logit_softcap = model.final_logit_softcapping > 0;
    settings.layer = layer_;
    settings.compiled = compiled_;
    settings.moe_probs_in_expert = moe_probs_in_expert_;
    // Compiled layers: the final norm outside them stays eager and reads the norm kind
    // (transformer_activations.hpp output_activations); the layers themselves are counted as fused.
    if (compiled_ || layer_ == LayerImplementation::legacy) settings.eager.rms_norm = model.layer_norm == 0;
    // DoRA (the lora strategy's dora: lora.dora_outputs) is counted in eager layers, PEFT's and torchtune's modules,
    // and in compiled ones, the same modules under torch.compile (transformer_activations.hpp, dora_saves); refused
    // where memplan counts Megatron's own layers, and under tensor parallelism, which PEFT's DoRA does not run with.
    if (ctx.attr_double(a.lora_dora_outputs, 0) > 0) {
      if (layer_ != LayerImplementation::eager && !compiled_)
        ctx.fail(std::string("layer = \"") + (layer_ == LayerImplementation::legacy ? "legacy" : "fused") +
                 "\" counts Megatron's own layers, in which memplan does not model DoRA adapters (Megatron-Bridge's "
                 "DoRA, src/megatron/bridge/peft/dora_layers.py, is not modelled), but the lora strategy has dora = "
                 "true, PEFT's or torchtune's DoRA: use layer = \"eager\" (or \"compiled\" under torch.compile), or "
                 "drop dora");
      if (layout.tensor > 1)
        ctx.fail("the lora strategy's dora is PEFT's DoRA, which does not run under tensor parallelism (its "
                 "LoraParallelLinear raises with use_dora: peft src/peft/tuners/lora/tp_layer.py @ d787f51b, lines "
                 "65-66), and memplan does not split DoRA's saves over the " + std::to_string(layout.tensor) +
                 " tensor-parallel ranks: drop dora or the tensor-parallel strategy");
    }
    if (layer_ == LayerImplementation::legacy) {
      // What Megatron-LM's legacy layers cannot run, or memplan does not model for them, is refused rather
      // than counted as fused: context parallelism and per-op checkpointing are Megatron-Core/torchtitan
      // features; ParallelAttention needs the query groups to divide over the tensor-parallel ranks.
      if (layout.context > 1)
        ctx.fail("layer = \"legacy\": Megatron-LM's legacy layers have no context parallelism (Megatron-Core's "
                 "TransformerLayer has); use layer = \"fused\"");
      if (settings.recompute == RecomputePolicy::per_op)
        ctx.fail("layer = \"legacy\": per-op activation checkpointing (recompute policy \"op\") is torchtitan's; "
                 "Megatron-LM's legacy layers recompute \"full\" or \"selective\"");
      const int64_t groups = model.kv_heads > 0 ? model.kv_heads : model.heads;
      if (groups % layout.tensor != 0)
        ctx.fail("layer = \"legacy\": Megatron-LM's legacy ParallelAttention needs the " + std::to_string(groups) +
                 " query groups to divide over the " + std::to_string(layout.tensor) +
                 " tensor-parallel ranks (it raises NotImplementedError otherwise)");
    }
    // Read before the items below are added (they are activations, not weights).
    const PlanFacts facts = scan_plan(ctx);
    if (compiled_) {
      // Compiled layers are counted as fused, less the inputs of frozen projections, which the backward graph
      // AOTAutograd partitions never reads (layer_activation_terms): which weights train, and the adapters' reads.
      const memplan::plugins::EagerLayer read = eager_layer(ctx, model, facts);
      settings.eager.attention_trainable = read.attention_trainable;
      settings.eager.mlp_trainable = read.mlp_trainable;
      settings.eager.down_trainable = read.down_trainable;
      settings.eager.adapter_rank = read.adapter_rank;
      settings.eager.adapter_bytes = read.adapter_bytes;
      settings.eager.adapter_inputs = read.adapter_inputs;
      settings.eager.adapter_dropout = read.adapter_dropout;
      settings.eager.adapter_mlp = read.adapter_mlp;
      settings.eager.packed_inputs_kept = read.packed_inputs_kept;
      settings.eager.packed_base = read.packed_base;
      settings.eager.kernel_qkv = read.kernel_qkv;
      settings.eager.kernel_mlp = read.kernel_mlp;
      settings.eager.adapter_qkv = read.adapter_qkv;
      settings.eager.dora_outputs = read.dora_outputs;
      settings.eager.dora_weights = read.dora_weights;
      // The same Python code runs compiled: the eager layer's rule (repeats_kv).
      settings.eager.repeat_kv = repeats_kv() && model.kv_heads > 0 && model.kv_heads < model.heads;
    }
    // Fused layers keep the per-head q/k norms' inputs (layer_activation_terms); compiled ones are left to the
    // partitioner's choice, not modelled.
    if (layer_ == LayerImplementation::fused && !compiled_) {
      settings.eager.qk_norm = facts.qk_norm;
      settings.eager.rms_norm = model.layer_norm == 0;  // which norm the q/k norms are (the model's)
    }
    // Megatron's own layers with the unfused fp32 softmax (layer_activation_terms, 1.35.0).
    if (layer_ != LayerImplementation::eager && !compiled_) settings.eager.softmax_upcast = softmax_upcast_;
    if (layer_ == LayerImplementation::eager) {
      settings.eager = eager_layer(ctx, model, facts);
      settings.eager.kv_in_cache =
          kv_cache_counted(settings) && output_held_ && settings.recompute == RecomputePolicy::none;
      // Autocast over fp32 weights: the residual stream's dtype (0 without).
      settings.residual_bytes = ctx.attr_double(a.residual_dtype, 0);
      // fp32 norms over 4-bit MLP linears make down's output, and the residual stream after it, fp32: as under
      // autocast over fp32 weights, each projection then computes on its own 16-bit cast of an fp32 input.
      if (settings.eager.packed_outputs_fp32) settings.residual_bytes = std::max(settings.residual_bytes, 4.0);
    }
    settings.linear_input_bytes = ctx.attr_double(a.linear_input_dtype, 0);
    settings.returned_logits_fp32_copy = returned_logits_fp32_copy_;
    settings.returned_logits_shifted_copies = returned_logits_shifted_copies_;
    settings.returned_logits_chunk_copies = returned_logits_chunk_copies_;
    settings.returned_logits_chunk_rows = returned_logits_chunk_rows_;

    const uint32_t stage_layers = static_cast<uint32_t>(layout.stage_layers);
    const int64_t inflight = layout.inflight_microbatches;
    // Context parallelism splits every layer's sequence over ranks.context ranks; an
    // interleaved pipeline schedule scales the stage's stored activations by
    // layout.activation_factor (Korthikanti et al. 2022, section 4.2.3).
    const double context = static_cast<double>(layout.context);
    const double factor = ctx.attr_double(a.activation_factor, 1.0);

    // A MoE model's dense first layers (dense_layers) store a dense MLP's
    // activations, the others the routed and shared experts'. The stage holds
    // the contiguous layers [first_layer, first_layer + stage_layers) that
    // pipeline-parallel keeps (an interleaved schedule's model chunks are
    // counted as that one range: docs/formulas.md, section 6, "megatron:
    // multi-head latent attention, dense first layers and shared experts").
    TransformerShape dense = dense_shape_ ? *dense_shape_ : shape;
    dense.seq = shape.seq;
    dense.batch = shape.batch;
    const int64_t dense_layers =
        dense_shape_ ? std::clamp<int64_t>(model.dense_layers - facts.first_layer, 0, stage_layers) : 0;
    const int64_t routed_layers = static_cast<int64_t>(stage_layers) - dense_layers;

    // Bytes per layer for all in-flight micro-batches, as bytes (1 per element).
    const double stored_bytes =
        memplan::plugins::stored_bytes_per_layer(shape, settings) * static_cast<double>(inflight) * factor / context;
    const double dense_bytes = dense_layers > 0 ? memplan::plugins::stored_bytes_per_layer(dense, settings) *
                                                      static_cast<double>(inflight) * factor / context
                                                : 0;
    // packed_dequantize = "torch-ops" (torch_ops_dequantize.hpp): the matmuls save each layer's fp16 weights. A
    // layer that is not recomputed keeps them from its forward to its backward, per micro-batch in flight and
    // scaled like the other saves by an interleaved schedule, not split by context parallelism (every rank
    // multiplies the whole matrices); offloading moves them with the other saves. Dense layers only (experts
    // are refused with the option).
    const bool layer_recomputed =
        settings.recompute == RecomputePolicy::full || settings.recompute == RecomputePolicy::per_op;
    const memplan::plugins::TorchOpsDequantize dequantized =
        torch_ops_dequantize_
            ? memplan::plugins::torch_ops_dequantize(
                  shape, {facts.packed_attention_in, facts.packed_attention_out, facts.packed_mlp},
                  settings.tensor_parallel)
            : memplan::plugins::TorchOpsDequantize{};
    const double dequantized_stored =
        layer_recomputed ? 0.0 : dequantized.saved_per_layer * static_cast<double>(inflight) * factor;
    memplan::sdk::Device stored_device = memplan::sdk::Device::gpu;
    if (offload_) {
      // torchtune training/_activation_offloading.py (OffloadActivations): each
      // saved tensor is copied to pinned host memory on a side stream as forward
      // goes, and in backward the next layer's tensors are brought back while
      // the current one runs: the GPU holds the layer in flight and the one
      // being copied, in forward and in backward (with dense and MoE layers,
      // the largest two neighbours).
      double window = (stored_bytes + dequantized_stored) * std::min<double>(2, static_cast<double>(stage_layers));
      if (dense_layers > 0) {
        window = dense_bytes * std::min<double>(2, static_cast<double>(dense_layers));
        if (routed_layers > 0)
          window = std::max({window, dense_bytes + stored_bytes,
                             stored_bytes * std::min<double>(2, static_cast<double>(routed_layers))});
      }
      // Only while the layers' forward runs: the head's output is left on the GPU (NoOpManager), and the
      // window is the layers' (lifetime forward_in_layers).
      add_bytes(ctx, names_.offload_window, window, memplan::sdk::Lifetime::forward_in_layers);
      // Backward holds offload_backward_layers layers' worth: two where the next layer comes back while one runs
      // (torchtune) or a reload buffer stands beside the last layer's input (Unsloth from 2025.3.2); one where
      // each layer's input comes back when its backward starts and goes on return (Unsloth before 2025.3.2:
      // Unsloth_Offloaded_Gradient_Checkpointer.backward), the largest of the stage's kinds of layer.
      const double largest = std::max(dense_layers > 0 ? dense_bytes : 0.0,
                                      routed_layers > 0 ? stored_bytes + dequantized_stored : 0.0);
      const double layers = static_cast<double>(stage_layers);
      const double backward_window =
          offload_backward_layers_ < 2
              ? largest
              : window + largest * (std::min(offload_backward_layers_, layers) - std::min(2.0, layers));
      add_bytes(ctx, names_.offload_window, backward_window, memplan::sdk::Lifetime::transient_backward);
      stored_device = memplan::sdk::Device::cpu;
    }
    if (dense_layers == 0) {
      memplan::support::add_bytes(ctx, {.name = names_.stored,
                                        .role = memplan::sdk::Role::activations,
                                        .lifetime = memplan::sdk::Lifetime::activation,
                                        .device = stored_device,
                                        .layer = facts.first_layer,
                                        .count = stage_layers,
                                        .bytes = stored_bytes});
    } else {
      memplan::support::add_bytes(ctx, {.name = names_.stored,
                                        .role = memplan::sdk::Role::activations,
                                        .lifetime = memplan::sdk::Lifetime::activation,
                                        .device = stored_device,
                                        .layer = facts.first_layer,
                                        .count = static_cast<uint32_t>(dense_layers),
                                        .bytes = dense_bytes});
      if (routed_layers > 0)
        memplan::support::add_bytes(ctx, {.name = names_.stored,
                                          .role = memplan::sdk::Role::activations,
                                          .lifetime = memplan::sdk::Lifetime::activation,
                                          .device = stored_device,
                                          .layer = facts.first_layer + static_cast<int32_t>(dense_layers),
                                          .count = static_cast<uint32_t>(routed_layers),
                                          .bytes = stored_bytes});
    }

    add_module_buffers(ctx, facts, stage_layers, layout.stage_has_embedding,
                       shape.batch * settings.bytes * static_cast<double>(inflight));
    if (layer_ == LayerImplementation::legacy && stage_layers > 0) add_global_memory_buffer(ctx, shape, settings);

    // The KV cache the forward fills (use_cache; transformers' DynamicCache, cache_utils.py
    // DynamicLayer.update, in training too unless gradient checkpointing turned it off): every layer's K
    // and V at the kv heads, for the micro-batch whose output is returned. The returned output holds it:
    //   with output_held, into the next forward: the held step's cache in every phase (persistent), and
    //   this forward's beside it until the assignment frees the old one (transient_forward); K and V are
    //   then the cache's, not the layers' (EagerLayer::kv_in_cache); a loop that drops the output after the
    //   step (output_held_until = "step-end") holds it in backward and the optimizer step (add_held);
    //   otherwise until the loop drops the output after the loss (the Trainer's compute_loss returns the
    //   loss only): at the forward's end, beyond what attention saves only where attention saved repeated
    //   copies instead (repeat_kv; and the windowed layers that get a mask, which repeat theirs).
    const SdpaMasks masks = sdpa_masks_of(facts.first_layer, stage_layers, workload.seq_len);
    const bool grouped_query = model.kv_heads > 0 && model.kv_heads < model.heads;  // K and V fewer than the queries
    if (kv_cache_counted(settings) && stage_layers > 0) {
      const double cache = static_cast<double>(stage_layers) * 2 * settings.bytes * shape.batch * shape.seq *
                           shape.kv_width / memplan::plugins::kv_divisor(shape, settings) / context;
      if (output_held_) add_held(ctx, names_.kv_cache, cache, false);
      const double repeated_layers =
          settings.eager.repeat_kv ? static_cast<double>(stage_layers)
          : grouped_query ? static_cast<double>(masks.windowed_biased)
                          : 0.0;
      // A recomputed layer saves no K or V: the cache's are all beside the saves.
      const double beside = output_held_ || settings.recompute != RecomputePolicy::none
                                ? cache
                                : cache * repeated_layers / static_cast<double>(stage_layers);
      add_outside(ctx, names_.kv_cache, beside, memplan::sdk::Lifetime::transient_forward);
    }

    // SDPA's masks (sdpa_masks_of): the boolean masks, kept by the checkpointed layers' arguments through
    // backward when layers are recomputed, else freed when the forward returns (measured: the padded
    // H100 snapshot frees its mask after the last layer's forward; the OLMo 3 one, recomputed, holds it at
    // the loss's backward).
    // One micro-batch's mask per kind (read again by the loss path's replay, backward_workspace).
    const double mask_bytes = shape.batch * shape.seq * shape.seq * (masks.eager ? settings.bytes : 1);
    const bool recomputed =
        settings.recompute == RecomputePolicy::full || settings.recompute == RecomputePolicy::per_op;
    add_outside(ctx, names_.sdpa_masks, masks.kinds * mask_bytes * static_cast<double>(inflight) / context,
                recomputed ? memplan::sdk::Lifetime::activation : memplan::sdk::Lifetime::forward_in_layers);
    // A windowed layer that gets a mask keeps more than the stage's other layers: SDPA's bias
    // (EagerLayer::attention_bias) and, the mask ruling out enable_gqa (transformers' use_gqa_in_sdpa), K and V
    // repeated to every query head. Measured (snapshot-gemma3-12b-lora-r16-all-bs1-s2048, 40 windowed layers of
    // 48): each windowed layer's repeat_kv copies, 2 x 8,192 bytes a token, and its 4,096-byte bias.
    ActivationSettings windowed = settings;
    windowed.eager.attention_bias = true;
    windowed.eager.repeat_kv = grouped_query;
    if (masks.windowed_biased > 0 && !recomputed) {
      const double extra = (memplan::plugins::stored_bytes_per_layer(shape, windowed) -
                            memplan::plugins::stored_bytes_per_layer(shape, settings)) *
                           static_cast<double>(inflight) * factor / context;
      if (extra > 0)
        memplan::support::add_bytes(ctx, {.name = names_.windowed_attention,
                                          .role = memplan::sdk::Role::activations,
                                          .lifetime = memplan::sdk::Lifetime::activation,
                                          .device = stored_device,
                                          .count = static_cast<uint32_t>(masks.windowed_biased),
                                          .bytes = extra});
    }

    // One layer is recomputed at a time: the largest of the stage's kinds (a windowed layer with its mask).
    double working_set = memplan::plugins::recompute_working_set(shape, settings) / context;
    if (masks.windowed_biased > 0)
      working_set = std::max(working_set, memplan::plugins::recompute_working_set(shape, windowed) / context);
    if (dense_layers > 0) {
      double dense_set = memplan::plugins::recompute_working_set(dense, settings) / context;
      if (masks.windowed_biased > 0)
        dense_set = std::max(dense_set, memplan::plugins::recompute_working_set(dense, windowed) / context);
      working_set = routed_layers > 0 ? std::max(working_set, dense_set) : dense_set;
    }
    // On the GPU, with offload too: the layer is recomputed where it runs, and torchtune offloads in forward
    // only (full_finetune_single_device.py @ 1814feb17: backward runs outside activations_handling_ctx).
    if (working_set > 0) add_bytes(ctx, names_.recompute, working_set, memplan::sdk::Lifetime::transient_backward);
    // Eager attention without flash: the softmax's fp32 tensors while one layer's forward runs and, where the layer
    // is not recomputed (the recomputation's working set counts it otherwise), while its backward runs
    // (transformer_activations.hpp, eager_attention_transients).
    if (stage_layers > 0) {
      const memplan::plugins::AttentionTransients attention =
          memplan::plugins::eager_attention_transients(shape, settings);
      add_outside(ctx, names_.attention_forward, attention.forward / context,
                  memplan::sdk::Lifetime::forward_in_layers);
      if (working_set <= 0)
        add_outside(ctx, names_.attention_backward, attention.backward / context,
                    memplan::sdk::Lifetime::backward_in_layers);
    }
    // DoRA's weight norm (transformer_activations.hpp, dora_weight_norm_bytes): the largest adapted matrix's
    // transients while a layer's forward runs, and while backward recomputes a layer; detached, so a layer's
    // backward computes nothing of it otherwise.
    if (stage_layers > 0 && settings.eager.dora_outputs > 0) {
      const double norm = memplan::plugins::dora_weight_norm_bytes(
          settings, ctx.attr_double(a.lora_dora_widest_input, 0), ctx.attr_double(a.lora_dora_largest_matrix, 0));
      add_outside(ctx, names_.dora_weight_norm, norm, memplan::sdk::Lifetime::forward_in_layers);
      if (recomputed) add_outside(ctx, names_.dora_weight_norm, norm, memplan::sdk::Lifetime::backward_in_layers);
    }
    if (settings.recompute == RecomputePolicy::full) retime_cached_casts(ctx);

    // Context parallelism's ring attention with torch's "allgather" rotate
    // method (context-parallel runtime = "torch"; torch 2.6
    // torch/distributed/tensor/experimental/_attention.py). With u the
    // elements of one of K and V as SDPA reads them on the rank (its s/cp
    // tokens x the query heads' width / t: torchtitan repeats the kv heads
    // before SDPA, models/llama/model.py repeat_kv; the kv heads' width for
    // eager layers with repeat_kv = false):
    //   forward (and backward's recomputation): _AllGatherRotater's buffer of
    //   every rank's K and V, 2 cp u p, and _SDPAMerger's fp32 output with the
    //   step's output cast to fp32, 8u;
    //   backward: the buffer again, 2 cp u p; the fp32 accumulators of dQ, dK
    //   and dV, 4u_q + 8u; the dK/dV exchange in flight (_AllToAllRotater, the
    //   fp32 concatenation sent and the one received), 16u (u at K/V's width,
    //   u_q at the queries'; the same under repeat_kv).
    // Each belongs to one layer at a time: in forward only while the layers
    // run (lifetime forward_in_layers, never beside the loss's forward at the
    // end); in backward the loss's transients come first, so the larger counts.
    double ring_forward = 0;
    double ring_backward = 0;
    if (layout.context > 1 && ctx.attr_int(a.context_kv_allgather, 0) != 0) {
      // K and V (and their gradients) at the width SDPA gets them; the output
      // and dQ at the queries' width (they differ under GQA without repeat_kv).
      const bool kv_heads = layer_ == LayerImplementation::eager && !repeat_kv_;
      const double rows = shape.batch * shape.seq / context / settings.tensor_parallel;
      const double u_q = rows * shape.q_width;
      const double u_kv = rows * (kv_heads ? shape.kv_width : shape.q_width);
      const double gathered = 2 * context * u_kv * settings.bytes;
      ring_forward = gathered + 8 * u_q;
      ring_backward = gathered + 4 * u_q + 8 * u_kv + 16 * u_kv;
    }

    // Weights stored in fewer than 8 bits (QLoRA's nf4 base) are dequantized
    // to the compute dtype for each matrix multiply, in forward and again for
    // backward's input gradient (bitsandbytes autograd/_functions.py,
    // MatMul4Bit: dequantize_4bit before the matmul; the 16-bit weight is a
    // temporary, not saved): the largest such matrix at the forward's high
    // point, and in backward while a layer's backward runs. A quantized LM head
    // (vocabulary x h) runs at the forward's end and at the loss's backward.
    // With dequantized_buffer (Unsloth 2025.2.1 on: kernels/utils.py
    // matmul_lora calls fast_dequantize(..., use_global_buffer = True), a
    // WEIGHT_BUFFER that only grows and is never freed) the forward's copy is
    // that buffer, kept from the first forward on (persistent, not at set-up);
    // backward's fast_dequantize calls still make temporaries.
    const double head_matrix =
        facts.packed_head ? static_cast<double>(model.vocab) * static_cast<double>(model.hidden) /
                                settings.tensor_parallel
                          : 0;
    if (torch_ops_dequantize_) {
      if (!facts.packed_linear)
        ctx.fail("packed_dequantize = \"torch-ops\" sizes linear layers packed below one byte, and the plan has "
                 "none: give [precision] a 2-, 3- or 4-bit format (gptq, awq, nf4, int4), or remove the option");
      if (facts.packed_head)
        ctx.fail("packed_dequantize = \"torch-ops\" sizes the layers' packed projections; a packed LM head is not "
                 "modelled with it: keep the head unquantized or use \"kernel\"");
      // A recomputed layer (reentrant checkpointing runs the first forward under no_grad, where nothing is saved)
      // holds its weights while backward recomputes it, beside the next matrix's unpack; the forward holds the
      // largest unpack. A layer that is not recomputed stores them (dequantized_stored, above), and the forward's
      // moment adds only what the unpack holds beyond the layer's saves.
      add_outside(ctx, names_.dequantized_weight,
                  layer_recomputed ? dequantized.forward : dequantized.forward_beside_saves,
                  memplan::sdk::Lifetime::forward_in_layers);
      if (layer_recomputed)
        add_outside(ctx, names_.dequantized_weight, dequantized.recomputed,
                    memplan::sdk::Lifetime::backward_in_layers);
      else if (stage_layers > 0)
        memplan::support::add_bytes(ctx, {.name = names_.dequantized_weight,
                                          .role = memplan::sdk::Role::activations,
                                          .lifetime = memplan::sdk::Lifetime::activation,
                                          .device = stored_device,
                                          .layer = facts.first_layer,
                                          .count = stage_layers,
                                          .bytes = dequantized_stored});
    }
    const double layer_matrix = facts.packed_linear && !torch_ops_dequantize_
                                    ? largest_linear_matrix(model, settings.tensor_parallel)
                                    : 0.0;
    const double forward_layer_matrix = dequantized_buffer_ ? 0.0 : layer_matrix;  // the buffer holds it instead
    // With dequantized_copies = 2 (bitsandbytes 0.42 MatMul4Bit: dequantize_4bit(B, state).to(A.dtype), the
    // quant_state's dtype differing from the input's) each temporary is briefly held twice; a kept buffer once.
    const double copies = static_cast<double>(dequantized_copies_);
    add_outside(ctx, names_.dequantized_weight, (layer_matrix - forward_layer_matrix) * settings.bytes,
                memplan::sdk::Lifetime::persistent);
    // In forward a layer's matrix while the layers run, a quantized head's at the forward's end.
    add_outside(ctx, names_.dequantized_weight, copies * forward_layer_matrix * settings.bytes,
                memplan::sdk::Lifetime::forward_in_layers);
    add_outside(ctx, names_.dequantized_weight, copies * head_matrix * settings.bytes,
                memplan::sdk::Lifetime::forward_end);
    // In backward a layer's matrix is dequantized only while that layer's backward runs (its recomputation and
    // its input gradient): not at the loss's backward, where a 16-bit LM head runs, nor at the embedding's
    // (backward_in_layers). A quantized head's is dequantized at the loss's backward (backward_start).
    add_outside(ctx, names_.dequantized_weight, copies * layer_matrix * settings.bytes,
                memplan::sdk::Lifetime::backward_in_layers);
    add_outside(ctx, names_.dequantized_weight, copies * head_matrix * settings.bytes,
                memplan::sdk::Lifetime::backward_start);
    // bitsandbytes' MatMul4Bit keeps its input as a plain attribute of its ctx (ctx.tensors = (A, B),
    // autograd/_functions.py @ 0.42.0 to 0.43.1; 0.43.2 keeps (None, B), pull request #1270), which autograd's
    // release_variables() does not free when the node has run (torch/csrc/autograd/engine.cpp frees saved
    // variables only). A loop that keeps its output (output_held) keeps the graph of the stage that computes
    // it, and with it every 4-bit matrix's input of that micro-batch, through the optimizer step and the next
    // micro-batch's forward, until that forward's output replaces the held one: per layer the attention's
    // input (h, shared by q, k and v) and o's (the query width) where the attention is 4-bit, the MLP's input
    // (h, shared by gate and up; the attention's own where one norm feeds both, layer_norms = 1) and down's
    // (the MLP width) where the MLP is, and a 4-bit head's input (h). Not under reentrant recomputation:
    // reentrant checkpointing runs the forward under no_grad, where MatMul4Bit stores nothing; non-reentrant
    // checkpointing runs it with autograd on, and the nodes keep their inputs as without recomputation. Dense layers only (a MoE layer's experts see a subset of the tokens), and not multi-head latent
    // attention (its down-projections' inputs are not the q/k/v input counted here). Over-counted: layer 0's
    // attention input when nothing before it trains (MatMul4Bit then stores nothing for it).
    const double sequence_split = settings.sequence_parallel ? settings.tensor_parallel : 1;
    // The first forward runs with autograd on: no recomputation, the non-reentrant checkpoint, and torch's selective
    // checkpointing (policy "op", non-reentrant by construction).
    const bool checkpoint_with_grad =
        (settings.recompute == RecomputePolicy::full && !settings.reentrant) || settings.recompute == RecomputePolicy::per_op;
    const bool first_forward_grad = settings.recompute == RecomputePolicy::none || checkpoint_with_grad;
    if (output_held_ && settings.eager.packed_inputs_kept && first_forward_grad && layout.stage_has_lm_head && shape.top_k == 0 && !shape.latent()) {
      const double per_layer = packed_inputs_per_layer(facts, model, shape, settings) / context;
      const double head_input =
          head_matrix > 0 ? shape.seq * shape.batch / context * settings.bytes * shape.hidden / sequence_split : 0;
      const double held = per_layer * static_cast<double>(stage_layers) + head_input;
      // Into the next forward only where the loop keeps its output until then; backward holds them anyway.
      if (held_ == memplan::plugins::HeldOutput::next_forward)
        add_outside(ctx, names_.held_packed_inputs, held, memplan::sdk::Lifetime::transient_forward);
      add_outside(ctx, names_.held_packed_inputs, held, memplan::sdk::Lifetime::transient_optimizer);
    }

    // Non-reentrant checkpointing runs the layer's first forward with autograd on and swaps the tensors nodes save
    // (save_for_backward) for recomputed ones (torch/utils/checkpoint.py, _checkpoint_hook's saved_tensors_hooks),
    // but MatMul4Bit's ctx.tensors = (A, B) (bitsandbytes autograd/_functions.py @ 0.42.0 to 0.43.1) is a plain
    // attribute the hooks never see: every 4-bit matrix's input stays with its node until the layer's backward
    // frees it, what packed_inputs_per_layer counts, per micro-batch in flight like the layers' own saves. The
    // fsdp_qlora README of 2024-03 asks for --reentrant_checkpointing True for this reason ("a bug in
    // bitsandbytes which results in high memory usage"). Reentrant checkpointing (no_grad first forward) keeps
    // none; dense layers only, as above. The node, and ctx.tensors with it, lives as long as the graph, to the end of
    // backward (autograd's release_variables frees saved variables only): counted with the layers' saves (lifetime
    // activation), the same at backward's start, where the layers' saves peak, and less than the run holds later in
    // backward. On the GPU: ctx.tensors bypasses the saved-tensor hooks an activation offload would use.
    if (checkpoint_with_grad && settings.eager.packed_inputs_kept && stage_layers > 0 && shape.top_k == 0 &&
        !shape.latent()) {
      const double per_layer =
          packed_inputs_per_layer(facts, model, shape, settings) * static_cast<double>(inflight) * factor / context;
      memplan::support::add_bytes(ctx, {.name = names_.checkpointed_packed_inputs,
                                        .role = memplan::sdk::Role::activations,
                                        .lifetime = memplan::sdk::Lifetime::activation,
                                        .device = memplan::sdk::Device::gpu,
                                        .layer = facts.first_layer,
                                        .count = stage_layers,
                                        .bytes = per_layer});
    }

    // Outside the layers (not recomputed under any policy), for the same
    // micro-batches in flight as the stage's layers. A single stage holds both
    // ends; pipeline-parallel says which end the reported stage holds.
    // The fused chunked loss sizes its chunks by the rows of one call (a micro-batch's tokens on this rank):
    // loss_chunks is those rows over the largest piece's.
    const double loss_rows = shape.seq * shape.batch / context;
    const double piece_rows =
        fused_chunks(cross_entropy_)
            ? memplan::plugins::fused_loss_piece_rows(fused_chunking_, loss_rows,
                                                      static_cast<double>(model.vocab) / settings.tensor_parallel,
                                                      static_cast<double>(workload.gpu_memory_bytes))
            : 0;
    const double loss_chunks = piece_rows > 0 ? loss_rows / piece_rows : loss_chunks_;
    const memplan::plugins::OutputActivations outside = memplan::plugins::output_activations(
        {shape.seq, shape.batch, shape.hidden, static_cast<double>(model.vocab)}, settings, cross_entropy_,
        loss_chunks, output_held_, facts.final_norm && !facts.final_norm_trainable,
        // Cut Cross-Entropy saves its input e for backward whether or not the head trains (cce.py
        // ctx.save_for_backward(e, c, ...)), the fused chunked loss a gradient buffer of its size: the head's
        // input is kept as a trained head's would be.
        // A tied head is the token embedding's weight (F.linear(h, embedding.weight)): frozen when it is.
        (facts.lm_head ? !facts.lm_head_trainable
                       : model.tied_embeddings != 0 && facts.embedding && facts.trained_embedding_bytes == 0) &&
            !memplan::plugins::keeps_head_input(cross_entropy_));
    const double scale = static_cast<double>(inflight) * factor / context;
    const LossSegmentsMemo* loss_path = nullptr;  // its replay, where the order is known (loss_requests.hpp)
    double freed_by_loss_backward = 0;  // the head's activations and the loss's backward excess (kept_layer_inputs)
    if (layout.stage_has_embedding)
      add_outside(ctx, names_.embedding_dropout, outside.embedding_dropout * scale);
    if (layout.stage_has_lm_head) {
      // The head sits in the last model chunk only: the interleaved schedule's
      // factor (extra chunks in flight) does not apply to it.
      const double head_scale = static_cast<double>(inflight) / context;
      if (facts.final_norm) {
        const double final_norm = outside.final_norm * head_scale;
        // torchtune's OffloadActivations packs every saved tensor of the model's forward of 1 KiB or more that
        // is not a parameter or buffer (training/_activation_offloading.py @ 1814feb17, pack_tensor), all but
        // the output head's (NoOpManager, get_act_offloading_ctx_manager): the final norm's saves wait on the
        // host until its backward, after the loss's (offload_scope = "model").
        // The output head's own saved input stays on the GPU (under the NoOpManager).
        const double on_host = offload_ && offload_model_ ? (outside.final_norm - outside.head_input) * head_scale : 0;
        if (on_host > 0)
          add_bytes(ctx, names_.final_norm, on_host, memplan::sdk::Lifetime::activation, memplan::sdk::Device::cpu);
        add_outside(ctx, names_.final_norm, final_norm - on_host);
        freed_by_loss_backward += std::max(0.0, final_norm - on_host);
      }
      // Logits need an output projection: an LM head, or the embedding reused
      // as one (tied). An encoder without a head (BERT's output_head = "none")
      // computes none.
      if (facts.lm_head || (model.tied_embeddings != 0 && facts.embedding)) {
        // The held output is the micro-batch's own logits kept into backward
        // where the model keeps them: counted once (the others in flight keep theirs).
        const double logits = outside.logits * head_scale - outside.held_overlap / context;
        const double cross_entropy = outside.cross_entropy * head_scale;
        // Autograd frees a node's saved tensors once the node has run (torch/csrc/autograd/engine.cpp,
        // Engine::evaluate_function: release_variables() unless retain_graph), and backward runs the loss
        // and the LM head before any layer's: the logits and the loss's saves of the micro-batch whose
        // backward runs are gone before its last layer's backward (and that layer's recomputation) begins,
        // where autograd holds their last reference: the loops drop theirs before backward (torchtune's
        // `del logits`, torchtitan's `del pred`, the Trainer's compute_loss returning the loss); a loop that
        // keeps its output (output_held) keeps its logits, which held_overlap leaves stored.
        // They are alive at the forward's end and at backward's start only: a forward transient, and part of
        // the loss's backward transient below (lifetime backward_start), not stored activations, which the
        // host's step rule keeps beside the recompute working set and, at backward's end, beside every
        // gradient. Those of other micro-batches in flight stay stored. Measured: torchtune's recomputed LoRA
        // runs (validation TT31-70b-lora-fsdp8, TT31-8b-qlora-4090) peak below the saves plus the working set.
        // One micro-batch's share of each (all of it when one is in flight).
        const double logits_released =
            std::max(0.0, std::min(logits, (outside.logits - outside.held_overlap) / context));
        const double ce_released = std::max(0.0, std::min(cross_entropy, outside.cross_entropy / context));
        add_vocab_sized(ctx, names_.logits, logits - logits_released);
        add_vocab_sized(ctx, names_.logits, logits_released, memplan::sdk::Lifetime::forward_end);
        freed_by_loss_backward += std::max(0.0, logits - logits_released);
        // The loop holds one output, whatever the micro-batches in flight: in every phase when it keeps it
        // into the next forward, in backward and the optimizer step when it drops it after the step.
        add_held(ctx, names_.held_output, outside.held_output / context, true);
        // Where the loss saves the returned logits themselves (held_overlap: the held output is this micro-batch's
        // kept logits), the held output of the step before is a second tensor until the loop rebinds its variable
        // after this forward returns (`outputs = model(...)`): both at the forward's end, as the KV cache's twin
        // above. Found on transformers' OPT SDPA training table (PR #33298's benchmark loop keeps `outputs`).
        if (held_ == memplan::plugins::HeldOutput::next_forward && outside.held_overlap > 0)
          add_vocab_sized(ctx, names_.held_output, outside.held_overlap / context, memplan::sdk::Lifetime::forward_end);
        add_vocab_sized(ctx, names_.cross_entropy, cross_entropy - ce_released);
        add_vocab_sized(ctx, names_.cross_entropy, ce_released, memplan::sdk::Lifetime::forward_end);
        // --defer-embedding-wgrad-compute (Megatron-Core tensor_parallel/layers.py @ d98e8a64: the output layer's
        // forward appends its input to embedding_activation_buffer, its backward appends grad_output, cast to the
        // input's dtype, to grad_output_buffer and skips the weight gradient, while fewer than wgrad_deferral_limit
        // are held, 0 meaning no limit; pipeline_parallel/schedules.py finish_embedding_wgrad_compute drains both
        // after the step's last micro-batch): k = min(limit, micro-batches) logits gradients of a micro-batch's
        // tokens x V / t in the activations' dtype at the last one's backward (and k - 1 in later forwards, taken
        // as k), and k - 1 head inputs beside the one the layer saves anyway. Measured: Megatron-LM's CI golden
        // gpt3_mcore_te_tp2_pp2_defer_embedding_wgrad_compute (limit 2): 0.39 GiB above its twin without it.
        if (defer_embedding_wgrad_ && ctx.training()) {
          const double micro_batches = static_cast<double>(std::max<int64_t>(1, workload.grad_accum));
          const double kept = wgrad_deferral_limit_ > 0
                                  ? std::min(static_cast<double>(wgrad_deferral_limit_), micro_batches)
                                  : micro_batches;
          const double gradients = kept * shape.seq * shape.batch / context * static_cast<double>(model.vocab) /
                                   settings.tensor_parallel * settings.bytes;
          const double inputs = (kept - 1) * outside.head_input / context;
          add_bytes(ctx, names_.deferred_wgrad, gradients + inputs, memplan::sdk::Lifetime::transient_forward);
          add_bytes(ctx, names_.deferred_wgrad, gradients + inputs, memplan::sdk::Lifetime::transient_backward);
        }
        // Multi-token prediction (Megatron-Core's MultiTokenPredictionBlock, megatron/core/transformer/
        // multi_token_prediction.py @ core_v0.13.0 lines 667-689): each depth runs the output layer and the
        // language-model loss inside the forward, before the main head's, and MTPLossAutoScaler saves that loss
        // (line 256, ctx.save_for_backward(mtp_loss)) on the main hidden states, so each depth's loss graph, its
        // saves per logit as the main loss's, stands until backward reaches it, right after the main head's: at
        // the forward's end and at the loss's moment in backward, gone before the layers' backward.
        if (facts.mtp_modules > 0) {
          const double depths = static_cast<double>(facts.mtp_modules);
          const double released = depths * (logits_released + ce_released);
          add_vocab_sized(ctx, names_.mtp_loss, depths * (logits + cross_entropy) - released);
          add_vocab_sized(ctx, names_.mtp_loss, released, memplan::sdk::Lifetime::forward_end);
          add_vocab_sized(ctx, names_.mtp_loss, released, memplan::sdk::Lifetime::backward_start);
        }
        // The soft-capping's tanh output (logit_softcap): saved from the head's forward to its backward, which
        // runs after the loss's: alive at the forward's end and at the loss's moment in backward. Measured
        // (snapshot-gemma2-9b-trainer-lora-r16-all-gcdefault-eager-bs1-s4096): 2,097,152,000 B from
        // modeling_gemma2.py's capping alive at the loss's backward, 4,096 x 256,000 x 2.
        // One micro-batch's (the one whose loss runs) is alive at those two moments, the others' in flight stay
        // stored, as the logits' above.
        const double softcap = outside.softcap * head_scale;
        const double softcap_released = std::min(softcap, outside.softcap / context);
        add_vocab_sized(ctx, names_.logit_softcap, softcap - softcap_released);
        add_vocab_sized(ctx, names_.logit_softcap, softcap_released, memplan::sdk::Lifetime::forward_end);
        add_vocab_sized(ctx, names_.logit_softcap, softcap_released, memplan::sdk::Lifetime::backward_start);
        freed_by_loss_backward += std::max(0.0, softcap);
        freed_by_loss_backward += std::max(0.0, cross_entropy - ce_released);
        const double saves_released = logits_released + ce_released;
        // The loss's transients belong to one micro-batch: the one whose loss is computed.
        add_vocab_sized(ctx, names_.loss_forward, outside.loss_forward / context, memplan::sdk::Lifetime::forward_end);
        if (fused_chunks(cross_entropy_)) {
          // UnslothFusedLoss.forward (unsloth-zoo cross_entropy_loss.py @ ce232d6c): beside the chunk, the head's
          // input (the caller's hidden_states, alive until the loss returns, beside the gradient buffer of its
          // size that output_activations counts as the head's input) and, where the head trains,
          // grad_lm_head = zeros_like(lm_head_weight), saved for backward, with one chunk's own head gradient
          // before grad_lm_head.add_() (the head's gradient as the plan holds it, twice).
          add_outside(ctx, names_.loss_forward, outside.head_input / context + 2 * facts.head_gradient,
                      memplan::sdk::Lifetime::forward_end);
          ctx.set_attr(attributes_.loss_chunks_report, static_cast<int64_t>(std::ceil(loss_rows / piece_rows)));
        }
        // Backward runs the loss first and frees its fp32 gradients and the
        // saves above before the first layer is recomputed: the loss's moment
        // and the recompute working set never coexist, so the item is what the
        // loss's moment adds beyond the working set (and a layer's ring
        // attention buffers). In the eager losses that compute on
        // whole logits, the loss's fp32 gradients are also freed before the LM
        // head's backward allocates its weight gradient, the first parameter
        // gradient of backward, which the host's step rule adds at backward's
        // start (plugin_abi.h memplan_step_high_points_n, the largest layer's
        // gradients): the head's backward holds only the 16-bit logits gradient
        // beside it. Without gradient accumulation (whose earlier micro-batches'
        // gradients are all alive) the item is then the larger of what the loss
        // adds beyond the head's gradient and that 16-bit gradient. Measured:
        // Llama-3.2-3B full fine-tuning's allocated peak is the loss's backward,
        // with no parameter gradient alive (validation/measured, snapshot of
        // llama-3.2-3b-full-bs4-s768).
        // The logits of the micro-batch whose loss is computed, on this rank.
        const double logit_elements =
            shape.batch * shape.seq * static_cast<double>(model.vocab) / settings.tensor_parallel / context;
        double loss_backward =
            std::max(0.0, outside.loss_backward / context + saves_released - working_set - ring_backward);
        if (ctx.workload().grad_accum <= 1 && loss_frees_before_head()) {
          const double head_input_gradient = settings.bytes * logit_elements;
          loss_backward = std::min(loss_backward,
                                   std::max(loss_backward - facts.head_gradient, head_input_gradient));
        }
        add_vocab_sized(ctx, names_.loss_backward, loss_backward, memplan::sdk::Lifetime::backward_start);
        freed_by_loss_backward += std::max(0.0, loss_backward);
        // The shifted copy and what derives from it are replayed at the
        // logits' size, not b (s - 1) V: at its real size the 2 MiB rounding
        // decides whether its blocks split and whether the whole-size slice
        // gradient then finds a block, which the smaller requests that settle
        // in the split-off remainders also decide (the layers' requests are not
        // replayed). Measured: fms-acceleration's two 1-GPU device rows of
        // this path (transformers 4.39) read +5.5 and -1.7 % this way, +15.3
        // and +4.9 % at the real size (loss_requests.hpp).
        loss_path = replayed_loss_path(settings.bytes, logit_elements,
                                       backward_workspace(ctx, shape, settings, facts, layout,
                                                          masks.kinds > 0 ? mask_bytes : 0));
      }
    }
    // What the loss path's logits-sized segments settle at, where the order of
    // its requests is known (loss_requests.hpp), for the allocator's model
    // (attributes start unset each evaluation: absent elsewhere).
    if (loss_path && loss_path->segments > 0) ctx.set_attr(attributes_.loss_segments, loss_path->segments);
    // What the path maps at a first step and at a step longer than all before,
    // for an allocator model of runs whose lengths vary (loss_requests.hpp
    // loss_path_growth; support/varying_lengths.hpp); logits too small for the
    // replay publish no growth (0 segments).
    if (loss_path && loss_path->growth.known) {
      ctx.set_attr(attributes_.loss_first_step, loss_path->growth.first);
      ctx.set_attr(attributes_.loss_longer_step, loss_path->growth.longer);
      ctx.set_attr(attributes_.loss_longer_segments, static_cast<double>(loss_path->growth.segments));
    }
    // A tied embedding is one leaf used twice in one graph where the stage holds both ends, with one
    // AccumulateGrad node: the LM head's gradient (backward's start) waits in that node's input buffer, and at
    // backward's end the embedding's backward (embedding_dense_backward: a whole vocabulary x hidden
    // gradient, in the dtype autograd computed the weight in: a sharding strategy's gathered dtype, else the
    // weight's own) arrives beside it and is added to it (torch/csrc/autograd/input_buffer.cpp,
    // InputBuffer::accumulate: in place into the waiting one when it can, else into a third tensor) before
    // the node runs and hooks see one gradient: one more weight-sized gradient beside all the others at that
    // moment (vocabulary-parallel: the rank's rows). Megatron-LM's main_grad hook too runs on the summed one.
    if (layout.stage_has_embedding && layout.stage_has_lm_head && model.tied_embeddings != 0 &&
        facts.trained_embedding_bytes > 0) {
      const double gathered = ctx.attr_double(attributes_.gathered_weight_bytes, 0);
      memplan::support::add_bytes(ctx, {.name = names_.tied_gradient,
                                        .role = memplan::sdk::Role::gradients,
                                        .lifetime = memplan::sdk::Lifetime::backward_end,
                                        .bytes = static_cast<double>(model.vocab) * static_cast<double>(model.hidden) /
                                                 settings.tensor_parallel *
                                                 (gathered > 0 ? gathered : facts.trained_embedding_bytes)});
    }
    add_outside(ctx, names_.ring_forward, ring_forward, memplan::sdk::Lifetime::forward_in_layers);
    add_outside(ctx, names_.ring_backward, ring_backward, memplan::sdk::Lifetime::transient_backward);
    add_pipeline_runtime(ctx, layout, shape, settings, outside, inflight, context, facts);
    add_kept_layer_inputs(ctx, settings, shape, freed_by_loss_backward, context);
  }

  // FSDP1 units that need no gradient, recomputed by reentrant checkpointing
  // around them (the 'fsdp' plugin's reentrant_checkpoint_around_units and
  // its header: the reshard-only hook on the recomputed unit's detached
  // inputs keeps each one, with the .grad the nested backward gave it, until
  // backward ends). At backward's end (the first layer's backward) the
  // stored layer inputs are all still alive, with one input gradient of the
  // residual stream's size per such layer, where the step rule
  // (plugin_abi.h) has freed them; by then the loss's backward excess and the
  // head's stored activations (final norm, logits, the loss's) are gone. The
  // item is what that end holds beyond backward's start, the high point the
  // step rule takes: N x tokens x hidden x the residual stream's bytes (the
  // gradient of an input has its dtype: fp32 under autocast on fp32 weights;
  // split over t with sequence parallelism, as the stored inputs) less what
  // the loss freed. One backward's: the final callback of each backward call
  // frees its own. Not counted: the adapters' gradients grown by then beyond
  // one layer's; where the step rule's high point is backward's end instead
  // (G + A1 above A + G1: full fine-tuning with a few frozen layers) the kept
  // inputs themselves; under a pipeline schedule, `freed` is all micro-batches'.
  void add_kept_layer_inputs(memplan::sdk::Context& ctx, const ActivationSettings& settings,
                             const TransformerShape& shape, double freed, double context) {
    const double layers = static_cast<double>(ctx.attr_int(attributes_.kept_layer_inputs, 0));
    if (!(layers > 0)) return;
    if (settings.recompute != RecomputePolicy::full)
      ctx.fail("the fsdp plugin's reentrant_checkpoint_around_units describes gradient checkpointing of whole "
               "units; add [[strategy]] use = \"recompute\" with policy = \"full\", or remove the option");
    const double sequence_split = settings.sequence_parallel ? settings.tensor_parallel : 1;
    const double gradients = layers * shape.batch * shape.seq * shape.hidden *
                             memplan::plugins::residual_dtype_bytes(settings) / sequence_split / context;
    add_outside(ctx, names_.kept_layer_inputs, gradients - freed, memplan::sdk::Lifetime::transient_backward);
  }

 private:
  // The last replays of the loss path's requests (loss_requests.hpp) by their
  // key, replaced in turn: a search that revisits a few batches and sequence
  // lengths (and the dtype) replays each once.
  struct LossSegmentsMemo {
    CrossEntropy mode = CrossEntropy::unfused;  // the evaluation's loss path (short_batch_tokens changes it)
    double bytes = -1, elements = -1, workspace = -1;
    double segments = 0;                             // what they settle at, step after step
    memplan::plugins::LossPathGrowth growth;         // what a first and a longer step map
  };

  // The replay of the loss path for `elements` logits of `bytes` each (the
  // shifted copy at the same size, as apply() says why), with the backward
  // thread's cuBLAS `workspace` where it lands among the path's blocks (0:
  // elsewhere); null where the order of its requests is not known. The
  // growth of steps of varying lengths is replayed without the workspace: it
  // pins a block of the first step only, which a later step within the
  // workspace's size of that step's logits, before any longer step, would
  // need anew (one segment, in a narrow band of lengths: left out).
  const LossSegmentsMemo* replayed_loss_path(double bytes, double elements, double workspace) {
    if (!memplan::plugins::loss_order_known(cross_entropy_)) return nullptr;
    for (const LossSegmentsMemo& entry : loss_path_memo_)
      if (entry.mode == cross_entropy_ && entry.bytes == bytes && entry.elements == elements &&
          entry.workspace == workspace)
        return &entry;
    LossSegmentsMemo& memo = loss_path_memo_[loss_path_memo_next_];
    loss_path_memo_next_ = (loss_path_memo_next_ + 1) % loss_path_memo_.size();
    const bool softcap = model_.final_logit_softcapping > 0;
    memo = {cross_entropy_, bytes, elements, workspace,
            memplan::plugins::loss_segments(cross_entropy_, bytes, held_, elements, elements, softcap,
                                            workspace),
            memplan::plugins::loss_path_growth(cross_entropy_, bytes, held_, elements, elements, softcap)};
    return &memo;
  }

  // The layer's dimensions, less the sequence and the micro-batch (set per evaluation).
  static TransformerShape layer_shape(const memplan_model& model) {
    TransformerShape shape;
    shape.hidden = static_cast<double>(model.hidden);
    shape.heads = static_cast<double>(model.heads);
    shape.q_width = static_cast<double>(model.heads * model.head_dim);
    shape.kv_width = static_cast<double>(model.kv_heads * model.head_dim);
    shape.kv_heads = static_cast<double>(model.kv_heads);
    shape.gated = model.gated_mlp != 0;
    if (model.experts > 0) {
      shape.ffn = static_cast<double>(model.expert_ffn_hidden);
      shape.top_k = static_cast<double>(model.experts_top_k);
      shape.experts = static_cast<double>(model.experts);
      shape.shared_ffn = static_cast<double>(model.shared_expert_ffn_hidden);
    } else {
      shape.ffn = static_cast<double>(model.ffn_hidden);
    }
    if (model.kv_lora_rank > 0) {
      // Multi-head latent attention: head_dim is the q/k head width (no-rope + rope), every head has its K and V.
      const double heads = static_cast<double>(model.heads);
      const double rope = static_cast<double>(model.qk_rope_head_dim);
      const double v_head = static_cast<double>(model.v_head_dim);
      shape.q_latent = static_cast<double>(model.q_lora_rank);
      shape.kv_latent = static_cast<double>(model.kv_lora_rank);
      shape.rope = rope;
      shape.kv_width = shape.q_width;
      shape.kv_heads = heads;
      shape.v_width = heads * v_head;
      shape.kv_up_width = heads * (static_cast<double>(model.head_dim) - rope + v_head);
    }
    return shape;
  }

  // A MoE model's first dense_layers layers (DeepSeek's first_k_dense_replace): the same attention, and a
  // dense MLP of ffn_hidden instead of the routed and shared experts.
  static TransformerShape dense_layer_shape(const TransformerShape& moe, const memplan_model& model) {
    TransformerShape dense = moe;
    dense.ffn = static_cast<double>(model.ffn_hidden);
    dense.top_k = 0;
    dense.experts = 0;
    dense.shared_ffn = 0;
    return dense;
  }

  // The attributes apply() reads besides the layout, resolved once.
  struct Attributes {
    explicit Attributes(const memplan::sdk::Options& options)
        : activation_dtype(options.attribute(MEMPLAN_ATTR_DTYPE_ACTIVATIONS)),
          activation_factor(options.attribute(MEMPLAN_ATTR_ACTIVATION_FACTOR)),
          residual_dtype(options.attribute(MEMPLAN_ATTR_DTYPE_RESIDUAL)),
          linear_input_dtype(options.attribute(MEMPLAN_ATTR_DTYPE_LINEAR_INPUTS)),
          lora_rank_inputs(options.attribute(MEMPLAN_ATTR_LORA_RANK_INPUTS)),
          lora_inputs(options.attribute(MEMPLAN_ATTR_LORA_INPUTS)),
          lora_distinct_inputs(options.attribute(MEMPLAN_ATTR_LORA_DISTINCT_INPUTS)),
          lora_qkv(options.attribute(MEMPLAN_ATTR_LORA_QKV)),
          lora_dropout(options.attribute(MEMPLAN_ATTR_LORA_DROPOUT)),
          lora_mlp(options.attribute(MEMPLAN_ATTR_LORA_MLP)),
          lora_o(options.attribute(MEMPLAN_ATTR_LORA_O)),
          lora_kernels(options.attribute(MEMPLAN_ATTR_LORA_KERNELS)),
          lora_dora_outputs(options.attribute(MEMPLAN_ATTR_LORA_DORA_OUTPUTS)),
          lora_dora_weights(options.attribute(MEMPLAN_ATTR_LORA_DORA_WEIGHTS)),
          lora_dora_widest_input(options.attribute(MEMPLAN_ATTR_LORA_DORA_WIDEST_INPUT)),
          lora_dora_largest_matrix(options.attribute(MEMPLAN_ATTR_LORA_DORA_LARGEST_MATRIX)),
          recompute_policy(options.attribute(MEMPLAN_ATTR_RECOMPUTE_POLICY)),
          recompute_reentrant(options.attribute(MEMPLAN_ATTR_RECOMPUTE_REENTRANT)),
          pipeline_input_buffers(options.attribute(MEMPLAN_ATTR_PIPELINE_INPUT_BUFFERS)),
          pipeline_grad_buffers(options.attribute(MEMPLAN_ATTR_PIPELINE_GRAD_BUFFERS)),
          pipeline_input_grads(options.attribute(MEMPLAN_ATTR_PIPELINE_INPUT_GRADS)),
          pipeline_kept_outputs(options.attribute(MEMPLAN_ATTR_PIPELINE_KEPT_OUTPUTS)),
          pipeline_merged_outputs(options.attribute(MEMPLAN_ATTR_PIPELINE_MERGED_OUTPUTS)),
          context_kv_allgather(options.attribute(MEMPLAN_ATTR_CONTEXT_KV_ALLGATHER)),
          loss_segments(options.attribute(MEMPLAN_ATTR_LOSS_SEGMENTS)),
          loss_first_step(options.attribute(MEMPLAN_ATTR_LOSS_FIRST_STEP)),
          loss_longer_step(options.attribute(MEMPLAN_ATTR_LOSS_LONGER_STEP)),
          loss_longer_segments(options.attribute(MEMPLAN_ATTR_LOSS_LONGER_SEGMENTS)),
          kept_layer_inputs(options.attribute(MEMPLAN_ATTR_KEPT_LAYER_INPUTS)),
          gathered_weight_bytes(options.attribute(MEMPLAN_ATTR_GATHERED_WEIGHT_BYTES)),
          architecture(options.attribute(MEMPLAN_ATTR_HARDWARE_ARCHITECTURE)),
          loss_chunks_report(options.attribute(MEMPLAN_ATTR_REPORT_PREFIX "loss_chunks")) {}
    memplan::sdk::Attribute activation_dtype, activation_factor, residual_dtype, linear_input_dtype, lora_rank_inputs,
        lora_inputs,
        lora_distinct_inputs, lora_qkv, lora_dropout, lora_mlp, lora_o, lora_kernels, lora_dora_outputs,
        lora_dora_weights, lora_dora_widest_input, lora_dora_largest_matrix, recompute_policy,
        recompute_reentrant, pipeline_input_buffers, pipeline_grad_buffers, pipeline_input_grads, pipeline_kept_outputs,
        pipeline_merged_outputs, context_kv_allgather, loss_segments, loss_first_step, loss_longer_step,
        loss_longer_segments, kept_layer_inputs, gathered_weight_bytes, architecture;
    memplan::sdk::Attribute loss_chunks_report;  // the fused chunked loss's chunk count, for the report's details
  };

  // The names of the items apply() adds, interned once.
  struct Names {
    explicit Names(const memplan::sdk::Options& options)
        : stored(options.intern("activations")),
          offload_window(options.intern("activations.offload_window")),
          recompute(options.intern("activations.recompute")),
          dequantized_weight(options.intern("activations.dequantized_weight")),
          embedding_dropout(options.intern("activations.embedding_dropout")),
          final_norm(options.intern("activations.final_norm")),
          logits(options.intern("activations.logits")),
          held_output(options.intern("activations.held_output")),
          cross_entropy(options.intern("activations.cross_entropy")),
          loss_forward(options.intern("activations.loss_forward")),
          loss_backward(options.intern("activations.loss_backward")),
          tied_gradient(options.intern("activations.tied_embedding_gradient")),
          kv_cache(options.intern("activations.kv_cache")),
          sdpa_masks(options.intern("activations.sdpa_masks")),
          windowed_attention(options.intern("activations.windowed_attention")),
          logit_softcap(options.intern("activations.logit_softcap")),
          rope_cache(options.intern("rope_cache")),
          causal_mask(options.intern("causal_mask")),
          layer_causal_mask(options.intern("attn.causal_mask")),
          expanded_causal_mask(options.intern("activations.causal_mask")),
          recompute_casts(options.intern("activations.recompute" MEMPLAN_CACHED_CAST_SUFFIX)),
          pipeline_input_buffers(options.intern("pipeline.input_buffers")),
          pipeline_grad_buffers(options.intern("pipeline.grad_buffers")),
          pipeline_input_grads(options.intern("pipeline.input_grads")),
          pipeline_kept_outputs(options.intern("pipeline.kept_outputs")),
          pipeline_merged_outputs(options.intern("pipeline.merged_outputs")),
          ring_forward(options.intern("context_parallel.ring_forward")),
          ring_backward(options.intern("context_parallel.ring_backward")),
          kept_layer_inputs(options.intern("activations.kept_layer_inputs")),
          held_packed_inputs(options.intern("activations.held_packed_inputs")),
          checkpointed_packed_inputs(options.intern("activations.checkpointed_packed_inputs")),
          deferred_wgrad(options.intern("activations.deferred_wgrad")),
          mtp_loss(options.intern("activations.mtp_loss")),
          global_memory_buffer(options.intern("activations.global_memory_buffer")),
          attention_forward(options.intern("activations.attention_forward")),
          attention_backward(options.intern("activations.attention_backward")),
          dora_weight_norm(options.intern("activations.dora_weight_norm")) {}
    memplan::sdk::Name stored, offload_window, recompute, dequantized_weight, embedding_dropout, final_norm, logits,
        held_output, cross_entropy, loss_forward, loss_backward, tied_gradient, kv_cache, sdpa_masks,
        windowed_attention, logit_softcap, rope_cache, causal_mask, layer_causal_mask, expanded_causal_mask, recompute_casts,
        pipeline_input_buffers, pipeline_grad_buffers, pipeline_input_grads, pipeline_kept_outputs,
        pipeline_merged_outputs, ring_forward, ring_backward, kept_layer_inputs, held_packed_inputs,
        checkpointed_packed_inputs, deferred_wgrad, mtp_loss, global_memory_buffer, attention_forward, attention_backward,
        dora_weight_norm;
  };

  // What apply() needs to know of the reported rank's weights, from one pass
  // over the plan.
  struct PlanFacts {
    int32_t first_layer = 0;     // the first layer it holds (0 when it holds none)
    bool final_norm = false;     // it holds the final norm,
    bool lm_head = false;        // the LM head,
    bool embedding = false;      // the token embedding,
    bool packed_linear = false;  // a linear layer's weights packed below one byte per element
    bool packed_head = false;    // the LM head's among them (Lightning Fabric's bitsandbytes precision quantizes it)
    // The layers' packed parts, for the inputs a held graph keeps (held_packed_inputs): q, k or v (one shared
    // input), o, and the MLP (its input and down's).
    bool packed_attention_in = false, packed_attention_out = false, packed_mlp = false;
    bool packed_experts = false;  // the MoE experts' linears packed (their outputs follow the input's dtype too)
    bool learned_positions = false;  // a learned position table (BERT, GPT-2, OPT): no rotary embedding
    double norm_bytes = 0;           // bytes per element of the layers' norm weights (0: none on the rank)
    bool final_norm_trainable = false;  // the final norm's weight trains
    bool lm_head_trainable = false;     // the LM head's weight trains
    double head_gradient = 0;  // the LM head's gradient on the GPU (the tied embedding's when the head is tied)
    double trained_embedding_bytes = 0;  // bytes per element of the token embedding where it trains (0: frozen)
    uint32_t mtp_modules = 0;  // multi-token-prediction modules on the rank (the model's mtp.eh_proj items)
    bool qk_norm = false;      // per-layer q/k norms (core model inventory: "attn.qk_norm")
  };

  // The inputs bitsandbytes' MatMul4Bit keeps of one layer for one micro-batch on this rank (whole, before
  // context parallelism): the attention's input (h, shared by q, k and v) and o's (the query width) where the
  // attention is 4-bit, the MLP's input (h, shared by gate and up; the attention's own where one norm feeds both,
  // layer_norms = 1) and down's (the MLP width) where the MLP is. Over-counted: layer 0's attention input when
  // nothing before it trains (MatMul4Bit then stores nothing for it).
  static double packed_inputs_per_layer(const PlanFacts& facts, const memplan_model& model,
                                        const memplan::plugins::TransformerShape& shape,
                                        const memplan::plugins::ActivationSettings& settings) {
    const bool attention_in = facts.packed_attention_in, attention_out = facts.packed_attention_out,
               mlp = facts.packed_mlp;
    const double t = settings.tensor_parallel;
    const double sequence_split = settings.sequence_parallel ? t : 1;
    const bool shared_norm = model.layer_norms == 1 && attention_in && mlp;
    const double normed_inputs = (attention_in ? 1 : 0) + (mlp && !shared_norm ? 1 : 0);
    return shape.seq * shape.batch * settings.bytes *
           (normed_inputs * shape.hidden / sequence_split +
            ((attention_out ? shape.q_width : 0) + (mlp ? shape.ffn : 0)) / t);
  }

  static PlanFacts scan_plan(const memplan::sdk::Context& ctx) {
    using memplan::sdk::ParamClass;
    PlanFacts facts;
    bool layered = false;
    for (memplan::sdk::ItemRef item : ctx.items()) {
      if (item.role() == memplan::sdk::Role::gradients && item.device() == memplan::sdk::Device::gpu &&
          item.lifetime() == memplan::sdk::Lifetime::gradient &&
          (item.param_class() == ParamClass::lm_head ||
           (item.param_class() == ParamClass::embedding && ctx.model().tied_embeddings != 0)))
        facts.head_gradient += item.bytes();
      if (item.role() != memplan::sdk::Role::weights) continue;
      const ParamClass param_class = item.param_class();
      // The lowest layer of any layered weight, whatever the items' order.
      if (item.layer() >= 0 && (!layered || item.layer() < facts.first_layer)) {
        facts.first_layer = item.layer();
        layered = true;
      }
      facts.final_norm = facts.final_norm || param_class == ParamClass::final_norm;
      facts.lm_head = facts.lm_head || param_class == ParamClass::lm_head;
      facts.final_norm_trainable =
          facts.final_norm_trainable || (param_class == ParamClass::final_norm && item.trainable());
      facts.lm_head_trainable = facts.lm_head_trainable || (param_class == ParamClass::lm_head && item.trainable());
      facts.embedding = facts.embedding || param_class == ParamClass::embedding;
      // On the GPU or, offloaded, gathered to it for compute: autograd's gradient is the GPU's either way.
      if (param_class == ParamClass::embedding && item.trainable())
        facts.trained_embedding_bytes = item.bytes_per_element();
      facts.learned_positions = facts.learned_positions || param_class == ParamClass::position_embedding;
      if (param_class == ParamClass::norm && item.layer() >= 0 && item.name().ends_with("attn.qk_norm"))
        facts.qk_norm = true;
      if (param_class == ParamClass::norm && item.layer() >= 0 && facts.norm_bytes == 0)
        facts.norm_bytes = item.bytes_per_element();
      facts.packed_linear = facts.packed_linear || memplan::support::sharding::is_packed_linear(item);
      if (item.name() == "mtp.eh_proj") facts.mtp_modules += item.count();
      facts.packed_head = facts.packed_head || (item.bytes_per_element() < 1 && param_class == ParamClass::lm_head);
      if (item.layer() >= 0 && item.bytes_per_element() < 1) {
        // attn.o is an attention-class item (the model's naming): the name is compared only for those.
        if (param_class == ParamClass::mlp) facts.packed_mlp = true;
        else if (param_class == ParamClass::expert) facts.packed_experts = true;
        else if (param_class == ParamClass::attention || param_class == ParamClass::attention_kv)
          (item.name() == "attn.o" ? facts.packed_attention_out : facts.packed_attention_in) = true;
      }
    }
    return facts;
  }

  // The backward thread's cuBLAS workspace, where the loss path's replay
  // places it (loss_requests.hpp): autograd's first GEMM, the head's input
  // gradient, takes it by best fit after the loss has freed its fp32
  // gradients, and those logits-sized blocks are the only free ones at least
  // its size where every segment the layers' requests map is smaller (a
  // request under 10 MiB maps 20 MiB, a larger one its size rounded up to
  // 2 MiB: support::segment_size). On Hopper and later (32 MiB) a small
  // model's layers at a short batch qualify; below (8.125 MiB) the layers'
  // 20 MiB segments always hold it. 0 where the layers may leave a block the
  // workspace fits, or what they leave is not worked out: a sharding
  // strategy's gathered weights in the step's pool, context parallelism, a
  // packed base (its dequantized matrix), mixture-of-experts and latent
  // attention (largest_request.hpp).
  double backward_workspace(const memplan::sdk::Context& ctx, const TransformerShape& shape,
                            const ActivationSettings& settings, const PlanFacts& facts,
                            const memplan::support::Layout& layout, double mask_bytes) const {
    if (layout.context > 1 || ctx.attr_double(attributes_.gathered_weight_bytes, 0) > 0) return 0;
    const double workspace = memplan::support::cublas_workspace_bytes(ctx.attr_string(attributes_.architecture, ""));
    double largest = std::max(memplan::plugins::largest_layer_request(shape, settings), mask_bytes);
    if (facts.packed_linear) largest = std::max(largest, largest_linear_matrix(model_, settings.tensor_parallel) *
                                                             settings.bytes);
    return memplan::support::segment_size(largest) < workspace ? workspace : 0;
  }

  // Full recomputation of layers that autocast ran (the precision plugin's
  // `<weight>.autocast` casts; conventions.h, MEMPLAN_CACHED_CAST_SUFFIX).
  // torch.utils.checkpoint (pytorch/pytorch torch/utils/checkpoint.py @
  // 0008d771a4015b0b43165ea470653b52e92b2148, CheckpointFunction) runs each
  // layer's forward under torch.no_grad() inside the caller's autocast: the
  // casts of the weights are still cached (autocast_mode.cpp's can_try_cache
  // does not look at grad mode) and stay in the cache until the forward's
  // autocast context exits, but nothing saves them, so they are all alive at
  // the forward's end and gone in backward (transient_forward). Backward
  // recomputes one layer at a time under the forward's autocast state
  // (torch.amp.autocast(**ctx.device_autocast_kwargs)), whose matrix
  // multiplies save that layer's casts until its backward: the largest
  // layer's casts, transient_backward, beside the recompute working set.
  void retime_cached_casts(memplan::sdk::Context& ctx) {
    casts_.clear();
    for (memplan::sdk::ItemRef item : ctx.items()) {
      if (item.role() != memplan::sdk::Role::buffers || item.lifetime() != memplan::sdk::Lifetime::activation ||
          item.layer() < 0 || item.count() == 0 || !item.name().ends_with(MEMPLAN_CACHED_CAST_SUFFIX))
        continue;
      item.set_lifetime(memplan::sdk::Lifetime::transient_forward);
      casts_.push_back({item.layer(), item.layer() + static_cast<int64_t>(item.count()),
                        item.bytes() / static_cast<double>(item.count())});
    }
    // One layer's casts: the items covering it; the sum changes only where a range starts.
    double largest = 0;
    for (const CastRange& start : casts_) {
      double layer = 0;
      for (const CastRange& other : casts_)
        if (other.begin <= start.begin && start.begin < other.end) layer += other.bytes;
      largest = std::max(largest, layer);
    }
    if (largest > 0)
      memplan::support::add_bytes(ctx, {.name = names_.recompute_casts,
                                        .role = memplan::sdk::Role::buffers,
                                        .lifetime = memplan::sdk::Lifetime::transient_backward,
                                        .bytes = largest});
  }

  // Elements of the largest linear-layer matrix on the rank: h x the widest
  // of the query projection, the MLP's inner width (or an expert's, or the shared expert's), split t ways.
  static double largest_linear_matrix(const memplan_model& model, double t) {
    const double widest = static_cast<double>(
        std::max({model.heads * model.head_dim, model.ffn_hidden, model.expert_ffn_hidden,
                  model.shared_expert_ffn_hidden}));
    return static_cast<double>(model.hidden) * widest / t;
  }

  // The eager losses over whole logits, whose fp32 gradients are freed before
  // the LM head's backward (not the chunked or compiled ones, whose head
  // gradient meets a chunk's or the 16-bit gradient, nor Megatron's and
  // DTensor's vocabulary-parallel ones).
  bool loss_frees_before_head() const { return memplan::plugins::eager_whole_logits_loss(cross_entropy_); }

  // The boolean attention masks transformers >= 4.53 builds for SDPA (mask_bias_per_layer; masking_utils.py
  // sdpa_mask @ 5.17): none where _ignore_causal_mask_sdpa lets SDPA run is_causal, which needs no padding and,
  // for a windowed layer, fewer keys than the window (`kv_length < local_attention_size`); else one b x s x s
  // bool mask per kind of layer that needs one (the model's causal_mask_mapping: "full_attention",
  // "sliding_attention"), which each SDPA call turns into a bias in the activations' dtype that it keeps for
  // backward (torch's memory-efficient kernel saves attn_bias). With padding_mask every layer's bias (and K and V
  // repeated) is counted in its stored bytes (EagerLayer::attention_bias); without, the windowed layers' apart.
  // Measured (validation/measured/snapshot-olmo3-7b-trainer-lora-r32-all-d0.05-gcdefault-bs1-s4096: 4,096 tokens,
  // window 4,096): the 16,777,216-byte mask from and_mask, and a windowed layer's recomputation 33,554,432 bytes
  // (2 s a token) above the full-attention layer's, at sdpa_attention_forward.
  struct SdpaMasks {
    int kinds = 0;                // boolean masks built per forward
    int64_t windowed_biased = 0;  // windowed layers of the stage that get a mask their stored bytes do not count
    bool eager = false;           // eager attention's float masks (the activations' dtype), not SDPA's booleans
  };
  // Eager attention (flash_attention = false) gets no boolean mask but masking_utils' eager_mask: a float mask
  // in the activations' dtype (0 and the dtype's minimum) per kind of layer, always built (eager attention has no
  // is_causal), b x s x s x p; no per-layer bias (the scores add it). Measured (snapshot-gemma2-9b-trainer-lora-
  // r16-all-gcdefault-eager-bs1-s4096): create_causal_mask's and create_sliding_window_causal_mask's 33,554,432
  // bytes each (4,096^2 x 2), alive at the loss's backward under checkpointing.
  SdpaMasks sdpa_masks_of(int32_t first_layer, uint32_t stage_layers, int64_t seq_len) const {
    SdpaMasks masks;
    if (layer_ != LayerImplementation::eager || !mask_bias_per_layer_) return masks;
    // Layer i is global where (i + 1) % every == 0: the stage's [first, first + n) holds as many global layers
    // as multiples of `every` in (first, first + n] (a closed form: apply() runs per evaluation).
    const int64_t window = model_.sliding_window;
    const int64_t every = model_.global_attention_every;
    const int64_t n = static_cast<int64_t>(stage_layers);
    const int64_t first = first_layer;
    const int64_t global = window <= 0 ? n : every > 0 ? (first + n) / every - first / every : 0;
    const int64_t windowed = n - global;
    if (!flash_attention_) {
      masks.kinds = (global > 0 ? 1 : 0) + (windowed > 0 ? 1 : 0);
      masks.eager = true;
      return masks;
    }
    const bool window_masked = window > 0 && (padding_mask_ || seq_len >= window);
    masks.kinds = (global > 0 && padding_mask_ ? 1 : 0) + (windowed > 0 && window_masked ? 1 : 0);
    masks.windowed_biased = window_masked && !padding_mask_ ? windowed : 0;
    return masks;
  }

  // Whether the forward fills a KV cache this plugin counts: use_cache on eager layers that are not
  // recomputed (transformers turns use_cache off under gradient checkpointing: modeling_llama.py,
  // LlamaModel.forward, "`use_cache=True` is incompatible with gradient checkpointing"), or recomputed by a
  // wrapper it does not see (cache_under_recompute: its self.gradient_checkpointing stays False). Multi-head latent
  // attention's cache (K at the q/k head width, V at v_head_dim, beside the latent terms) is left out.
  bool kv_cache_counted(const ActivationSettings& settings) const {
    return use_cache_ && layer_ == LayerImplementation::eager && model_.kv_lora_rank == 0 &&
           (settings.recompute == RecomputePolicy::none || cache_under_recompute_);
  }

  // dtype.activations, which the precision plugin must have set (read by handle).
  double activation_bytes(const memplan::sdk::Context& ctx) const {
    return ctx.required_attr_double(attributes_.activation_dtype, MEMPLAN_ATTR_DTYPE_ACTIVATIONS);
  }

  // What the eager layers keep depends on which of their weights train and on
  // the adapters: read from the plan (the trainability plugins ran before) and
  // from the lora.* attributes the 'lora' plugin declares.
  memplan::plugins::EagerLayer eager_layer(const memplan::sdk::Context& ctx, const memplan_model& model,
                                          const PlanFacts& facts) const {
    using memplan::sdk::ParamClass;
    memplan::plugins::EagerLayer eager;
    eager.repeat_kv = repeats_kv() && model.kv_heads < model.heads;
    eager.attention_bias = padding_mask_ && mask_bias_per_layer_;
    // From the model, not from the norms' sizes, which sharding plugins (phase 500) have already divided.
    eager.rms_norm = model.layer_norm == 0;
    if (model.layer_norms > 0) eager.layer_norms = static_cast<double>(model.layer_norms);
    eager.norm_scale_fp32 = model.norm_scale_fp32 != 0;
    eager.attention_softcap = model.attn_logit_softcapping > 0;
    bool any_attention = false, any_mlp = false, any_norm = false, any_adapter = false;
    eager.norms_trainable = eager.attention_trainable = eager.output_trainable = false;
    eager.mlp_trainable = eager.down_trainable = false;
    // The adapters compute in their own dtype; without adapters the activations'.
    eager.adapter_bytes = activation_bytes(ctx);
    for (memplan::sdk::ItemRef item : ctx.items()) {
      if (item.role() != memplan::sdk::Role::weights) continue;
      const ParamClass param_class = item.param_class();
      if (param_class == ParamClass::adapter && !any_adapter) {
        any_adapter = true;
        eager.adapter_bytes = item.bytes_per_element();
      }
      if (item.layer() < 0) continue;
      const bool trainable = item.trainable();
      switch (param_class) {
        case ParamClass::norm:
          any_norm = true;
          eager.norms_trainable = eager.norms_trainable || trainable;
          break;
        case ParamClass::attention:
        case ParamClass::attention_kv:
        case ParamClass::attention_latent:
          any_attention = true;
          eager.attention_trainable = eager.attention_trainable || trainable;
          eager.output_trainable = eager.output_trainable || trainable;
          break;
        case ParamClass::mlp:
        case ParamClass::expert:
          any_mlp = true;
          eager.mlp_trainable = eager.mlp_trainable || trainable;
          eager.down_trainable = eager.down_trainable || trainable;
          break;
        default: break;
      }
    }
    // A model without such items (e.g. params-only) keeps the defaults: everything trains.
    if (!any_norm) eager.norms_trainable = true;
    if (!any_attention) eager.attention_trainable = eager.output_trainable = true;
    if (!any_mlp) eager.mlp_trainable = eager.down_trainable = true;
    eager.adapter_rank = ctx.attr_double(attributes_.lora_rank_inputs, 0);
    eager.adapter_inputs = ctx.attr_double(attributes_.lora_inputs, 0);
    eager.adapter_distinct_inputs = ctx.attr_double(attributes_.lora_distinct_inputs, 0);
    eager.adapter_qkv = ctx.attr_int(attributes_.lora_qkv, 0) != 0;
    eager.adapter_dropout = ctx.attr_double(attributes_.lora_dropout, 0);
    eager.adapter_mlp = ctx.attr_int(attributes_.lora_mlp, 0) != 0;
    eager.adapter_o = ctx.attr_int(attributes_.lora_o, 0) != 0;
    const int64_t kernels = ctx.attr_int(attributes_.lora_kernels, 0);
    eager.kernel_qkv = (kernels & MEMPLAN_LORA_KERNEL_QKV) != 0;
    eager.kernel_o = (kernels & MEMPLAN_LORA_KERNEL_O) != 0;
    eager.kernel_mlp = (kernels & MEMPLAN_LORA_KERNEL_MLP) != 0;
    eager.kernel_adds_in_place = (kernels & MEMPLAN_LORA_KERNEL_ADD_IN_PLACE) != 0;
    eager.dora_outputs = ctx.attr_double(attributes_.lora_dora_outputs, 0);
    eager.dora_weights = ctx.attr_double(attributes_.lora_dora_weights, 0);
    eager.softmax_keeps_input = softmax_keeps_input_;
    eager.softmax_upcast = softmax_upcast_;
    eager.masked_scores_kept = masked_scores_kept_;
    eager.relu_mlp = relu_mlp_;
    eager.composite_gelu = composite_gelu_new_ && model.mlp_activation == MEMPLAN_ACTIVATION_GELU_NEW;
    eager.attention_dropout = attention_dropout_;
    eager.rms_norm_upcast = rms_norm_upcast_;
    eager.fused_qkv = fused_qkv_;
    eager.fused_swiglu = fused_swiglu_;
    eager.adapter_autocast = autocast_;
    // A linear weight packed below one byte (a 4-bit base); under bitsandbytes <= 0.43.1 it keeps its input
    // (MatMul4Bit, packed_linear_keeps_input).
    eager.qk_norm = facts.qk_norm;
    eager.packed_base = facts.packed_linear;
    eager.packed_inputs_kept = eager.packed_base && packed_linear_keeps_input_;
    // fp32 norm weights ahead of 4-bit MLP linears in a 16-bit run (EagerLayer::packed_outputs_fp32); not Unsloth's
    // fused LoRA_MLP, which computes in its own dtype.
    // MoE experts alike: bitsandbytes' 4-bit experts return their fp32 input's dtype, and the sparse block's
    // output buffer takes the hidden states' (transformers' MixtralSparseMoeBlock, final_hidden_states =
    // torch.zeros(..., dtype=hidden_states.dtype); 1.35.0).
    eager.packed_outputs_fp32 = (facts.packed_mlp || facts.packed_experts) && facts.norm_bytes >= 4 &&
                                activation_bytes(ctx) < 4 && !eager.kernel_mlp;
    return eager;
  }

  // The module buffers Hugging Face transformers registers next to the
  // weights (models/llama/modeling_llama.py; docs/formulas.md, "Module
  // buffers"). They are not parameters: FSDP and ZeRO-3 shard parameters only,
  // so every rank holds them whole (flag non_parameter). Models with learned
  // positions have neither; without max_context their size is unknown and
  // nothing is added.
  //   rope_cache: LlamaRotaryEmbedding's cos and sin tables, max_context x
  //     head_dim each, in every attention layer (up to 4.38; 4.38 calls them
  //     _cos_cached/_sin_cached, kept "for BC"), in torch's default dtype at
  //     build time unless a later model.to() cast them (buffer_dtype).
  //   causal_mask_buffer: 4.38's LlamaModel.causal_mask, a max_context^2
  //     bool buffer (model.to(dtype) casts floating tensors only), which
  //     _update_causal_mask expands each forward to micro_batch x 1 x
  //     max_context^2 in the activations' dtype; every layer (and its
  //     checkpoint) holds that mask until its backward.
  void add_module_buffers(memplan::sdk::Context& ctx, const PlanFacts& facts, uint32_t stage_layers,
                          bool stage_has_embedding, double mask_bytes_per_position_pair) const {
    const double positions = static_cast<double>(model_.max_context);
    using memplan::sdk::Lifetime;
    using memplan::sdk::Role;
    // layer_causal_mask: GPT2Attention.__init__ registers `bias`, torch.tril of a max_positions^2 ones tensor in
    // uint8 (bool from the mask refactor; 1 byte either way), viewed 1 x 1 x n x n, in every layer (transformers
    // models/gpt2/modeling_gpt2.py; GPTNeoSelfAttention, GPTJAttention alike), learned positions or not.
    if (layer_causal_mask_ && positions > 0 && stage_layers > 0)
      ctx.add(memplan::sdk::NewItem{.name = names_.layer_causal_mask, .role = Role::weights,
                                    .layer = facts.first_layer, .count = stage_layers, .non_parameter = true,
                                    .elements = positions * positions, .bytes_per_element = 1});
    if (positions <= 0 || facts.learned_positions) return;
    if (rope_cache_ && stage_layers > 0) {
      const double bytes = buffer_bytes_ > 0       ? buffer_bytes_
                           : facts.norm_bytes > 0 ? facts.norm_bytes
                                                  : activation_bytes(ctx);
      ctx.add(memplan::sdk::NewItem{.name = names_.rope_cache, .role = Role::weights, .layer = facts.first_layer,
                                    .count = stage_layers, .non_parameter = true,
                                    // cos and sin over the rotary width: the whole head, or
                                    // latent attention's rope part (qk_rope_head_dim)
                                    .elements = 2 * positions *
                                                static_cast<double>(model_.kv_lora_rank > 0 ? model_.qk_rope_head_dim
                                                                                              : model_.head_dim),
                                    .bytes_per_element = bytes});
    }
    if (causal_mask_buffer_ && stage_has_embedding) {
      ctx.add(memplan::sdk::NewItem{.name = names_.causal_mask, .role = Role::weights, .non_parameter = true,
                                    .elements = positions * positions, .bytes_per_element = 1});
      add_outside(ctx, names_.expanded_causal_mask, positions * positions * mask_bytes_per_position_pair);
    }
  }

  // Megatron-LM's global memory buffer (megatron/core/utils.py GlobalMemoryBuffer, @ 390c1c91 lines 59-69 and
  // since): get_tensor(shape, dtype, "mpu") returns a view of one tensor per (name, dtype), allocated at the
  // first request and replaced only by a larger one, never freed. The legacy layers take two requests from it:
  // CoreAttention without flash attention hands baddbmm a (b np, s, s) "mpu" tensor as its input beside the
  // new score matrix it returns (megatron/model/transformer.py @ 390c1c91:264; the buffer is the beta = 0
  // input, not the result), and with sequence parallelism the column-parallel linears all-gather their input
  // into an (s, b, h) "mpu" tensor (core/tensor_parallel/layers.py, LinearWithGradAccumulationAndAsyncCommunication).
  // One tensor of the larger size, in the activations' dtype, from the first forward on. Measured (validation
  // MLM-gpt345m-*, max allocated of Megatron-LM @ 2023-07): the 64 MiB score buffer is part of every rank's peak.
  void add_global_memory_buffer(memplan::sdk::Context& ctx, const TransformerShape& shape,
                                const ActivationSettings& settings) const {
    const double t = settings.tensor_parallel;
    const double scores = settings.flash_attention ? 0.0
                                                   : shape.batch * static_cast<double>(model_.heads) / t *
                                                         shape.seq * shape.seq;
    const double gathered = settings.sequence_parallel && t > 1 ? shape.seq * shape.batch * shape.hidden : 0.0;
    add_outside(ctx, names_.global_memory_buffer, std::max(scores, gathered) * settings.bytes,
                memplan::sdk::Lifetime::persistent);
  }

  // A pipeline runtime's own tensors, in micro-batches as pipeline-parallel
  // declares them (runtime = "torch": torch.distributed.pipelining, torch 2.6;
  // the sources are in that plugin). A boundary tensor is one micro-batch's
  // hidden states as a stage sends them: the residual stream on the rank's
  // tokens, b s h / cp, / t with sequence parallelism (torchtitan's blocks
  // return the local Shard(1) tensor). The last stage's output is the logits
  // the model returns, b s v / (t cp) in their dtype (the vocabulary shard
  // under loss parallelism).
  //   pipeline.input_buffers   receive buffers for the stage's inputs, one per
  //                            micro-batch, kept across steps; the in-flight
  //                            micro-batches' are their first layer's stored
  //                            input, counted there (persistent)
  //   pipeline.grad_buffers    receive buffers for the outputs' gradients (persistent)
  //   pipeline.input_grads     the inputs' gradients, left in the receive
  //                            buffers' .grad to the step's end (gradient: grows in backward)
  //   pipeline.kept_outputs    every micro-batch's output in output_chunks to
  //                            the next step (persistent, activations), less the
  //                            in-flight logits the loss already keeps
  //   pipeline.merged_outputs  the last stage's merge_chunks: one torch.cat of
  //                            the outputs at the step's end, after backward. No
  //                            cached block is that large (each tensor it could
  //                            reuse was allocated on its own), so the caching
  //                            allocator maps a segment of its own for it, which
  //                            stays reserved: reserve memory in every phase
  //                            (role activations: not at set-up).
  void add_pipeline_runtime(memplan::sdk::Context& ctx, const memplan::support::Layout& layout,
                            const TransformerShape& shape, const ActivationSettings& settings,
                            const memplan::plugins::OutputActivations& outside, int64_t inflight, double context,
                            const PlanFacts& facts) const {
    const Attributes& a = attributes_;
    const double inputs = static_cast<double>(ctx.attr_int(a.pipeline_input_buffers, 0));
    const double grads = static_cast<double>(ctx.attr_int(a.pipeline_grad_buffers, 0));
    const double input_grads = static_cast<double>(ctx.attr_int(a.pipeline_input_grads, 0));
    const double kept = static_cast<double>(ctx.attr_int(a.pipeline_kept_outputs, 0));
    const double merged = static_cast<double>(ctx.attr_int(a.pipeline_merged_outputs, 0));
    if (inputs + grads + input_grads + kept + merged <= 0) return;
    const double t = settings.tensor_parallel;
    const double boundary = memplan::plugins::residual_dtype_bytes(settings) * shape.batch * shape.seq *
                            shape.hidden / context / (settings.sequence_parallel ? t : 1);
    const bool logits_here =
        layout.stage_has_lm_head && (facts.lm_head || (model_.tied_embeddings != 0 && facts.embedding));
    const double logits = logits_here ? memplan::plugins::returned_logit_bytes(cross_entropy_, settings.bytes) *
                                            shape.batch * shape.seq * static_cast<double>(model_.vocab) / t / context
                                      : 0;
    const double flight = static_cast<double>(inflight);
    using memplan::sdk::Lifetime;
    using memplan::sdk::Role;
    auto add = [&](memplan::sdk::Name name, Role role, Lifetime lifetime, memplan::sdk::Pool pool, double bytes) {
      memplan::support::add_bytes_if_any(
          ctx, {.name = name, .role = role, .lifetime = lifetime, .pool = pool, .bytes = bytes});
    };
    const auto allocated = memplan::sdk::Pool::allocated;
    add(names_.pipeline_input_buffers, Role::buffers, Lifetime::persistent, allocated,
        std::max(0.0, inputs - flight) * boundary);
    add(names_.pipeline_grad_buffers, Role::buffers, Lifetime::persistent, allocated, grads * boundary);
    add(names_.pipeline_input_grads, Role::buffers, Lifetime::gradient, allocated, input_grads * boundary);
    const double output = layout.stage_has_lm_head ? logits : boundary;
    const double counted = layout.stage_has_lm_head ? flight * std::min(outside.logits / context, logits) : 0;
    // On the LM head's stage the kept outputs are logits: tokens x vocabulary
    // requests (plugin_abi.h MEMPLAN_ITEM_VOCAB_SIZED).
    if (memplan::support::add_bytes_if_any(ctx, {.name = names_.pipeline_kept_outputs, .role = Role::activations,
                                                 .lifetime = Lifetime::persistent, .pool = allocated,
                                                 .bytes = std::max(0.0, kept * output - counted)}) &&
        layout.stage_has_lm_head)
      ctx.items()[ctx.items().size() - 1].set_vocab_sized(true);
    add(names_.pipeline_merged_outputs, Role::activations, Lifetime::persistent, memplan::sdk::Pool::reserve,
        merged * logits);
  }

  // One item of `bytes` outside the layers (1 byte per element).
  static void add_bytes(memplan::sdk::Context& ctx, memplan::sdk::Name name, double bytes,
                        memplan::sdk::Lifetime lifetime,
                        memplan::sdk::Device device = memplan::sdk::Device::gpu) {
    memplan::support::add_bytes(ctx, {.name = name, .role = memplan::sdk::Role::activations, .lifetime = lifetime,
                                      .device = device, .bytes = bytes});
  }

  // One stored-activation item outside the layers, when it has any bytes.
  static void add_outside(memplan::sdk::Context& ctx, memplan::sdk::Name name, double bytes,
                          memplan::sdk::Lifetime lifetime = memplan::sdk::Lifetime::activation) {
    if (bytes > 0) add_bytes(ctx, name, bytes, lifetime);
  }

  // The same for a tensor of tokens x vocabulary (the logits, the loss's
  // tensors over them): flagged for the allocator (plugin_abi.h
  // MEMPLAN_ITEM_VOCAB_SIZED).
  static void add_vocab_sized(memplan::sdk::Context& ctx, memplan::sdk::Name name, double bytes,
                              memplan::sdk::Lifetime lifetime = memplan::sdk::Lifetime::activation) {
    if (!(bytes > 0)) return;
    add_bytes(ctx, name, bytes, lifetime);
    ctx.items()[ctx.items().size() - 1].set_vocab_sized(true);
  }

  // K and V at every query head (eager and compiled layers): where the framework repeats them, where attention
  // is eager (its matmuls read every head), and under SDPA with an explicit mask: torch's memory-efficient kernel
  // takes no enable_gqa, so transformers repeats them (integrations/sdpa_attention.py, use_gqa_in_sdpa: only when
  // attention_mask is None).
  bool repeats_kv() const { return repeat_kv_ || !flash_attention_ || padding_mask_; }

  // The losses that chunk by unsloth-zoo's rule (fused_loss_chunks.hpp).
  static bool fused_chunks(CrossEntropy mode) {
    return mode == CrossEntropy::chunked_fused || mode == CrossEntropy::chunked_fused_eager;
  }

  // A loss path option: one of kLossModes' names.
  static CrossEntropy loss_mode(memplan::sdk::Options& options, const char* key, const char* fallback) {
    const std::string loss = options.string(key).value_or(fallback);
    std::string names;
    for (const LossMode& mode : kLossModes) {
      if (loss == mode.name) return mode.mode;
      names += std::string(names.empty() ? "" : ", ") + "\"" + mode.name + "\"";
    }
    options.fail(key, "must be one of " + names + ", not \"" + loss + "\"");
  }

  // The fused chunked loss's chunk rule (fused_loss_chunks.hpp). The options describe that loss only: a
  // framework profile sets them beside cross_entropy = "chunked-fused", and a scenario that names another loss
  // must still compose with them, so they are checked and otherwise change nothing.
  void read_fused_chunking(memplan::sdk::Options& options) {
    const auto bounded = [&](const char* key, double fallback, double most, const char* what) {
      const double value = options.number(key).value_or(fallback);
      if (!(value >= 0) || value > most) options.fail(key, std::string("must be ") + what);
      return value;
    };
    fused_chunking_.target_gib =
        bounded("loss_chunk_target_gib", 4, 1e6, "a size in GiB from 0 (no fixed target) to 1e6");
    fused_chunking_.free_share =
        bounded("loss_chunk_free_share", 0.5, 1, "a share of the GPU's memory from 0 (none) to 1");
    const std::string rounding = options.string("loss_chunk_rounding").value_or("up");
    if (rounding != "nearest" && rounding != "up")
      options.fail("loss_chunk_rounding", "must be \"nearest\" or \"up\", not \"" + rounding + "\"");
    fused_chunking_.rounding =
        rounding == "nearest" ? memplan::plugins::ChunkRounding::nearest : memplan::plugins::ChunkRounding::up;
    if (options.integer("loss_chunks")) fused_chunking_.fixed_chunks = loss_chunks_;
  }

  // A string option that says more about a boolean one (on: that boolean's value): one of `choices`, and
  // nullopt where the boolean is off.
  static std::optional<std::string> qualifier(memplan::sdk::Options& options, const char* key,
                                              std::array<const char*, 2> choices, bool on) {
    const std::optional<std::string> value = options.string(key);
    if (!value) return value;
    if (*value != choices[0] && *value != choices[1])
      options.fail(key, std::string("must be \"") + choices[0] + "\" or \"" + choices[1] + "\", not \"" + *value + "\"");
    // Where the boolean is off the qualifier has nothing to qualify: a framework profile sets both (fsdp-qlora's
    // output_held_until, unsloth's offload_scope) and a scenario that turns the boolean off must still compose
    // with it, so the value is read (and checked) but changes nothing.
    if (!on) return std::nullopt;
    return value;
  }

  // What the loop's held output keeps (output_held): in every phase when it keeps the output into the next
  // forward; in backward and the optimizer step when it drops it after the step (output_held_until).
  void add_held(memplan::sdk::Context& ctx, memplan::sdk::Name name, double bytes, bool vocab_sized) const {
    const auto add = [&](memplan::sdk::Lifetime lifetime) {
      if (vocab_sized)
        add_vocab_sized(ctx, name, bytes, lifetime);
      else
        add_outside(ctx, name, bytes, lifetime);
    };
    if (held_ == memplan::plugins::HeldOutput::next_forward) {
      add(memplan::sdk::Lifetime::persistent);
    } else if (held_ == memplan::plugins::HeldOutput::through_step) {
      add(memplan::sdk::Lifetime::transient_backward);
      add(memplan::sdk::Lifetime::transient_optimizer);
    }
  }

  bool flash_attention_;
  bool dropout_;
  CrossEntropy cross_entropy_ = CrossEntropy::unfused;  // this evaluation's loss path (apply() sets it)
  CrossEntropy long_loss_ = CrossEntropy::unfused;      // cross_entropy
  CrossEntropy short_loss_ = CrossEntropy::in_place;    // short_batch_cross_entropy
  double short_batch_tokens_ = 0;                       // micro-batch tokens up to which short_loss_ holds; 0: none
  double loss_chunks_ = 8;
  memplan::plugins::FusedLossChunking fused_chunking_;  // cross_entropy = "chunked-fused" (read_fused_chunking)
  LayerImplementation layer_ = LayerImplementation::fused;
  bool returned_logits_fp32_copy_ = false;  // returned_logits_fp32_copy (ActivationSettings)
  double returned_logits_shifted_copies_ = 0;  // returned_logits_shifted_copies (ActivationSettings)
  double returned_logits_chunk_copies_ = 0;    // returned_logits_chunk_copies
  double returned_logits_chunk_rows_ = 0;      // returned_logits_chunk_rows (0: one batch row)
  bool compiled_ = false;  // layer = "compiled" (ActivationSettings::compiled)
  bool repeat_kv_ = true;
  bool offload_ = false;
  bool offload_model_ = true;  // offload_scope = "model": the final norm's saves go to the host too
  double offload_backward_layers_ = 2;  // layers' stored activations on the GPU in backward (offload_backward_layers)
  bool dequantized_buffer_ = false;      // the forward dequantizes into one kept buffer (dequantized_buffer)
  int64_t dequantized_copies_ = 1;       // copies of a dequantized 4-bit matrix held at once (dequantized_copies)
  bool torch_ops_dequantize_ = false;    // packed matmuls save their fp16 weight (packed_dequantize = "torch-ops")
  std::array<LossSegmentsMemo, 8> loss_path_memo_{};  // LossSegmentsMemo, above
  size_t loss_path_memo_next_ = 0;
  bool rope_cache_ = false;
  bool causal_mask_buffer_ = false;
  bool layer_causal_mask_ = false;  // every attention layer's own causal-mask buffer (layer_causal_mask)
  bool padding_mask_ = false;         // the batches carry a padding mask: SDPA gets an explicit mask
  bool mask_bias_per_layer_ = false;  // ... a boolean one, which each call turns into a bias it keeps
  bool use_cache_ = false;            // the forward fills a KV cache the returned output holds
  bool cache_under_recompute_ = false;  // cache_under_recompute: a wrapper transformers does not see recomputes
  bool output_held_ = false;
  memplan::plugins::HeldOutput held_ = memplan::plugins::HeldOutput::dropped;  // output_held and output_held_until
  bool softmax_keeps_input_ = false;
  bool softmax_upcast_ = false;  // softmax_upcast: eager attention's fp32 softmax transients
  bool composite_gelu_new_ = true;  // composite_gelu_new: the model's gelu_new as tensor ops (transformers')
  bool masked_scores_kept_ = false;   // eager attention keeps the clamped scores' input (OPTAttention's torch.max)
  bool relu_mlp_ = false;             // ReLU MLP: only its output is kept
  bool attention_dropout_ = true;     // eager attention's probabilities dropped out with dropout
  bool packed_linear_keeps_input_ = false;  // bitsandbytes' MatMul4Bit keeps A whatever trains
  bool rms_norm_upcast_ = true;   // EagerLayer::rms_norm_upcast
  bool fused_qkv_ = false;        // EagerLayer::fused_qkv (LitGPT's attention)
  bool fused_swiglu_ = false;     // EagerLayer::fused_swiglu (Liger's SwiGLU)
  bool moe_probs_in_expert_ = false;  // ActivationSettings::moe_probs_in_expert (Megatron-Core >= core_r0.13.0)
  bool defer_embedding_wgrad_ = false;  // defer_embedding_wgrad (Megatron-Core's --defer-embedding-wgrad-compute)
  int64_t wgrad_deferral_limit_ = 0;    // wgrad_deferral_limit; 0: every micro-batch of the step
  bool autocast_ = false;         // EagerLayer::adapter_autocast (autocast over 16-bit weights)
  double buffer_bytes_ = 0;  // 0: the layers' norm weights' dtype
  struct CastRange {
    int64_t begin = 0;  // first layer
    int64_t end = 0;    // one past the last
    double bytes = 0;   // one layer's
  };
  std::vector<CastRange> casts_;  // retime_cached_casts' scratch, kept between evaluations
  Attributes attributes_;
  memplan::support::LayoutReader layout_;
  Names names_;
  memplan_model model_{};              // the scenario's model, which no evaluation changes
  TransformerShape model_shape_;       // layer_shape(model_)
  std::optional<TransformerShape> dense_shape_;  // a MoE model's dense first layers, when it has any
};

}  // namespace

MEMPLAN_PLUGIN(MegatronActivations)
