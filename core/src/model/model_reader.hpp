// Reads model keys from a scenario's [model] table or a preset file.
#pragma once

#include <array>
#include <string_view>

#include "memplan/core/model.hpp"
#include "common/toml_reader.hpp"

namespace memplan {

// The architecture keys a [model] table and a preset file share.
inline constexpr std::array<std::string_view, 42> kModelKeys = {
    "params", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab", "embedding_dim", "mlp", "norm",
    "tied_embeddings", "qkv_bias", "output_bias", "mlp_bias", "position_embeddings", "type_vocab",
    "embedding_norm", "final_norm", "pooler", "output_head", "moe", "sliding_window", "global_attention_every",
    "max_context", "qk_norm", "layer_norms", "shared_expert_ffn_hidden", "shared_expert_gate", "dense_layers",
    "attention_sinks", "router_bias", "expert_bias", "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim",
    "v_head_dim", "mtp_layers", "attn_logit_softcapping", "final_logit_softcapping",
    "norm_scale_fp32", "activation"};

// Applies every model key present in `reader`'s table to `spec` (so a
// scenario can override the keys a preset or a Hugging Face config gave).
void read_model_keys(const TomlReader& reader, const toml::table& table, ModelSpec& spec);

// Checks that `spec` describes a buildable model; errors point at `where`.
void validate_model(const ModelSpec& spec, const TomlReader& where);

}  // namespace memplan
