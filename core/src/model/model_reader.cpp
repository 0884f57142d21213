#include "model/model_reader.hpp"

#include <cstdio>
#include <utility>

namespace memplan {

void read_model_keys(const TomlReader& reader, const toml::table& table, ModelSpec& spec) {
  if (auto v = reader.positive_number("params")) spec.params_only = *v;
  if (auto v = reader.positive_integer("layers")) spec.layers = *v;
  if (auto v = reader.positive_integer("hidden")) spec.hidden = *v;
  if (auto v = reader.positive_integer("heads")) spec.heads = *v;
  if (auto v = reader.positive_integer("kv_heads")) spec.kv_heads = *v;
  if (auto v = reader.positive_integer("head_dim")) spec.head_dim = *v;
  if (auto v = reader.positive_integer("ffn_hidden")) spec.ffn_hidden = *v;
  if (auto v = reader.positive_integer("vocab")) spec.vocab = *v;
  if (auto v = reader.choice("mlp", {"swiglu", "gelu"})) spec.mlp = *v == "swiglu" ? MlpKind::swiglu : MlpKind::gelu;
  // The checkpoint's hidden_act where its form matters (MlpActivation); the other names are accepted as written.
  if (auto v = reader.choice("activation", {"gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "relu", "silu"}))
    spec.activation = *v == "gelu_new" ? MlpActivation::gelu_new : MlpActivation::standard;
  if (auto v = reader.choice("norm", {"rmsnorm", "layernorm"}))
    spec.norm = *v == "rmsnorm" ? NormKind::rmsnorm : NormKind::layernorm;
  if (auto v = reader.boolean("tied_embeddings")) spec.tied_embeddings = *v;
  if (auto v = reader.boolean("qkv_bias")) spec.qkv_bias = *v;
  if (auto v = reader.boolean("output_bias")) spec.output_bias = *v;
  if (auto v = reader.boolean("mlp_bias")) spec.mlp_bias = *v;
  if (auto v = reader.integer("position_embeddings")) {
    if (*v < 0) reader.fail_key("position_embeddings", "must be zero or positive");
    spec.position_embeddings = *v;
  }
  if (auto v = reader.integer("type_vocab")) {
    if (*v < 0) reader.fail_key("type_vocab", "must be zero or positive");
    spec.type_vocab = *v;
  }
  if (auto v = reader.boolean("embedding_norm")) spec.embedding_norm = *v;
  if (auto v = reader.boolean("final_norm")) spec.final_norm = *v;
  if (auto v = reader.boolean("pooler")) spec.pooler = *v;
  if (auto v = reader.choice("output_head", {"lm", "mlm", "none"}))
    spec.output_head = *v == "lm" ? OutputHead::lm : *v == "mlm" ? OutputHead::mlm : OutputHead::none;
  if (auto v = reader.positive_integer("sliding_window")) spec.sliding_window = *v;
  if (auto v = reader.positive_integer("global_attention_every")) spec.global_attention_every = *v;
  if (auto v = reader.positive_integer("max_context")) spec.max_context = *v;
  if (auto v = reader.choice("qk_norm", {"none", "head", "projection"}))
    spec.qk_norm = *v == "head" ? QkNorm::head : *v == "projection" ? QkNorm::full : QkNorm::none;
  if (auto v = reader.positive_integer("layer_norms")) spec.layer_norms = *v;
  if (auto v = reader.integer("shared_expert_ffn_hidden")) {
    if (*v < 0) reader.fail_key("shared_expert_ffn_hidden", "must be zero (no shared expert) or positive");
    spec.shared_expert_ffn_hidden = *v;
  }
  if (auto v = reader.boolean("shared_expert_gate")) spec.shared_expert_gate = *v;
  if (auto v = reader.boolean("router_bias")) spec.router_bias = *v;
  // Zero switches a feature a preset or a config gave off again.
  auto non_negative = [&](std::string_view key, std::string_view zero_means, int64_t& field) {
    if (auto v = reader.integer(key)) {
      if (*v < 0) reader.fail_key(key, "must be zero (" + std::string(zero_means) + ") or positive");
      field = *v;
    }
  };
  non_negative("embedding_dim", "the token embedding as wide as hidden", spec.embedding_dim);
  non_negative("dense_layers", "every layer routes to experts", spec.dense_layers);
  non_negative("mtp_layers", "no multi-token-prediction module", spec.mtp_layers);
  non_negative("q_lora_rank", "queries projected from the hidden state directly", spec.q_lora_rank);
  non_negative("kv_lora_rank", "no latent attention", spec.kv_lora_rank);
  non_negative("qk_rope_head_dim", "no latent attention", spec.qk_rope_head_dim);
  non_negative("v_head_dim", "no latent attention", spec.v_head_dim);
  if (auto v = reader.boolean("attention_sinks")) spec.attention_sinks = *v;
  if (auto v = reader.boolean("norm_scale_fp32")) spec.norm_scale_fp32 = *v;
  for (auto [key, field] : {std::pair{"attn_logit_softcapping", &spec.attn_logit_softcapping},
                            std::pair{"final_logit_softcapping", &spec.final_logit_softcapping}})
    if (auto v = reader.number(key)) {
      if (!(*v >= 0) || *v > 1e6) reader.fail_key(key, "must be zero (no soft-capping) or a positive cap up to 1e6");
      *field = *v;
    }
  if (auto v = reader.boolean("expert_bias")) spec.expert_bias = *v;
  if (const toml::node* moe = table.get("moe")) {
    if (!moe->is_table()) reader.fail_key("moe", "must be a table ([model.moe])");
    TomlReader moe_reader(*moe->as_table(), reader.file(), reader.section() + " moe");
    moe_reader.reject_unknown_keys({"experts", "top_k", "expert_ffn_hidden"});
    if (auto v = moe_reader.positive_integer("experts")) spec.experts = *v;
    if (auto v = moe_reader.positive_integer("top_k")) spec.experts_top_k = *v;
    if (auto v = moe_reader.positive_integer("expert_ffn_hidden")) spec.expert_ffn_hidden = *v;
  }
}

namespace {

// Multi-head latent attention: kv_lora_rank turns it on and needs the rope
// and value head widths and an explicit q/k head width above the rope part.
template <typename AtKey>
void validate_latent_attention(const ModelSpec& spec, const std::string& section, const AtKey& at_key) {
  if (!spec.latent_attention()) {
    for (const auto& [key, value] : {std::pair<const char*, int64_t>{"q_lora_rank", spec.q_lora_rank},
                                     {"qk_rope_head_dim", spec.qk_rope_head_dim}, {"v_head_dim", spec.v_head_dim}})
      if (value > 0)
        fail_at(at_key(key), section + ": '" + key + "' belongs to multi-head latent attention, which "
                                 "'kv_lora_rank' turns on; add 'kv_lora_rank', or set '" + key + "' to 0");
    return;
  }
  if (spec.qk_rope_head_dim == 0 || spec.v_head_dim == 0 || spec.head_dim == 0)
    fail_at(at_key("kv_lora_rank"), section + ": multi-head latent attention (kv_lora_rank) needs 'head_dim' (the q/k "
                                              "head width, no-rope part plus rope part), 'qk_rope_head_dim' and "
                                              "'v_head_dim'");
  if (spec.qk_rope_head_dim >= spec.head_dim)
    fail_at(at_key("qk_rope_head_dim"), section + ": qk_rope_head_dim " + std::to_string(spec.qk_rope_head_dim) +
                                            " must be below head_dim " + std::to_string(spec.head_dim) +
                                            " (head_dim = qk_nope_head_dim + qk_rope_head_dim)");
  if (spec.kv_heads > 0 && spec.kv_heads != spec.heads)
    fail_at(at_key("kv_heads"), section + ": latent attention up-projects keys and values for every head; kv_heads " +
                                    std::to_string(spec.kv_heads) + " must equal heads " + std::to_string(spec.heads) +
                                    " or be left out");
  if (spec.norm == NormKind::layernorm)
    fail_at(at_key("norm"), section + ": latent attention as modelled normalises its latents with RMSNorm "
                                      "(DeepSeek-V2/V3); set norm = \"rmsnorm\"");
  if (spec.qkv_bias || spec.output_bias || spec.qk_norm != QkNorm::none)
    fail_at(at_key("kv_lora_rank"), section + ": latent attention as modelled has no q/k/v or output biases and no "
                                              "q/k norms (DeepSeek-V2/V3 have none); remove 'qkv_bias', "
                                              "'output_bias' or 'qk_norm'");
}

// A token embedding narrower than the hidden state (OPT-350m): projected in
// and out of the layers, read back by a language-model head.
template <typename AtKey>
void validate_embedding_dim(const ModelSpec& spec, const std::string& section, const AtKey& at_key) {
  if (!spec.projects_embedding()) return;
  const std::string value = "embedding_dim " + std::to_string(spec.embedding_dim);
  if (spec.embedding_dim > spec.hidden)
    fail_at(at_key("embedding_dim"), section + ": " + value + " is wider than hidden " + std::to_string(spec.hidden) +
                                         "; it gives a token embedding narrower than the hidden state (OPT-350m: "
                                         "512 with hidden 1024): lower it, or set it to 0 (as wide as hidden)");
  if (spec.output_head != OutputHead::lm)
    fail_at(at_key("embedding_dim"), section + ": " + value + " needs output_head = \"lm\" (the language-model head "
                                         "reads the projected hidden state back at the embedding's width); set "
                                         "embedding_dim to 0 for an encoder or a masked-LM head");
  if (spec.mtp_layers > 0)
    fail_at(at_key("embedding_dim"), section + ": " + value + " with mtp_layers is not modelled (a multi-token-"
                                         "prediction module projects the hidden-wide embedding); set one of them "
                                         "to 0");
}

}  // namespace

void validate_model(const ModelSpec& spec, const TomlReader& where) {
  const SourceLocation at = where.table_location();
  const std::string section = where.section();
  // Point at the scenario's own key when it has one (it may come from a preset).
  auto at_key = [&](std::string_view key) { return where.contains(key) ? where.value_location(key) : at; };
  if (!spec.has_architecture()) {
    if (spec.layers || spec.hidden || spec.heads || spec.vocab || spec.embedding_dim)
      fail_at(at, section + " gives both 'params' and architecture keys; give one or the other (a preset or an "
                            "hf_config counts as architecture)");
    return;
  }
  // Bounds far above any real model keep every product below in exact range
  // (no wrapped or negative sizes): each dimension, and the parameter total.
  struct Bound {
    const char* key;
    int64_t value;
    int64_t limit;
  };
  for (const Bound& bound : {Bound{"layers", spec.layers, 1'000'000}, Bound{"hidden", spec.hidden, 10'000'000},
                             Bound{"heads", spec.heads, 1'000'000}, Bound{"kv_heads", spec.kv_heads, 1'000'000},
                             Bound{"head_dim", spec.head_dim, 1'000'000}, Bound{"ffn_hidden", spec.ffn_hidden, 100'000'000},
                             Bound{"vocab", spec.vocab, 100'000'000},
                             Bound{"embedding_dim", spec.embedding_dim, 10'000'000},
                             Bound{"position_embeddings", spec.position_embeddings, 100'000'000},
                             Bound{"type_vocab", spec.type_vocab, 100'000'000}, Bound{"experts", spec.experts, 1'000'000},
                             Bound{"expert_ffn_hidden", spec.expert_ffn_hidden, 100'000'000},
                             Bound{"sliding_window", spec.sliding_window, 1'000'000'000},
                             Bound{"max_context", spec.max_context, 1'000'000'000},
                             Bound{"layer_norms", spec.layer_norms, 64},
                             Bound{"shared_expert_ffn_hidden", spec.shared_expert_ffn_hidden, 100'000'000},
                             Bound{"dense_layers", spec.dense_layers, 1'000'000},
                             Bound{"mtp_layers", spec.mtp_layers, 1'000},
                             Bound{"q_lora_rank", spec.q_lora_rank, 10'000'000},
                             Bound{"kv_lora_rank", spec.kv_lora_rank, 10'000'000},
                             Bound{"qk_rope_head_dim", spec.qk_rope_head_dim, 1'000'000},
                             Bound{"v_head_dim", spec.v_head_dim, 1'000'000}})
    if (bound.value < 0)
      fail_at(at_key(bound.key), section + ": '" + bound.key + "' = " + std::to_string(bound.value) +
                                     " is negative; check the number");
    else if (bound.value > bound.limit)
      fail_at(at_key(bound.key), section + ": '" + bound.key + "' = " + std::to_string(bound.value) +
                                     " is implausibly large (the limit is " + std::to_string(bound.limit) +
                                     "); check the number");
  const char* required[] = {"layers", "hidden", "heads", "vocab"};
  const int64_t values[] = {spec.layers, spec.hidden, spec.heads, spec.vocab};
  for (size_t i = 0; i < 4; ++i)
    if (values[i] == 0)
      fail_at(at, section + " needs '" + required[i] +
                      "' (or a 'preset' or an 'hf_config', or only 'params' when the architecture is "
                      "unknown)");
  if (spec.experts == 0 && spec.ffn_hidden == 0)
    fail_at(at, section + " needs 'ffn_hidden' (the MLP's inner width)");
  if (spec.head_dim == 0 && spec.hidden % spec.heads != 0)
    fail_at(at_key("heads"), section + ": hidden " + std::to_string(spec.hidden) + " is not divisible by heads " +
                    std::to_string(spec.heads) + "; set 'head_dim' explicitly");
  if (spec.heads % spec.effective_kv_heads() != 0)
    fail_at(at_key("kv_heads"), section + ": heads " + std::to_string(spec.heads) + " is not a multiple of kv_heads " +
                    std::to_string(spec.kv_heads) + " (grouped-query attention shares each kv head among a whole "
                    "number of query heads)");
  if (spec.experts > 0) {
    if (spec.experts_top_k == 0 || spec.expert_ffn_hidden == 0)
      fail_at(at, section + " moe needs 'experts', 'top_k' and 'expert_ffn_hidden'");
    if (spec.experts_top_k > spec.experts)
      fail_at(at_key("moe"), section + " moe: top_k " + std::to_string(spec.experts_top_k) + " exceeds experts " +
                      std::to_string(spec.experts));
  } else if (spec.experts_top_k || spec.expert_ffn_hidden) {
    fail_at(at, section + " moe needs 'experts'");
  }
  if ((spec.shared_expert_ffn_hidden > 0 || spec.shared_expert_gate) && spec.experts == 0)
    fail_at(at_key(spec.shared_expert_ffn_hidden > 0 ? "shared_expert_ffn_hidden" : "shared_expert_gate"),
            section + ": a shared expert belongs to a mixture of experts; add [model.moe] or remove it");
  if (spec.shared_expert_gate && spec.shared_expert_ffn_hidden == 0)
    fail_at(at_key("shared_expert_gate"), section + ": 'shared_expert_gate' needs 'shared_expert_ffn_hidden' (the "
                                                    "shared expert it gates)");
  if (spec.dense_layers > 0) {
    if (spec.experts == 0)
      fail_at(at_key("dense_layers"), section + ": 'dense_layers' (the first layers' dense MLP) belongs to a mixture "
                                                "of experts; add [model.moe] or remove it");
    if (spec.dense_layers >= spec.layers)
      fail_at(at_key("dense_layers"), section + ": dense_layers " + std::to_string(spec.dense_layers) +
                                          " must be below layers " + std::to_string(spec.layers) +
                                          " (at least one layer routes to experts)");
    if (spec.ffn_hidden == 0)
      fail_at(at_key("dense_layers"), section + ": 'dense_layers' needs 'ffn_hidden' (the dense layers' MLP width)");
  }
  validate_latent_attention(spec, section, at_key);
  validate_embedding_dim(spec, section, at_key);
  for (const auto& [key, set] : {std::pair{"router_bias", spec.router_bias}, std::pair{"expert_bias", spec.expert_bias}})
    if (set && spec.experts == 0)
      fail_at(at_key(key), section + ": '" + key + "' is a bias of a mixture of experts (the router's, or each "
                                     "expert's projections'); add [model.moe] or set it to false");
  if (spec.global_attention_every > 0 && spec.sliding_window == 0)
    fail_at(at_key("global_attention_every"), section + ": 'global_attention_every' needs 'sliding_window' (the "
                                                        "other layers' window)");
  const double total = count_parameters(parameter_inventory(spec));
  if (!(total <= 1e15)) {
    char count[32];
    std::snprintf(count, sizeof count, "%.3g", total);
    fail_at(at, section + " describes " + count + " parameters, more than 10^15; check the dimensions");
  }
}

}  // namespace memplan
