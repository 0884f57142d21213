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
  if (auto v = reader.boolean("attention_sinks")) spec.attention_sinks = *v;
  if (auto v = reader.boolean("router_bias")) spec.router_bias = *v;
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

void validate_model(const ModelSpec& spec, const TomlReader& where) {
  const SourceLocation at = where.table_location();
  const std::string section = where.section();
  // Point at the scenario's own key when it has one (it may come from a preset).
  auto at_key = [&](std::string_view key) { return where.contains(key) ? where.value_location(key) : at; };
  if (!spec.has_architecture()) {
    if (spec.layers || spec.hidden || spec.heads || spec.vocab)
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
                             Bound{"position_embeddings", spec.position_embeddings, 100'000'000},
                             Bound{"type_vocab", spec.type_vocab, 100'000'000}, Bound{"experts", spec.experts, 1'000'000},
                             Bound{"expert_ffn_hidden", spec.expert_ffn_hidden, 100'000'000},
                             Bound{"sliding_window", spec.sliding_window, 1'000'000'000},
                             Bound{"max_context", spec.max_context, 1'000'000'000},
                             Bound{"layer_norms", spec.layer_norms, 64},
                             Bound{"shared_expert_ffn_hidden", spec.shared_expert_ffn_hidden, 100'000'000}})
    if (bound.value > bound.limit)
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
