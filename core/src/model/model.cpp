#include "memplan/core/model.hpp"

namespace memplan {
namespace {

PlanItem weight(std::string_view name, int32_t param_class, int32_t layer, uint32_t count, double elements) {
  PlanItem item;
  item.set_name(name);
  item.role = MEMPLAN_ROLE_WEIGHTS;
  item.lifetime = MEMPLAN_LIFETIME_PERSISTENT;
  item.param_class = param_class;
  item.layer = layer;
  item.count = count;
  item.flags = MEMPLAN_ITEM_TRAINABLE;
  item.elements = elements;
  return item;
}

// Multi-head latent attention, as DeepSeek's reference model writes it
// (deepseek-ai/DeepSeek-V3 @ 9b4e978, inference/model.py, class MLA) and
// transformers' DeepseekV3Attention: wq_a (h x q_lora_rank) and its RMSNorm,
// wq_b (q_lora_rank x heads (nope + rope)), or wq (h x heads (nope + rope))
// without a query latent; wkv_a (h x (kv_lora_rank + rope)) and its RMSNorm
// of kv_lora_rank; wkv_b (kv_lora_rank x heads (nope + v)); wo (heads v x h).
// No biases. wq_a and wkv_a are plain Linear layers every rank of a
// Megatron-style layer split holds whole (class attention_latent); wq, wq_b
// and wkv_b are column-parallel, wo row-parallel (class attention).
void latent_attention_items(const ModelSpec& spec, std::vector<PlanItem>& items) {
  const auto layers = static_cast<uint32_t>(spec.stacked_layers());
  const double h = static_cast<double>(spec.hidden);
  const double heads = static_cast<double>(spec.heads);
  const double qk_head = static_cast<double>(spec.effective_head_dim());
  const double rope = static_cast<double>(spec.qk_rope_head_dim);
  const double nope = qk_head - rope;
  const double v_head = static_cast<double>(spec.v_head_dim);
  const double q_rank = static_cast<double>(spec.q_lora_rank);
  const double kv_rank = static_cast<double>(spec.kv_lora_rank);
  if (spec.q_lora_rank > 0) {
    items.push_back(weight("attn.q_a", MEMPLAN_CLASS_ATTENTION_LATENT, 0, layers, h * q_rank));
    items.push_back(weight("attn.q_a_norm", MEMPLAN_CLASS_NORM, 0, layers, q_rank));
    items.push_back(weight("attn.q_b", MEMPLAN_CLASS_ATTENTION, 0, layers, q_rank * heads * qk_head));
  } else {
    items.push_back(weight("attn.q", MEMPLAN_CLASS_ATTENTION, 0, layers, h * heads * qk_head));
  }
  items.push_back(weight("attn.kv_a", MEMPLAN_CLASS_ATTENTION_LATENT, 0, layers, h * (kv_rank + rope)));
  items.push_back(weight("attn.kv_a_norm", MEMPLAN_CLASS_NORM, 0, layers, kv_rank));
  items.push_back(weight("attn.kv_b", MEMPLAN_CLASS_ATTENTION, 0, layers, kv_rank * heads * (nope + v_head)));
  items.push_back(weight("attn.o", MEMPLAN_CLASS_ATTENTION, 0, layers, heads * v_head * h));
}

}  // namespace

memplan_model to_abi_model(const ModelSpec& spec, double total_params) {
  memplan_model model{};
  model.struct_size = sizeof model;
  model.has_architecture = spec.has_architecture() ? 1 : 0;
  model.params = total_params;
  model.layers = spec.stacked_layers();
  model.hidden = spec.hidden;
  model.heads = spec.heads;
  model.kv_heads = spec.effective_kv_heads();
  model.head_dim = spec.effective_head_dim();
  model.ffn_hidden = spec.ffn_hidden;
  model.vocab = spec.vocab;
  model.gated_mlp = spec.mlp == MlpKind::swiglu ? 1 : 0;
  // Layout plugins read "tied" as "the last pipeline stage holds a copy of the
  // token embedding"; an encoder without an output head has none to tie.
  model.tied_embeddings = spec.shares_embedding() ? 1 : 0;
  model.experts = spec.experts;
  model.experts_top_k = spec.experts_top_k;
  model.expert_ffn_hidden = spec.expert_ffn_hidden;
  model.sliding_window = spec.sliding_window;
  model.global_attention_every = spec.global_attention_every;
  model.max_context = spec.max_context;
  model.layer_norm = spec.norm == NormKind::layernorm ? 1 : 0;
  model.q_lora_rank = spec.q_lora_rank;
  model.kv_lora_rank = spec.kv_lora_rank;
  model.qk_rope_head_dim = spec.qk_rope_head_dim;
  model.v_head_dim = spec.latent_attention() ? spec.v_head_dim : 0;
  model.dense_layers = spec.dense_layers;
  model.shared_expert_ffn_hidden = spec.shared_expert_ffn_hidden;
  model.layer_norms = spec.layer_norms;
  model.attn_logit_softcapping = spec.attn_logit_softcapping;
  model.final_logit_softcapping = spec.final_logit_softcapping;
  model.norm_scale_fp32 = spec.norm_scale_fp32 ? 1 : 0;
  model.reserved_zero = 0;
  model.mlp_activation =
      spec.activation == MlpActivation::gelu_new ? MEMPLAN_ACTIVATION_GELU_NEW : MEMPLAN_ACTIVATION_STANDARD;
  model.reserved_zero2 = 0;
  return model;
}

std::vector<PlanItem> parameter_inventory(const ModelSpec& spec) {
  std::vector<PlanItem> items;
  if (!spec.has_architecture()) {
    items.push_back(weight("parameters", MEMPLAN_CLASS_OTHER, -1, 1, spec.params_only));
    return items;
  }
  const double h = static_cast<double>(spec.hidden);
  const double q_width = static_cast<double>(spec.heads * spec.effective_head_dim());
  const double kv_width = static_cast<double>(spec.effective_kv_heads() * spec.effective_head_dim());
  const double vocab = static_cast<double>(spec.vocab);
  const auto layers = static_cast<uint32_t>(spec.stacked_layers());
  // A LayerNorm has a scale and a shift per channel; an RMSNorm only a scale.
  const double norm = spec.norm == NormKind::layernorm ? 2 * h : h;

  // The token embedding is embedding_dim wide (hidden unless narrower: OPT-350m's word_embed_proj_dim).
  const double embedding = static_cast<double>(spec.effective_embedding_dim());
  items.push_back(weight("embed_tokens", MEMPLAN_CLASS_EMBEDDING, -1, 1, vocab * embedding));
  if (spec.position_embeddings > 0)
    items.push_back(weight("embed_positions", MEMPLAN_CLASS_POSITION_EMBEDDING, -1, 1,
                           static_cast<double>(spec.position_embeddings) * h));
  // Token-type (segment) embeddings are a small table like the positions:
  // replicated under tensor parallelism, on the first pipeline stage.
  if (spec.type_vocab > 0)
    items.push_back(weight("embed_token_types", MEMPLAN_CLASS_POSITION_EMBEDDING, -1, 1,
                           static_cast<double>(spec.type_vocab) * h));
  if (spec.embedding_norm) items.push_back(weight("embed_norm", MEMPLAN_CLASS_NORM, -1, 1, norm));
  // A narrower embedding enters the layers through project_in (embedding_dim x hidden, no bias;
  // transformers' OPTDecoder.project_in, added to the learned positions after it) and leaves them through
  // project_out (hidden x embedding_dim, no bias; after the final norm, before the LM head). Class other: a
  // plain linear layer that tensor parallelism does not split (replicated, as serving engines hold OPT's),
  // that no `quantize` or `train` part names, and that pipeline parallelism keeps on every stage (no class
  // says "first" or "last stage" for a linear layer; at most hidden^2 elements each).
  if (spec.projects_embedding())
    items.push_back(weight("project_in", MEMPLAN_CLASS_OTHER, -1, 1, embedding * h));

  if (spec.latent_attention()) {
    latent_attention_items(spec, items);
  } else {
    const double qkv_bias = spec.qkv_bias ? 1 : 0;
    items.push_back(weight("attn.q", MEMPLAN_CLASS_ATTENTION, 0, layers, h * q_width + qkv_bias * q_width));
    items.push_back(weight("attn.k", MEMPLAN_CLASS_ATTENTION_KV, 0, layers, h * kv_width + qkv_bias * kv_width));
    items.push_back(weight("attn.v", MEMPLAN_CLASS_ATTENTION_KV, 0, layers, h * kv_width + qkv_bias * kv_width));
    items.push_back(weight("attn.o", MEMPLAN_CLASS_ATTENTION, 0, layers, q_width * h + (spec.output_bias ? h : 0)));
  }
  // gpt-oss's attention sinks: one learned logit per query head
  // (GptOssAttention.sinks), split with the heads under tensor parallelism.
  if (spec.attention_sinks)
    items.push_back(weight("attn.sinks", MEMPLAN_CLASS_ATTENTION, 0, layers, static_cast<double>(spec.heads)));
  // q/k RMSNorms (scale only): Qwen3 and Gemma 3 share one of head_dim across
  // the heads (q_norm + k_norm = 2 x head_dim); OLMo 2 norms the whole q and k
  // projections (q_width + kv_width).
  if (spec.qk_norm == QkNorm::head)
    items.push_back(weight("attn.qk_norm", MEMPLAN_CLASS_NORM, 0, layers,
                           2 * static_cast<double>(spec.effective_head_dim())));
  else if (spec.qk_norm == QkNorm::full)
    items.push_back(weight("attn.qk_norm", MEMPLAN_CLASS_NORM, 0, layers, q_width + kv_width));

  // Gated MLPs (SwiGLU, Shazeer 2020) have gate, up and down projections;
  // plain MLPs (GELU) have up and down.
  const double projections = spec.mlp == MlpKind::swiglu ? 3 : 2;
  if (spec.experts > 0) {
    const double experts = static_cast<double>(spec.experts);
    const double f = static_cast<double>(spec.expert_ffn_hidden);
    // DeepSeek's first_k_dense_replace: the first layers keep a dense MLP;
    // the MoE items start after them (layer = the first MoE layer).
    const auto dense = static_cast<uint32_t>(spec.dense_layers);
    const auto routed = static_cast<uint32_t>(spec.stacked_layers() - spec.dense_layers);
    const auto first_routed = static_cast<int32_t>(spec.dense_layers);
    if (dense > 0)
      items.push_back(weight("mlp", MEMPLAN_CLASS_MLP, 0, dense, projections * h * static_cast<double>(spec.ffn_hidden)));
    items.push_back(weight("moe.router", MEMPLAN_CLASS_ROUTER, first_routed, routed,
                           h * experts + (spec.router_bias ? experts : 0)));
    items.push_back(weight("moe.experts", MEMPLAN_CLASS_EXPERT, first_routed, routed, experts * projections * h * f));
    // gpt-oss's expert biases (GptOssExperts.gate_up_proj_bias, E x 2f, and
    // down_proj_bias, E x h): with the experts, an item of their own because
    // checkpoints keep them unquantized beside quantized expert weights.
    if (spec.expert_bias)
      items.push_back(weight("moe.experts_bias", MEMPLAN_CLASS_EXPERT, first_routed, routed,
                             experts * ((projections - 1) * f + h)));
    // A shared expert every token passes (Qwen2-MoE; DeepSeek's n_shared_experts
    // as one MLP of their summed width): a gated MLP of its own width, sharded
    // like a dense MLP, and Qwen2-MoE's sigmoid gate (h x 1, no bias).
    if (spec.shared_expert_ffn_hidden > 0)
      items.push_back(weight("moe.shared_expert", MEMPLAN_CLASS_MLP, first_routed, routed,
                             projections * h * static_cast<double>(spec.shared_expert_ffn_hidden)));
    if (spec.shared_expert_gate)
      items.push_back(weight("moe.shared_expert_gate", MEMPLAN_CLASS_ROUTER, first_routed, routed, h));
  } else {
    const double f = static_cast<double>(spec.ffn_hidden);
    const double bias = spec.mlp_bias ? (projections - 1) * f + h : 0;
    items.push_back(weight("mlp", MEMPLAN_CLASS_MLP, 0, layers, projections * h * f + bias));
  }
  items.push_back(weight("norms", MEMPLAN_CLASS_NORM, 0, layers, static_cast<double>(spec.layer_norms) * norm));
  // Each multi-token-prediction module (DeepSeek-V3 report, arXiv 2412.19437,
  // section 2.2; README_WEIGHTS.md; NVIDIA's MultiTokenPredictionLayer)
  // adds to its transformer layer the projection of the concatenated normed
  // hidden state and embedding, eh_proj (2h x h), the norms enorm and hnorm,
  // and the norm before the shared output head; the embedding and the head
  // are the main model's.
  if (spec.mtp_layers > 0) {
    const auto first = static_cast<int32_t>(spec.layers);
    const auto modules = static_cast<uint32_t>(spec.mtp_layers);
    items.push_back(weight("mtp.eh_proj", MEMPLAN_CLASS_MLP, first, modules, 2 * h * h));
    items.push_back(weight("mtp.norms", MEMPLAN_CLASS_NORM, first, modules, 3 * norm));
  }
  if (spec.final_norm) items.push_back(weight("final_norm", MEMPLAN_CLASS_FINAL_NORM, -1, 1, norm));
  if (spec.projects_embedding())
    items.push_back(weight("project_out", MEMPLAN_CLASS_OTHER, -1, 1, h * embedding));
  // BERT's pooler: dense h x h with a bias, applied to the first token.
  if (spec.pooler) items.push_back(weight("pooler", MEMPLAN_CLASS_OTHER, -1, 1, h * h + h));
  switch (spec.output_head) {
    case OutputHead::lm:
      // The head reads the projected hidden state: embedding_dim wide (hidden without a projection).
      if (!spec.tied_embeddings) items.push_back(weight("lm_head", MEMPLAN_CLASS_LM_HEAD, -1, 1, embedding * vocab));
      break;
    case OutputHead::mlm:
      // BERT's masked-LM head (transformers' BertLMPredictionHead): a dense
      // h x h transform with a bias, a norm, then the vocabulary projection
      // with a bias of V (its weight tied to the token embedding or not).
      items.push_back(weight("mlm_head.transform", MEMPLAN_CLASS_OTHER, -1, 1, h * h + h));
      items.push_back(weight("mlm_head.norm", MEMPLAN_CLASS_FINAL_NORM, -1, 1, norm));  // with the head
      if (spec.tied_embeddings)
        items.push_back(weight("lm_head.bias", MEMPLAN_CLASS_LM_HEAD, -1, 1, vocab));
      else
        items.push_back(weight("lm_head", MEMPLAN_CLASS_LM_HEAD, -1, 1, h * vocab + vocab));
      break;
    case OutputHead::none: break;
  }
  return items;
}

double count_parameters(const std::vector<PlanItem>& inventory) {
  double total = 0;
  for (const PlanItem& item : inventory) total += item.elements * item.count;
  return total;
}

}  // namespace memplan
