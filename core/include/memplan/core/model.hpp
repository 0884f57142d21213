// The model architecture as a scenario or preset describes it, and its
// parameter inventory: the weight items every plan starts from.
#pragma once

#include <memplan/plugin_abi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "memplan/core/plan.hpp"

namespace memplan {

enum class MlpKind { gelu, swiglu };
// The MLP's activation function, where its form decides what autograd keeps:
// standard (GELU, SiLU, ReLU as one op, or a fused kernel) or gelu_new, the
// tanh approximation written as tensor ops (transformers' NewGELUActivation,
// hidden_act / activation_function "gelu_new": GPT-2, GPT-J, GPT-Neo, Phi-1/1.5/2,
// CodeGen), whose eager autograd keeps three more tensors of the MLP's width.
enum class MlpActivation { standard, gelu_new };
enum class NormKind { rmsnorm, layernorm };
// What the last layer's output feeds: a language-model head over the
// vocabulary (decoders), BERT's masked-LM prediction head (a dense layer, a
// norm and a vocabulary projection with a bias), or nothing (an encoder
// backbone such as transformers' BertModel).
enum class OutputHead { lm, mlm, none };
// Norms on the queries and keys before attention: none; one RMSNorm of
// head_dim shared by every head (Qwen3, Gemma 3: q_norm and k_norm of
// head_dim each); or one over the whole projection (OLMo 2: q_norm of
// heads x head_dim, k_norm of kv_heads x head_dim).
enum class QkNorm { none, head, full };

// The weight format a checkpoint's config.json declares (transformers'
// quantization_config), as far as memplan reads it. The core does not
// interpret the method: it publishes these facts to plugins as
// model.quantization.* attributes (memplan/conventions.h), and a precision
// plugin may take its format from them. Empty method: none declared.
struct WeightFormat {
  std::string method;          // quant_method, as written
  int64_t bits = 0;            // bits per value ("bits", AWQ's "w_bit"); 0: not given
  int64_t group_size = 0;      // elements per scale ("group_size", AWQ's "q_group_size"); -1: one per row; 0: not given
  int64_t block_elements = 0;  // elements per 2-D scale block (the product of weight_block_size); 0: not given
  std::string value_type;      // the values' type, when the config names one (bitsandbytes' bnb_4bit_quant_type)
  bool double_quant = false;   // the scales are quantized too (bitsandbytes' bnb_4bit_use_double_quant)
  std::string unquantized;     // the parts the config keeps unquantized (modules_to_not_convert, ignored_layers),
                               // comma-separated in the words of [[strategy]] freeze's `train`: attention, mlp,
                               // experts, router, embeddings, lm_head
};

struct ModelSpec {
  std::string preset;       // catalog name the spec came from, or empty
  std::string hf_config;    // the Hugging Face config.json the spec came from, or empty
  double params_only = 0;   // > 0 when only a parameter count is known
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;     // 0: same as heads (multi-head attention)
  int64_t head_dim = 0;     // 0: hidden / heads
  int64_t ffn_hidden = 0;
  int64_t vocab = 0;
  // The token embedding's width when it is narrower than the hidden size (OPT-350m's word_embed_proj_dim, 512
  // with hidden 1024): the embedding (and a tied LM head) is vocab x embedding_dim, and two linear layers
  // without bias, project_in (embedding_dim -> hidden) and project_out (hidden -> embedding_dim), carry the
  // hidden state in and out of the layers (transformers' OPTDecoder). 0, or equal to hidden: no projections.
  int64_t embedding_dim = 0;
  MlpKind mlp = MlpKind::swiglu;
  MlpActivation activation = MlpActivation::standard;  // the checkpoint's hidden_act where its form matters
  NormKind norm = NormKind::rmsnorm;
  bool tied_embeddings = false;
  bool qkv_bias = false;        // biases on q, k, v (GPT-2/3, Qwen2)
  bool output_bias = false;     // bias on the attention output projection (GPT-2/3)
  bool mlp_bias = false;        // biases on the MLP projections (GPT-2/3)
  int64_t position_embeddings = 0;  // learned absolute positions (GPT-2/3); 0 for rotary
  int64_t type_vocab = 0;           // token-type (segment) embeddings (BERT: 2); 0: none
  bool embedding_norm = false;      // a norm on the summed embeddings (BERT)
  bool final_norm = true;           // a norm after the last layer (pre-norm models); false for post-norm (BERT)
  bool pooler = false;              // BERT's pooler: a dense hidden x hidden layer with a bias on the first token
  OutputHead output_head = OutputHead::lm;
  int64_t experts = 0;              // MoE: experts per layer, 0 for dense
  int64_t experts_top_k = 0;
  int64_t expert_ffn_hidden = 0;
  int64_t sliding_window = 0;          // tokens a windowed layer attends to; 0: no windowed layers
  int64_t global_attention_every = 0;  // with a window: every Nth layer is global (hybrid models); 0: none
  int64_t max_context = 0;             // longest supported context (max_position_embeddings); 0: unknown
  QkNorm qk_norm = QkNorm::none;       // q/k norms (Qwen3, Gemma 3: per head; OLMo 2: full width)
  int64_t layer_norms = 2;             // norms of width h per layer (Gemma 2/3: 4, pre and post of each block)
  int64_t shared_expert_ffn_hidden = 0;  // MoE: a shared expert (gated MLP) every token passes, 0: none
  bool shared_expert_gate = false;       // a sigmoid gate h x 1 on the shared expert's output (Qwen2-MoE)
  bool router_bias = false;              // MoE: the router has a bias per expert (GptOssTopKRouter.bias,
                                         // DeepSeek-V3's e_score_correction_bias)
  int64_t mtp_layers = 0;                // multi-token-prediction modules (DeepSeek-V3's num_nextn_predict_layers,
                                         // a trainer's --mtp-num-layers): each a layer like the last one, after it
  int64_t dense_layers = 0;              // MoE: the first N layers have a dense MLP of ffn_hidden (DeepSeek's
                                         // first_k_dense_replace); 0: every layer routes
  // Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434, section 2.1),
  // on when kv_lora_rank > 0: keys and values are up-projected from a latent
  // of kv_lora_rank per token, which a down-projection of h x (kv_lora_rank +
  // qk_rope_head_dim) makes together with one rotary key all heads share;
  // queries come from a latent of q_lora_rank (0: projected from h directly).
  // head_dim is the q/k head width (no-rope part + qk_rope_head_dim), v_head_dim the values'.
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  std::string hf_note;                 // what reading the config left out, said as a warning (a vision tower)
  // gpt-oss (transformers' GptOssAttention, GptOssTopKRouter, GptOssExperts):
  bool attention_sinks = false;  // a learned sink logit per query head per layer (GptOssAttention.sinks)
  // Gemma 2's soft-capping (Gemma2Config attn_logit_softcapping, final_logit_softcapping): scores and logits
  // pass cap x tanh(x / cap); 0: none. Scalars, not weights: they change what training keeps (tanh's output).
  double attn_logit_softcapping = 0;
  double final_logit_softcapping = 0;
  // RMSNorm multiplies the normalized input by its weight in single precision before casting back (Gemma's
  // output * (1 + weight.float()), modeling_gemma.py GemmaRMSNorm): a trained norm keeps that 4-byte input.
  bool norm_scale_fp32 = false;
  bool expert_bias = false;      // MoE: each expert's projections have biases (gate_up 2 x f, down h)
  WeightFormat weight_format;    // the checkpoint's quantization_config, if its config.json declares one

  bool has_architecture() const { return params_only <= 0; }
  // The output layer reuses the token embedding (no head: nothing to share).
  bool shares_embedding() const { return tied_embeddings && output_head != OutputHead::none; }
  // The token embedding's width: embedding_dim when set, else hidden.
  int64_t effective_embedding_dim() const { return embedding_dim > 0 ? embedding_dim : hidden; }
  // The embedding is narrower than the hidden state: project_in and project_out exist.
  bool projects_embedding() const { return embedding_dim > 0 && embedding_dim != hidden; }
  int64_t effective_kv_heads() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t effective_head_dim() const { return head_dim > 0 ? head_dim : (heads > 0 ? hidden / heads : 0); }
  bool latent_attention() const { return kv_lora_rank > 0; }
  // The transformer layers the model computes: its own and the
  // multi-token-prediction modules' (layers L .. L + mtp_layers - 1).
  int64_t stacked_layers() const { return layers + mtp_layers; }
  // The value head width: v_head_dim under latent attention, else head_dim.
  int64_t effective_v_head_dim() const { return latent_attention() ? v_head_dim : effective_head_dim(); }
};

// The C view plugins read through the host table.
memplan_model to_abi_model(const ModelSpec& spec, double total_params);

// Parameter groups: embeddings (tokens, positions, token types, their norm,
// the projection into the layers of an embedding narrower than hidden),
// per-layer attention (GQA aware), MLP (gated or not) or MoE router and
// experts, norms, final norm, the projection out of the layers (with a
// narrower embedding), pooler, output head (the LM head is absent when
// tied). Identical layers are one item with count = layers. All items are
// weights, trainable, with bytes_per_element still 0 (precision sets it).
std::vector<PlanItem> parameter_inventory(const ModelSpec& spec);

// Total parameters of an inventory (elements * count of every item).
double count_parameters(const std::vector<PlanItem>& inventory);

}  // namespace memplan
