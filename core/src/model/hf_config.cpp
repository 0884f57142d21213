#include "model/hf_config.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "memplan/core/error.hpp"
#include "memplan/core/text.hpp"

namespace memplan {
namespace {

using nlohmann::json;

constexpr std::array<std::string_view, 22> kModelTypes = {
    "bert",   "deepseek_v2", "deepseek_v3", "gemma",     "gemma2",    "gemma3", "gemma3_text",
    "gpt2",   "gpt_oss",     "llama",       "llama4",    "llama4_text", "mistral", "mixtral",
    "olmo2",  "olmo3",       "opt",         "phi3",      "qwen2",     "qwen2_moe", "qwen3",  "qwen3_moe"};

// "the string \"4096\"", "null", ... for messages.
std::string describe(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return std::string("the boolean ") + (value.get<bool>() ? "true" : "false");
    case json::value_t::string: return "the string " + value.dump();
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "the integer " + value.dump();
    case json::value_t::number_float: return "the number " + value.dump();
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    default: return "a binary value";
  }
}

// Typed reads of the config's top-level fields. Fields that size weights are
// required; switches fall back to transformers' defaults (passed by the
// caller). A field written as null counts as absent, as transformers reads it.
class ConfigReader {
 public:
  ConfigReader(const json& root, const std::string& path) : root_(root), path_(path) {}

  void set_model_type(std::string model_type) { model_type_ = std::move(model_type); }

  [[noreturn]] void fail(const std::string& message) const {
    fail_at(SourceLocation{path_, 0, 0}, "Hugging Face config: " + message);
  }

  const json* find(std::string_view key) const {
    auto it = root_.find(std::string(key));
    if (it == root_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  [[noreturn]] void missing(std::string_view key, std::string_view meaning) const {
    fail("\"" + std::string(key) + "\" is missing (" + std::string(meaning) + "; model_type \"" + model_type_ +
         "\" needs it); add it to the file");
  }

  [[noreturn]] void mistyped(std::string_view key, std::string_view expected, const json& value) const {
    fail("\"" + std::string(key) + "\" must be " + std::string(expected) + ", not " + describe(value) +
         "; correct it in the file");
  }

  bool present(std::string_view key) const { return root_.find(std::string(key)) != root_.end(); }

  // An integer >= `minimum` (1 or 0), or absent.
  std::optional<int64_t> integer(std::string_view key, int64_t minimum = 1) const {
    const json* value = find(key);
    if (value == nullptr) return std::nullopt;
    constexpr auto kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    if (value->is_number_unsigned()) {
      const uint64_t v = value->get<uint64_t>();
      if (v <= kMax && static_cast<int64_t>(v) >= minimum) return static_cast<int64_t>(v);
    } else if (value->is_number_integer() && value->get<int64_t>() >= minimum) {
      return value->get<int64_t>();
    }
    mistyped(key, minimum >= 1 ? "a positive integer" : "an integer >= 0", *value);
  }
  std::optional<int64_t> positive(std::string_view key) const { return integer(key, 1); }

  int64_t required(std::string_view key, std::string_view meaning) const {
    if (auto v = positive(key)) return *v;
    if (present(key)) mistyped(key, "a positive integer", root_.at(std::string(key)));  // null
    missing(key, meaning);
  }

  // A number >= 0 (integer or float), or absent (null too).
  std::optional<double> non_negative_number(std::string_view key) const {
    const json* value = find(key);
    if (value == nullptr) return std::nullopt;
    if (!value->is_number() || !(value->get<double>() >= 0)) mistyped(key, "a number >= 0", *value);
    return value->get<double>();
  }

  std::optional<bool> boolean(std::string_view key) const {
    const json* value = find(key);
    if (value == nullptr) return std::nullopt;
    if (!value->is_boolean()) mistyped(key, "true or false", *value);
    return value->get<bool>();
  }

  // A JSON array, or absent; its length.
  std::optional<size_t> array_size(std::string_view key) const {
    const json* value = find(key);
    if (value == nullptr) return std::nullopt;
    if (!value->is_array()) mistyped(key, "an array", *value);
    return value->size();
  }

  // A nested object (a multimodal config's text_config), or absent.
  const json* object(std::string_view key) const {
    const json* value = find(key);
    if (value != nullptr && !value->is_object()) mistyped(key, "an object", *value);
    return value;
  }

  std::optional<std::string> string(std::string_view key) const {
    const json* value = find(key);
    if (value == nullptr) return std::nullopt;
    if (!value->is_string()) mistyped(key, "a string", *value);
    return value->get<std::string>();
  }

 private:
  const json& root_;
  const std::string& path_;
  std::string model_type_;
};

// "parse error at line 3, column 5: syntax error ..." -> line, column and the
// part after the position; the whole text when it has no position.
[[noreturn]] void fail_parse(const std::string& path, const json::parse_error& error) {
  std::string what = error.what();
  SourceLocation where{path, 0, 0};
  const std::string marker = "parse error at line ";
  if (auto at = what.find(marker); at != std::string::npos) {
    unsigned line = 0, column = 0;
    int consumed = 0;
    if (std::sscanf(what.c_str() + at + marker.size(), "%u, column %u: %n", &line, &column, &consumed) == 2 &&
        consumed > 0) {
      where.line = line;
      where.column = column;
      what = what.substr(at + marker.size() + static_cast<size_t>(consumed));
    }
  } else if (auto colon = what.find("] "); colon != std::string::npos) {
    what = what.substr(colon + 2);  // drop "[json.exception.parse_error.N] "
  }
  fail_at(where, "invalid JSON in the Hugging Face config: " + what);
}

// The JSON library's other parse failure: a number beyond a double's range
// (out_of_range.406, "number overflow parsing '1e400'"), in any field, read or
// not. Its message has no position: the number's first occurrence gives one.
[[noreturn]] void fail_number(const std::string& path, std::string_view text, const json::exception& error) {
  std::string what = error.what();
  if (auto colon = what.find("] "); colon != std::string::npos) what = what.substr(colon + 2);
  SourceLocation where{path, 0, 0};
  const size_t open = what.find('\''), close = what.rfind('\'');
  if (open != std::string::npos && close > open + 1) {
    const std::string number = what.substr(open + 1, close - open - 1);
    if (const size_t at = text.find(number); at != std::string_view::npos) {
      where.line = 1;
      where.column = 1;
      for (size_t i = 0; i < at; ++i) {
        if (text[i] == '\n') {
          ++where.line;
          where.column = 1;
        } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
          ++where.column;
        }
      }
    }
  }
  fail_at(where, "invalid JSON in the Hugging Face config: " + what +
                     " (beyond the range of a double); correct the number, even in a field memplan does not read");
}

// Qwen2's (and Qwen2-MoE's, Qwen3's, Qwen3-MoE's) sliding window:
// transformers windows the layers from max_window_layers on (default 28).
void read_qwen_window(const ConfigReader& config, ModelSpec& spec) {
  if (!config.boolean("use_sliding_window").value_or(false)) return;
  const int64_t window = config.required("sliding_window", "the attention window in tokens");
  const int64_t from = config.integer("max_window_layers", 0).value_or(28);
  if (from == 0)
    spec.sliding_window = window;
  else if (from < spec.layers)
    config.fail("\"use_sliding_window\" is true with \"max_window_layers\" " + std::to_string(from) + " of " +
                std::to_string(spec.layers) +
                " layers: only the layers from there on are windowed, which memplan cannot model (it windows "
                "every layer, or all but every Nth); set \"max_window_layers\" to 0 to window every layer, or "
                "\"use_sliding_window\" to false to count every layer as global");
}

// Qwen MoE configs can keep some layers dense (decoder_sparse_step > 1, or
// mlp_only_layers); memplan's layers are all alike, so that is an error.
void require_all_sparse(const ConfigReader& config) {
  if (const auto step = config.positive("decoder_sparse_step"); step && *step != 1)
    config.fail("\"decoder_sparse_step\" is " + std::to_string(*step) +
                ": only every Nth layer is a MoE layer, which memplan cannot model (its layers are all alike); "
                "set it to 1, or describe the model with [model] keys instead of hf_config");
  if (const auto dense = config.array_size("mlp_only_layers"); dense && *dense > 0)
    config.fail("\"mlp_only_layers\" lists " + std::to_string(*dense) +
                " dense layers, which memplan cannot model (its layers are all alike); empty the list, or "
                "describe the model with [model] keys instead of hf_config");
}

// What the RMSNorm decoders with a gated MLP (Llama and the families after
// it) write alike in their configs: the sizes, the kv heads (the query heads
// when absent, or required where the family's default belongs to its default
// model), head_dim (the family's default), tie_word_embeddings,
// max_position_embeddings and, unless the family reads it its own way,
// attention_bias on q, k, v and o.
struct DecoderDefaults {
  bool kv_heads_required = false;
  int64_t head_dim = 0;  // 0: hidden / heads
  bool tied = false;
  std::optional<bool> attention_bias = false;  // nullopt: the family reads it itself
};

void read_gated_decoder(const ConfigReader& config, ModelSpec& spec, const DecoderDefaults& defaults) {
  spec.layers = config.required("num_hidden_layers", "the number of layers");
  spec.hidden = config.required("hidden_size", "the hidden size");
  spec.heads = config.required("num_attention_heads", "the number of attention heads");
  spec.kv_heads = defaults.kv_heads_required ? config.required("num_key_value_heads", "the key/value heads")
                                             : config.positive("num_key_value_heads").value_or(spec.heads);
  spec.head_dim = config.positive("head_dim").value_or(defaults.head_dim);
  spec.vocab = config.required("vocab_size", "the vocabulary size");
  spec.mlp = MlpKind::swiglu;  // gate, up and down projections whatever the activation is
  spec.norm = NormKind::rmsnorm;
  config.string("hidden_act");
  spec.tied_embeddings = config.boolean("tie_word_embeddings").value_or(defaults.tied);
  spec.max_context = config.positive("max_position_embeddings").value_or(0);
  if (defaults.attention_bias)
    spec.qkv_bias = spec.output_bias = config.boolean("attention_bias").value_or(*defaults.attention_bias);
}

// Llama and its relatives: pre-norm RMSNorm decoders with a gated (SwiGLU)
// MLP, rotary positions and grouped-query attention. Qwen3 adds per-head q/k
// norms, Phi-3 fuses qkv_proj and gate_up_proj (the same weights as separate projections), the MoE types
// route to experts of their own width (Qwen2-MoE with a shared expert).
void read_llama_family(const ConfigReader& config, const std::string& type, ModelSpec& spec) {
  read_gated_decoder(config, spec, {.attention_bias = std::nullopt});  // biases per type, below
  const bool moe = type == "mixtral" || type == "qwen2_moe" || type == "qwen3_moe";
  // The MoE Qwens read the expert width from moe_intermediate_size;
  // intermediate_size is then the width of dense layers, which they lack.
  const int64_t ffn = type == "qwen2_moe" || type == "qwen3_moe"
                          ? config.required("moe_intermediate_size", "the MLP's inner width of one expert")
                          : config.required("intermediate_size", "the MLP's inner width");

  if (type == "llama") {
    const bool attention_bias = config.boolean("attention_bias").value_or(false);
    spec.qkv_bias = spec.output_bias = attention_bias;
    spec.mlp_bias = config.boolean("mlp_bias").value_or(false);
  } else if (type == "qwen2" || type == "qwen2_moe") {
    spec.qkv_bias = true;  // Qwen2Attention: q, k and v have biases, o has none
    read_qwen_window(config, spec);
  } else if (type == "qwen3" || type == "qwen3_moe") {
    // Qwen3Attention: q_proj, k_proj and v_proj take attention_bias (o_proj
    // too), q_norm and k_norm are RMSNorms of head_dim.
    const bool attention_bias = config.boolean("attention_bias").value_or(false);
    spec.qkv_bias = spec.output_bias = attention_bias;
    spec.qk_norm = QkNorm::head;
    read_qwen_window(config, spec);
  } else if (type == "mistral") {
    // Absent: MistralConfig's default window of 4096 tokens; null: none.
    spec.sliding_window = config.present("sliding_window") ? config.positive("sliding_window").value_or(0) : 4096;
  } else if (type == "mixtral" || type == "phi3") {
    spec.sliding_window = config.positive("sliding_window").value_or(0);  // absent or null: none
  }
  if (type == "mixtral") {
    spec.experts = config.required("num_local_experts", "the experts per layer");
  } else if (type == "qwen2_moe" || type == "qwen3_moe") {
    spec.experts = config.required("num_experts", "the experts per layer");
    require_all_sparse(config);
  }
  if (moe) {
    spec.experts_top_k = config.required("num_experts_per_tok", "the experts each token is routed to");
    spec.expert_ffn_hidden = ffn;
  } else {
    spec.ffn_hidden = ffn;
  }
  if (type == "qwen2_moe") {
    // Qwen2MoeSparseMoeBlock: shared_expert (gate, up, down of
    // shared_expert_intermediate_size) and shared_expert_gate (h x 1).
    spec.shared_expert_ffn_hidden =
        config.required("shared_expert_intermediate_size", "the shared expert's inner width");
    spec.shared_expert_gate = true;
  }
}

void read_softcapping(const ConfigReader& config, ModelSpec& spec, double attention_default, double final_default);

// Gemma 3 (Gemma3ForCausalLM): an RMSNorm decoder with a gated GELU MLP
// (gate, up and down projections), a head_dim of its own (default 256),
// per-head q/k norms, 4 norms per layer (input, post-attention, pre- and
// post-feedforward) and the LM head tied to the token embedding; every
// sliding_window_pattern-th layer is global, the others windowed.
// `multimodal` (gemma3's text_config) takes Gemma3TextConfig's defaults for
// the fields such a text_config may leave out.
void read_gemma3(const ConfigReader& config, ModelSpec& spec, bool multimodal) {
  auto sized = [&](std::string_view key, std::string_view meaning, int64_t fallback) {
    return multimodal ? config.positive(key).value_or(fallback) : config.required(key, meaning);
  };
  spec.layers = sized("num_hidden_layers", "the number of layers", 26);
  spec.hidden = sized("hidden_size", "the hidden size", 2304);
  spec.heads = sized("num_attention_heads", "the number of attention heads", 8);
  spec.kv_heads = config.positive("num_key_value_heads").value_or(multimodal ? 4 : spec.heads);
  spec.head_dim = config.positive("head_dim").value_or(256);
  spec.vocab = sized("vocab_size", "the vocabulary size", 262208);
  spec.ffn_hidden = sized("intermediate_size", "the MLP's inner width", 9216);
  spec.mlp = MlpKind::swiglu;  // Gemma3MLP: gate_proj, up_proj, down_proj (GELU-gated)
  spec.norm = NormKind::rmsnorm;
  config.string("hidden_act");
  config.string("hidden_activation");
  spec.tied_embeddings = config.boolean("tie_word_embeddings").value_or(true);
  spec.max_context = config.positive("max_position_embeddings").value_or(multimodal ? 131072 : 0);
  const bool attention_bias = config.boolean("attention_bias").value_or(false);
  spec.qkv_bias = spec.output_bias = attention_bias;
  spec.layer_norms = 4;
  spec.qk_norm = QkNorm::head;
  spec.norm_scale_fp32 = true;  // Gemma3RMSNorm: output * (1.0 + self.weight.float())
  // Gemma3: layer i is global when (i + 1) % sliding_window_pattern == 0 (default 6).
  if (const auto window = config.positive("sliding_window")) {
    spec.sliding_window = *window;
    spec.global_attention_every = config.positive("sliding_window_pattern").value_or(6);
  }
  read_softcapping(config, spec, 0, 0);
}

// transformers' layer_types in memplan's terms (defined below, with gpt-oss).
void read_layer_types(const ConfigReader& config, ModelSpec& spec);

// A config class's windowed layers: `sliding_window` (absent: the class's `default_window`; null: no window),
// every `default_every`th layer global unless `layer_types` spells the pattern out (read_layer_types).
void read_window_pattern(const ConfigReader& config, ModelSpec& spec, int64_t default_window,
                         int64_t default_every) {
  const int64_t window =
      config.present("sliding_window") ? config.positive("sliding_window").value_or(0) : default_window;
  if (window > 0) {
    spec.sliding_window = window;
    spec.global_attention_every = default_every;
  }
  read_layer_types(config, spec);
}

// Soft-capping of the attention scores and of the logits (Gemma2Config: 50.0 and 30.0 when absent; Gemma 3's
// configs: null, none): absent takes the class's default, null none.
void read_softcapping(const ConfigReader& config, ModelSpec& spec, double attention_default, double final_default) {
  // The bound a [model] table applies too (model_reader.cpp), so that a scenario can copy the value.
  const auto cap = [&](std::string_view key, double fallback) {
    if (!config.present(key)) return fallback;
    const std::optional<double> value = config.non_negative_number(key);
    if (value && *value > 1e6) config.fail("\"" + std::string(key) + "\" is " + std::to_string(*value) +
                                          ", above 1e6; a soft-capping cap is a small positive number (Gemma 2: 50 "
                                          "and 30): correct it in the file");
    return value.value_or(0);
  };
  spec.attn_logit_softcapping = cap("attn_logit_softcapping", attention_default);
  spec.final_logit_softcapping = cap("final_logit_softcapping", final_default);
}

// Gemma (GemmaForCausalLM) and Gemma 2 (Gemma2ForCausalLM), transformers'
// modeling_gemma.py / modeling_gemma2.py: RMSNorm decoders with a gated GELU MLP
// (gate_proj, up_proj, down_proj), a head_dim of their own (default 256), q, k,
// v and o biases when attention_bias, the LM head tied to the token embedding
// (default true). Gemma has 2 norms per layer (input, post-attention); Gemma 2
// 4 (input, post-attention, pre- and post-feedforward) and alternates windowed
// and global layers: Gemma2DecoderLayer's is_sliding = not bool(layer_idx % 2),
// so layer i is global when (i + 1) % 2 == 0 (global_attention_every = 2).
// Gemma 2's logit soft-capping (attn_logit_softcapping, final_logit_softcapping)
// and query_pre_attn_scalar are scalars, not weights; the soft-capping changes
// what training keeps.
void read_gemma(const ConfigReader& config, ModelSpec& spec, bool gemma2) {
  // GemmaConfig and Gemma2Config default num_key_value_heads to the default model's (16, 4), not to the heads.
  read_gated_decoder(config, spec, {.kv_heads_required = true, .head_dim = 256, .tied = true});
  spec.ffn_hidden = config.required("intermediate_size", "the MLP's inner width");
  config.string("hidden_activation");
  spec.norm_scale_fp32 = true;  // GemmaRMSNorm, Gemma2RMSNorm: output * (1.0 + self.weight.float())
  if (!gemma2) return;
  spec.layer_norms = 4;
  read_softcapping(config, spec, 50.0, 30.0);
  // Gemma2Config's default window of 4096 tokens, every other layer global; newer configs spell the alternation
  // out in layer_types.
  read_window_pattern(config, spec, 4096, 2);
}

// OLMo 2 (Olmo2ForCausalLM), transformers' modular_olmo2.py: a Llama-shaped
// decoder (SwiGLU MLP, rotary positions, q, k, v and o biases when
// attention_bias, untied head by default) whose q_norm and k_norm are RMSNorms
// over the whole projections (heads x head_dim and kv_heads x head_dim), and
// whose two norms per layer follow attention and the MLP
// (post_attention_layernorm, post_feedforward_layernorm; Olmo2DecoderLayer
// deletes input_layernorm).
void read_olmo2(const ConfigReader& config, ModelSpec& spec) {
  read_gated_decoder(config, spec, {});
  spec.ffn_hidden = config.required("intermediate_size", "the MLP's inner width");
  spec.qk_norm = QkNorm::full;
  spec.layer_norms = 2;
}

// OLMo 3 (Olmo3ForCausalLM, transformers' modular_olmo3.py, 4.57): OLMo 2's layer with three windowed layers
// in four (Olmo3Config: sliding_window 4096 when absent, layer_types by default "sliding_attention" but
// "full_attention" where (i + 1) % 4 == 0); `null` window: every layer global.
void read_olmo3(const ConfigReader& config, ModelSpec& spec) {
  read_olmo2(config, spec);
  read_window_pattern(config, spec, 4096, 4);
}

// DeepSeek-V2 and V3 (transformers' DeepseekV2ForCausalLM and
// DeepseekV3ForCausalLM; DeepSeek's reference model, deepseek-ai/DeepSeek-V3 @
// 9b4e978 inference/model.py): an RMSNorm decoder with multi-head latent
// attention and DeepSeekMoE layers after first_k_dense_replace dense ones.
// Each MoE layer has n_routed_experts experts of moe_intermediate_size,
// n_shared_experts shared experts fused into one MLP of n_shared_experts x
// moe_intermediate_size (DeepseekV3MoE.shared_experts), and a router of h x
// experts; V3's router (and V2's with topk_method "noaux_tc") adds the
// e_score_correction_bias of one value per expert. The multi-token-prediction
// module (num_nextn_predict_layers) is not loaded by transformers
// (DeepseekV3ForCausalLM ignores model.layers.61), so it is not counted.
void read_deepseek(const ConfigReader& config, const std::string& type, ModelSpec& spec) {
  spec.layers = config.required("num_hidden_layers", "the number of layers");
  spec.hidden = config.required("hidden_size", "the hidden size");
  spec.heads = config.required("num_attention_heads", "the number of attention heads");
  if (const auto kv = config.positive("num_key_value_heads"); kv && *kv != spec.heads)
    config.fail("\"num_key_value_heads\" is " + std::to_string(*kv) + " but \"num_attention_heads\" is " +
                std::to_string(spec.heads) + ": multi-head latent attention up-projects keys and values for every "
                "head; make them equal");
  spec.vocab = config.required("vocab_size", "the vocabulary size");
  spec.q_lora_rank = config.positive("q_lora_rank").value_or(0);  // null in DeepSeek-V2-Lite: wq from h directly
  spec.kv_lora_rank = config.required("kv_lora_rank", "the key/value latent width");
  // Sums and products below stay far inside int64 with every field under
  // these ceilings (validate_model then applies the model's own bounds).
  auto bounded = [&](std::string_view key, int64_t value, int64_t limit) {
    if (value > limit)
      config.fail("\"" + std::string(key) + "\" is " + std::to_string(value) + ", implausibly large (the limit is " +
                  std::to_string(limit) + "); correct it in the file");
    return value;
  };
  spec.qk_rope_head_dim =
      bounded("qk_rope_head_dim", config.required("qk_rope_head_dim", "the rotary part of each q/k head"), 1'000'000);
  spec.head_dim = bounded("qk_nope_head_dim",
                          config.required("qk_nope_head_dim", "the non-rotary part of each q/k head"), 1'000'000) +
                  spec.qk_rope_head_dim;
  spec.v_head_dim = config.required("v_head_dim", "the value head width");
  spec.mlp = MlpKind::swiglu;
  spec.norm = NormKind::rmsnorm;
  config.string("hidden_act");
  spec.tied_embeddings = config.boolean("tie_word_embeddings").value_or(false);
  spec.max_context = config.positive("max_position_embeddings").value_or(0);
  if (config.boolean("attention_bias").value_or(false))
    config.fail("\"attention_bias\" is true: memplan models DeepSeek's latent attention without biases (as every "
                "published DeepSeek-V2/V3 config has it); set it to false or describe the model with [model] keys");
  spec.ffn_hidden = config.required("intermediate_size", "the dense layers' MLP width");
  const auto routed = config.positive("n_routed_experts");
  if (!routed) return;  // null: every layer dense (DeepseekV2DecoderLayer builds an MLP)
  if (const auto freq = config.positive("moe_layer_freq"); freq && *freq != 1)
    config.fail("\"moe_layer_freq\" is " + std::to_string(*freq) + ": only every Nth layer after the dense ones "
                "is a MoE layer, which memplan cannot model; set it to 1 or describe the model with [model] keys");
  spec.experts = *routed;
  spec.experts_top_k = config.required("num_experts_per_tok", "the experts each token is routed to");
  spec.expert_ffn_hidden = bounded(
      "moe_intermediate_size", config.required("moe_intermediate_size", "the MLP's inner width of one expert"),
      100'000'000);
  spec.shared_expert_ffn_hidden =
      bounded("n_shared_experts", config.integer("n_shared_experts", 0).value_or(0), 1'000'000) *
      spec.expert_ffn_hidden;
  spec.dense_layers = std::min(config.integer("first_k_dense_replace", 0).value_or(0), spec.layers);
  if (spec.dense_layers == spec.layers) {  // every layer dense after all
    spec.experts = spec.experts_top_k = spec.expert_ffn_hidden = spec.shared_expert_ffn_hidden = 0;
    spec.dense_layers = 0;
    return;
  }
  spec.router_bias = type == "deepseek_v3" || config.string("topk_method").value_or("") == "noaux_tc";
  if (const auto mtp = config.integer("num_nextn_predict_layers", 0); mtp && *mtp > 0)
    spec.hf_note = "the config has " + std::to_string(*mtp) +
                   " multi-token-prediction module(s) (num_nextn_predict_layers), which transformers does not load: "
                   "they are not in the estimate; set [model] mtp_layers = " + std::to_string(*mtp) +
                   " to count them (when training them, or serving them for speculative decoding)";
}

// GPT-2: pre-norm LayerNorm decoder, GELU MLP, biases everywhere (its Conv1D
// layers hold the same weights as linear layers, transposed), learned
// positions, LM head tied to the token embedding.
void read_gpt2(const ConfigReader& config, ModelSpec& spec) {
  spec.layers = config.required("n_layer", "the number of layers");
  spec.hidden = config.required("n_embd", "the hidden size");
  spec.heads = config.required("n_head", "the number of attention heads");
  spec.vocab = config.required("vocab_size", "the vocabulary size");
  spec.position_embeddings = config.required("n_positions", "the learned positions");
  spec.max_context = spec.position_embeddings;
  // null: 4 x n_embd (an implausible n_embd is left for validate_model to report, not multiplied)
  spec.ffn_hidden = config.positive("n_inner").value_or(spec.hidden <= 10'000'000 ? 4 * spec.hidden : 0);
  // GPT2Config's default activation_function is "gelu_new" (transformers' NewGELUActivation, written as tensor ops).
  spec.activation = config.string("activation_function").value_or("gelu_new") == "gelu_new"
                        ? MlpActivation::gelu_new
                        : MlpActivation::standard;
  if (config.boolean("add_cross_attention").value_or(false))
    config.fail("\"add_cross_attention\" is true: memplan does not model GPT-2 with cross-attention layers; set it "
                "to false or describe the model with [model] keys instead of hf_config");
  spec.mlp = MlpKind::gelu;
  spec.norm = NormKind::layernorm;
  spec.qkv_bias = spec.output_bias = spec.mlp_bias = true;
  spec.tied_embeddings = config.boolean("tie_word_embeddings").value_or(true);
}

// OPT (transformers' OPTForCausalLM, models/opt/modeling_opt.py): LayerNorm
// decoder, two-projection MLP (fc1, fc2; ReLU, the same weights as GELU's),
// biases on q, k, v, out_proj, fc1 and fc2 unless enable_bias is false, a
// learned position table of max_position_embeddings + 2 rows
// (OPTLearnedPositionalEmbedding offsets positions by 2), LM head tied to the
// token embedding. The token embedding is word_embed_proj_dim wide; where that
// differs from hidden_size, OPTDecoder adds project_in and project_out
// (linear, no bias), which memplan's embedding_dim models when narrower.
// do_layer_norm_before false (OPT-350m) is post-LN: each layer's two
// LayerNorms follow attention and the MLP instead of preceding them, the same
// weights, and there is no final LayerNorm; so is _remove_final_layer_norm.
void read_opt(const ConfigReader& config, ModelSpec& spec) {
  spec.layers = config.required("num_hidden_layers", "the number of layers");
  spec.hidden = config.required("hidden_size", "the hidden size");
  spec.heads = config.required("num_attention_heads", "the number of attention heads");
  spec.ffn_hidden = config.required("ffn_dim", "the MLP's inner width");
  spec.vocab = config.required("vocab_size", "the vocabulary size");
  const int64_t positions = config.required("max_position_embeddings", "the learned positions");
  // OPTLearnedPositionalEmbedding: num_embeddings + offset 2 (an implausible value is left for validate_model
  // to report, not overflowed).
  spec.position_embeddings = positions <= 1'000'000'000'000 ? positions + 2 : positions;
  spec.max_context = positions;
  // word_embed_proj_dim: OPTConfig's default is hidden_size (OPTConfig.__init__: word_embed_proj_dim if not
  // None else hidden_size).
  const int64_t embedding = config.positive("word_embed_proj_dim").value_or(spec.hidden);
  if (embedding > spec.hidden)
    config.fail("\"word_embed_proj_dim\" " + std::to_string(embedding) + " is wider than \"hidden_size\" " +
                std::to_string(spec.hidden) +
                ": memplan models a token embedding narrower than the hidden state (OPT-350m: 512 with 1024); "
                "correct it in the file, or describe the model with [model] keys instead of hf_config");
  spec.embedding_dim = embedding == spec.hidden ? 0 : embedding;
  config.string("activation_function");
  spec.mlp = MlpKind::gelu;  // fc1 and fc2 whatever the activation (OPT: "relu")
  spec.norm = NormKind::layernorm;
  const bool bias = config.boolean("enable_bias").value_or(true);
  spec.qkv_bias = spec.output_bias = spec.mlp_bias = bias;
  if (!config.boolean("layer_norm_elementwise_affine").value_or(true))
    config.fail("\"layer_norm_elementwise_affine\" is false: memplan counts a LayerNorm's scale and shift (2 x "
                "hidden_size each) and cannot model LayerNorms without weights; set it to true or describe the "
                "model with [model] keys instead of hf_config");
  const bool pre_norm = config.boolean("do_layer_norm_before").value_or(true);
  spec.final_norm = pre_norm && !config.boolean("_remove_final_layer_norm").value_or(false);
  spec.tied_embeddings = config.boolean("tie_word_embeddings").value_or(true);
}

// BERT (transformers' BertModel): post-norm LayerNorm encoder, GELU MLP,
// biases everywhere, learned positions and token types, a LayerNorm on the
// embeddings, a pooler, no output head (set [model] output_head = "mlm" and
// pooler = false for BertForMaskedLM).
void read_bert(const ConfigReader& config, ModelSpec& spec) {
  spec.layers = config.required("num_hidden_layers", "the number of layers");
  spec.hidden = config.required("hidden_size", "the hidden size");
  spec.heads = config.required("num_attention_heads", "the number of attention heads");
  spec.ffn_hidden = config.required("intermediate_size", "the MLP's inner width");
  spec.vocab = config.required("vocab_size", "the vocabulary size");
  spec.position_embeddings = config.required("max_position_embeddings", "the learned positions");
  spec.max_context = spec.position_embeddings;
  spec.type_vocab = config.required("type_vocab_size", "the token types");
  config.string("hidden_act");
  if (auto positions = config.string("position_embedding_type"); positions && *positions != "absolute")
    config.fail("\"position_embedding_type\" is \"" + *positions +
                "\": memplan models BERT's absolute position embeddings only; set it to \"absolute\" or describe "
                "the model with [model] keys instead of hf_config");
  spec.mlp = MlpKind::gelu;
  spec.norm = NormKind::layernorm;
  spec.qkv_bias = spec.output_bias = spec.mlp_bias = true;
  spec.embedding_norm = true;
  spec.final_norm = false;
  spec.pooler = true;
  spec.output_head = OutputHead::none;
  spec.tied_embeddings = config.boolean("tie_word_embeddings").value_or(true);
}

// transformers' layer_types (one "sliding_attention" or "full_attention" per
// layer) in memplan's terms: a window on every layer but every Nth, layer i
// global when (i + 1) % N == 0 (global_attention_every); all windowed (N = 0)
// or none (no window). Other patterns cannot be expressed: an error.
void read_layer_types(const ConfigReader& config, ModelSpec& spec) {
  const json* types = config.find("layer_types");
  if (types == nullptr) return;
  if (!types->is_array()) config.mistyped("layer_types", "an array", *types);
  if (static_cast<int64_t>(types->size()) != spec.layers)
    config.fail("\"layer_types\" has " + std::to_string(types->size()) + " entries for " +
                std::to_string(spec.layers) + " layers (\"num_hidden_layers\"); give one per layer");
  std::vector<bool> global;
  for (const json& type : *types) {
    if (!type.is_string() || (type != "sliding_attention" && type != "full_attention"))
      config.fail("\"layer_types\" holds " + describe(type) +
                  "; memplan reads \"sliding_attention\" and \"full_attention\" layers");
    global.push_back(type == "full_attention");
  }
  int64_t every = 0;
  for (size_t i = 0; i < global.size() && every == 0; ++i)
    if (global[i]) every = static_cast<int64_t>(i) + 1;
  for (size_t i = 0; i < global.size(); ++i)
    if (global[i] != (every > 0 && (static_cast<int64_t>(i) + 1) % every == 0))
      config.fail("\"layer_types\" makes layer " + std::to_string(i) + " " +
                  (global[i] ? "full attention" : "sliding attention") +
                  ", which is not the pattern memplan models (a window " +
                  "on every layer but every Nth, layer i full when (i + 1) % N == 0; here N would be " +
                  std::to_string(every) + " from the first full layer); describe the model with [model] keys " +
                  "(sliding_window, global_attention_every) instead of hf_config");
  if (every == 1) {
    spec.sliding_window = 0;  // every layer attends to the whole context
    spec.global_attention_every = 0;
  } else if (spec.sliding_window == 0) {
    config.fail("\"layer_types\" has sliding_attention layers but \"sliding_window\" is null; give the window");
  } else {
    spec.global_attention_every = every;
  }
}

// gpt-oss (transformers' GptOssForCausalLM, models/gpt_oss, since 4.55.0):
// RMSNorm decoder; attention with q, k, v and o biases (attention_bias,
// default true), head_dim 64, grouped-query, one learned sink logit per head
// (GptOssAttention.sinks); every layer a mixture of experts with a biased
// router (GptOssTopKRouter: weight E x h and bias E) and experts with biases
// (GptOssExperts: gate_up_proj h x 2f and its bias 2f, down_proj f x h and its
// bias h, per expert; f = intermediate_size); windowed and full layers from
// layer_types (default: alternating, the first windowed); untied head.
void read_gpt_oss(const ConfigReader& config, ModelSpec& spec) {
  // gate_up_proj and down_proj: a gated MLP (a clamped SwiGLU); attention_bias defaults to true.
  read_gated_decoder(config, spec, {.head_dim = 64, .attention_bias = true});
  spec.experts = config.required("num_local_experts", "the experts per layer");
  spec.experts_top_k = config.required("num_experts_per_tok", "the experts each token is routed to");
  spec.expert_ffn_hidden = config.required("intermediate_size", "the MLP's inner width of one expert");
  spec.attention_sinks = spec.router_bias = spec.expert_bias = true;
  // Absent: GptOssConfig's window of 128 tokens; null: none.
  spec.sliding_window = config.present("sliding_window") ? config.positive("sliding_window").value_or(0) : 128;
  if (spec.sliding_window > 0) spec.global_attention_every = 2;  // GptOssConfig's default layer_types
  read_layer_types(config, spec);
}

// Llama 4 (transformers' Llama4ForCausalLM / Llama4ForConditionalGeneration,
// models/llama4 since 4.51.0; read at commits 008e574 configuration_llama4.py
// and 000c33f modeling_llama4.py): an RMSNorm decoder, two norms per layer,
// untied head by default. A MoE layer (Llama4TextMoe) has num_local_experts
// experts of intermediate_size (gate_up_proj E x h x 2f, down_proj E x f x h),
// a router h x E without bias and a shared expert (Llama4TextMLP) of
// intermediate_size on every token; another layer has a gated MLP of
// intermediate_size_mlp. moe_layers (default: every interleave_moe_layer_step-th
// layer, from layer step - 1) must be a suffix of the layers: the dense ones
// first (dense_layers), as memplan's MoE layers are all alike. The q/k norm
// (use_qk_norm) is an L2 norm without weights. Layers with RoPE (no_rope_layers
// 1) attend within attention_chunk_size-token chunks, which memplan does not
// model: their KV cache is counted as global, and hf_note says so.
void read_llama4(const ConfigReader& config, ModelSpec& spec) {
  read_gated_decoder(config, spec, {.head_dim = 128});  // Llama4TextConfig's head_dim
  const int64_t expert_ffn = config.required("intermediate_size", "the MLP's inner width of one expert");
  const int64_t dense_ffn = config.positive("intermediate_size_mlp").value_or(16384);
  const int64_t step = config.positive("interleave_moe_layer_step").value_or(1);
  std::vector<int64_t> moe;
  if (const json* listed = config.find("moe_layers")) {
    if (!listed->is_array()) config.mistyped("moe_layers", "an array of layer indices", *listed);
    for (const json& layer : *listed) {
      if (!layer.is_number_integer() || layer.get<int64_t>() < 0 || layer.get<int64_t>() >= spec.layers)
        config.mistyped("moe_layers", "an array of layer indices below \"num_hidden_layers\"", *listed);
      moe.push_back(layer.get<int64_t>());
    }
  } else {
    for (int64_t layer = step - 1; layer < spec.layers; layer += step) moe.push_back(layer);
  }
  std::sort(moe.begin(), moe.end());
  moe.erase(std::unique(moe.begin(), moe.end()), moe.end());
  // The dense layers must come first: the first dense layer after a MoE layer cannot be modelled.
  const int64_t dense = spec.layers - static_cast<int64_t>(moe.size());
  if (!moe.empty() && moe.front() != dense) {
    int64_t after = moe.front();
    for (size_t i = 0; i < moe.size() && moe[i] == after; ++i) ++after;
    const std::string field = config.present("moe_layers")
                                  ? std::string("\"moe_layers\"")
                                  : "\"interleave_moe_layer_step\" " + std::to_string(step);
    config.fail(field + " makes layer " + std::to_string(moe.front()) + " a MoE layer and layer " +
                std::to_string(after) + " after it dense (Llama 4 Maverick alternates them), which memplan cannot "
                "model: its MoE layers are all alike and only the first layers may be dense (dense_layers); set "
                "\"interleave_moe_layer_step\" to 1 (and \"moe_layers\" to every layer from the first MoE one), or "
                "describe the model with [model] keys instead of hf_config");
  }
  if (moe.empty()) {
    spec.ffn_hidden = dense_ffn;
  } else {
    spec.experts = config.required("num_local_experts", "the experts per layer");
    spec.experts_top_k = config.positive("num_experts_per_tok").value_or(1);
    spec.expert_ffn_hidden = expert_ffn;
    spec.shared_expert_ffn_hidden = expert_ffn;  // Llama4TextMoe.shared_expert
    spec.dense_layers = dense;
    if (dense > 0) spec.ffn_hidden = dense_ffn;
  }
  config.boolean("use_qk_norm");
  // Layers with RoPE (no_rope_layers 1; default: all but every no_rope_layer_interval-th) are chunked.
  const int64_t interval = config.positive("no_rope_layer_interval").value_or(4);
  int64_t chunked = 0;
  const json* rope = config.find("no_rope_layers");
  if (rope != nullptr && !rope->is_array()) config.mistyped("no_rope_layers", "an array of 0 and 1", *rope);
  for (int64_t i = 0; i < spec.layers; ++i)
    if (rope != nullptr && !rope->empty()) {
      const size_t at = static_cast<size_t>(i);
      if (at >= rope->size() || !(*rope)[at].is_number_integer())
        config.fail("\"no_rope_layers\" must hold a 0 or 1 for each of the " + std::to_string(spec.layers) +
                    " layers; correct the file");
      chunked += (*rope)[at].get<int64_t>() != 0;
    } else {
      chunked += (i + 1) % interval != 0;
    }
  if (const auto chunk = config.positive("attention_chunk_size"); chunk && chunked > 0)
    spec.hf_note = "\"attention_chunk_size\" " + std::to_string(*chunk) + ": " + std::to_string(chunked) + " of the " +
                   std::to_string(spec.layers) + " layers attend within chunks of that many tokens (chunked local "
                   "attention), which memplan does not model: it counts every layer's KV cache as global "
                   "(over-estimating the cache beyond " + std::to_string(*chunk) +
                   " tokens) and every layer's attention as full";
}

// The parts of a model a quantization config can keep unquantized, in the
// words of [[strategy]] freeze's `train`.
constexpr std::array<std::string_view, 6> kParts = {"attention", "mlp", "experts", "router", "embeddings", "lm_head"};

// One entry of modules_to_not_convert ("model.layers.*.self_attn", "lm_head")
// as the parts it names (bits of kParts); 0 when it names none memplan tells
// apart (a norm, or an unknown module).
unsigned module_parts(std::string_view module, bool moe) {
  std::vector<std::string_view> names;
  for (size_t start = 0; start <= module.size();) {
    const size_t dot = std::min(module.find('.', start), module.size());
    names.push_back(module.substr(start, dot - start));
    start = dot + 1;
  }
  auto has = [&](std::initializer_list<std::string_view> any) {
    for (std::string_view name : names)
      for (std::string_view wanted : any)
        if (name == wanted) return true;
    return false;
  };
  if (has({"router", "gate"})) return 1u << 3;  // gpt-oss's mlp.router; Mixtral's and Qwen-MoE's gate
  if (has({"shared_expert", "shared_experts"})) return 1u << 1;
  if (has({"experts"})) return 1u << 2;
  if (has({"self_attn", "attn", "attention", "q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj"})) return 1u << 0;
  if (has({"mlp", "block_sparse_moe", "feed_forward", "gate_proj", "up_proj", "down_proj", "gate_up_proj"}))
    return moe ? (1u << 1) | (1u << 2) | (1u << 3) : 1u << 1;  // a MoE block: its experts and router too
  if (has({"embed_tokens", "wte", "embeddings"})) return 1u << 4;
  if (has({"lm_head"})) return 1u << 5;
  return 0;
}

// quantization_config (transformers' quantizers): the checkpoint's weight
// format, kept as facts for plugins (WeightFormat), not interpreted here.
void read_quantization(const ConfigReader& outer, const std::string& path, ModelSpec& spec) {
  const json* object = outer.object("quantization_config");
  if (object == nullptr) return;
  ConfigReader config(*object, path);
  config.set_model_type(std::string("quantization_config"));
  WeightFormat& format = spec.weight_format;
  auto method = config.string("quant_method");
  if (!method || method->empty())
    config.fail("\"quantization_config\" has no \"quant_method\" (the weight format, such as \"gptq\"); add "
                "it, or remove quantization_config");
  format.method = *method;
  format.bits = config.positive("bits").value_or(config.positive("w_bit").value_or(0));
  // bitsandbytes (BitsAndBytesConfig): load_in_4bit or load_in_8bit, the 4-bit
  // values' type and double quantization.
  if (format.bits == 0 && config.boolean("load_in_4bit").value_or(false)) format.bits = 4;
  if (format.bits == 0 && config.boolean("load_in_8bit").value_or(false)) format.bits = 8;
  format.value_type = config.string("bnb_4bit_quant_type").value_or("");
  format.double_quant = config.boolean("bnb_4bit_use_double_quant").value_or(false);
  for (const char* key : {"group_size", "q_group_size"}) {
    const json* group = config.find(key);
    if (group == nullptr || format.group_size != 0) continue;
    const bool valid = group->is_number_unsigned()
                           ? group->get<uint64_t>() >= 1 && group->get<uint64_t>() <= 1'000'000'000
                           : group->is_number_integer() && group->get<int64_t>() == -1;
    if (!valid) config.mistyped(key, "a positive integer or -1 (one scale per row)", *group);
    format.group_size = group->get<int64_t>();
  }
  if (const json* block = config.find("weight_block_size")) {
    if (!block->is_array() || block->empty()) config.mistyped("weight_block_size", "an array of sizes", *block);
    format.block_elements = 1;
    for (const json& size : *block) {
      if (!size.is_number_unsigned() || size.get<uint64_t>() < 1 || size.get<uint64_t>() > 1'000'000 ||
          format.block_elements * size.get<int64_t>() > 1'000'000'000)
        config.mistyped("weight_block_size", "an array of positive integers (such as [128, 128])", *block);
      format.block_elements *= size.get<int64_t>();
    }
  }
  unsigned kept = 0;
  for (const char* key : {"modules_to_not_convert", "ignored_layers", "llm_int8_skip_modules"}) {
    const json* modules = config.find(key);
    if (modules == nullptr) continue;
    if (!modules->is_array()) config.mistyped(key, "an array of module names", *modules);
    for (const json& module : *modules) {
      if (!module.is_string()) config.mistyped(key, "an array of module names (strings)", *modules);
      kept |= module_parts(module.get_ref<const std::string&>(), spec.experts > 0);
    }
  }
  for (size_t i = 0; i < kParts.size(); ++i)
    if (kept & (1u << i)) format.unquantized += (format.unquantized.empty() ? "" : ",") + std::string(kParts[i]);
}

// A multimodal config (Gemma 3, Llama 4) nests its language model in
// text_config: read it as the text model's type reads it; the vision tower and
// the multimodal projector are not counted, which the note says.
template <typename Read>
void read_language_model(const ConfigReader& config, const std::string& path, const std::string& type,
                         std::string_view model, std::string_view text_type, ModelSpec& spec, Read read) {
  const json* text = config.object("text_config");
  if (text == nullptr)
    config.fail("\"text_config\" is missing (the language model of " + std::string(model) + "; model_type \"" + type +
                "\" needs it); add it to the file, or give the text model's config (model_type \"" +
                std::string(text_type) + "\")");
  ConfigReader text_config(*text, path);
  text_config.set_model_type(type + " text_config");
  read(text_config, spec);
  spec.hf_note = "model_type \"" + type + "\" is multimodal: memplan counts its language model (text_config) only; " +
                 "the vision tower and the multimodal projector are not in the estimate" +
                 (spec.hf_note.empty() ? "" : "; " + spec.hf_note);
}

}  // namespace

std::span<const std::string_view> hf_model_types() { return kModelTypes; }

ModelSpec read_hf_config(std::string_view json_text, const std::string& path) {
  json root;
  try {
    root = json::parse(json_text.begin(), json_text.end());
  } catch (const json::parse_error& error) {
    fail_parse(path, error);
  } catch (const json::exception& error) {
    fail_number(path, json_text, error);
  }
  ConfigReader config(root, path);
  if (!root.is_object())
    config.fail("the file holds " + describe(root) +
                ", not a JSON object; 'hf_config' names a transformers config.json");
  std::optional<std::string> type = config.string("model_type");
  if (!type)
    config.fail("\"model_type\" is missing (the architecture family, such as \"llama\"); add it to the file");
  config.set_model_type(*type);

  std::vector<std::string> names;
  for (std::string_view name : kModelTypes) names.emplace_back("\"" + std::string(name) + "\"");
  ModelSpec spec;
  if (*type == "llama" || *type == "mistral" || *type == "mixtral" || *type == "qwen2" || *type == "qwen2_moe" ||
      *type == "qwen3" || *type == "qwen3_moe" || *type == "phi3")
    read_llama_family(config, *type, spec);
  else if (*type == "gemma3_text")
    read_gemma3(config, spec, false);
  else if (*type == "gemma3")  // Gemma3ForConditionalGeneration
    read_language_model(config, path, *type, "a multimodal Gemma 3", "gemma3_text", spec,
                        [](const ConfigReader& text, ModelSpec& model) { read_gemma3(text, model, true); });
  else if (*type == "llama4_text")
    read_llama4(config, spec);
  else if (*type == "llama4")  // Llama4ForConditionalGeneration
    read_language_model(config, path, *type, "Llama 4", "llama4_text", spec, read_llama4);

  else if (*type == "gemma" || *type == "gemma2")
    read_gemma(config, spec, *type == "gemma2");
  else if (*type == "olmo2")
    read_olmo2(config, spec);
  else if (*type == "olmo3")
    read_olmo3(config, spec);
  else if (*type == "deepseek_v2" || *type == "deepseek_v3")
    read_deepseek(config, *type, spec);
  else if (*type == "gpt2")
    read_gpt2(config, spec);
  else if (*type == "gpt_oss")
    read_gpt_oss(config, spec);
  else if (*type == "bert")
    read_bert(config, spec);
  else if (*type == "opt")
    read_opt(config, spec);
  else
    config.fail("model_type \"" + *type + "\" is not supported; memplan reads " + join_alternatives(names, " and ") +
                " configs. For another model, remove 'hf_config' and describe the architecture with [model] keys "
                "(layers, hidden, heads, ...)");
  // The weight format is a fact for plugins, not part of the architecture:
  // a quantization_config memplan cannot read leaves the estimate as it was
  // before memplan read them (with a warning), and only a plugin that asks for
  // the checkpoint's format finds none.
  try {
    read_quantization(config, path, spec);
  } catch (const Error& error) {
    spec.weight_format = WeightFormat{};
    std::string detail = error.what();
    const std::string prefix = "Hugging Face config: ";
    if (const size_t at = detail.find(prefix); at != std::string::npos) detail = detail.substr(at + prefix.size());
    spec.hf_note = (spec.hf_note.empty() ? "" : spec.hf_note + "; ") + "its quantization_config is not read (" +
                   detail + "), so the model declares no weight format to plugins that would take it";
  }
  spec.hf_config = path;
  return spec;
}

}  // namespace memplan
