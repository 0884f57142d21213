#include "model/hf_config.hpp"

#include <array>
#include <cstdint>
#include <cstdio>
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

constexpr std::array<std::string_view, 6> kModelTypes = {"bert", "gpt2", "llama", "mistral", "mixtral", "qwen2"};

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

  std::optional<bool> boolean(std::string_view key) const {
    const json* value = find(key);
    if (value == nullptr) return std::nullopt;
    if (!value->is_boolean()) mistyped(key, "true or false", *value);
    return value->get<bool>();
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

// Llama and its relatives: pre-norm RMSNorm decoders with a gated (SwiGLU)
// MLP, rotary positions and grouped-query attention.
void read_llama_family(const ConfigReader& config, const std::string& type, ModelSpec& spec) {
  spec.layers = config.required("num_hidden_layers", "the number of layers");
  spec.hidden = config.required("hidden_size", "the hidden size");
  spec.heads = config.required("num_attention_heads", "the number of attention heads");
  spec.kv_heads = config.positive("num_key_value_heads").value_or(spec.heads);
  spec.head_dim = config.positive("head_dim").value_or(0);
  spec.vocab = config.required("vocab_size", "the vocabulary size");
  const int64_t ffn = config.required("intermediate_size", "the MLP's inner width");
  spec.mlp = MlpKind::swiglu;  // gate, up and down projections whatever hidden_act is
  spec.norm = NormKind::rmsnorm;
  config.string("hidden_act");
  spec.tied_embeddings = config.boolean("tie_word_embeddings").value_or(false);
  spec.max_context = config.positive("max_position_embeddings").value_or(0);

  if (type == "llama") {
    const bool attention_bias = config.boolean("attention_bias").value_or(false);
    spec.qkv_bias = spec.output_bias = attention_bias;
    spec.mlp_bias = config.boolean("mlp_bias").value_or(false);
  } else if (type == "qwen2") {
    spec.qkv_bias = true;  // Qwen2Attention: q, k and v have biases, o has none
    if (config.boolean("use_sliding_window").value_or(false)) {
      // transformers windows the layers from max_window_layers on (default 28).
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
  } else if (type == "mistral") {
    // Absent: MistralConfig's default window of 4096 tokens; null: none.
    spec.sliding_window = config.present("sliding_window") ? config.positive("sliding_window").value_or(0) : 4096;
  } else if (type == "mixtral") {
    spec.sliding_window = config.positive("sliding_window").value_or(0);  // absent or null: none
  }
  if (type == "mixtral") {
    spec.experts = config.required("num_local_experts", "the experts per layer");
    spec.experts_top_k = config.required("num_experts_per_tok", "the experts each token is routed to");
    spec.expert_ffn_hidden = ffn;
  } else {
    spec.ffn_hidden = ffn;
  }
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
  config.string("activation_function");
  if (config.boolean("add_cross_attention").value_or(false))
    config.fail("\"add_cross_attention\" is true: memplan does not model GPT-2 with cross-attention layers; set it "
                "to false or describe the model with [model] keys instead of hf_config");
  spec.mlp = MlpKind::gelu;
  spec.norm = NormKind::layernorm;
  spec.qkv_bias = spec.output_bias = spec.mlp_bias = true;
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
  if (*type == "llama" || *type == "mistral" || *type == "mixtral" || *type == "qwen2")
    read_llama_family(config, *type, spec);
  else if (*type == "gpt2")
    read_gpt2(config, spec);
  else if (*type == "bert")
    read_bert(config, spec);
  else
    config.fail("model_type \"" + *type + "\" is not supported; memplan reads " + join_alternatives(names, " and ") +
                " configs. For another model, remove 'hf_config' and describe the architecture with [model] keys "
                "(layers, hidden, heads, ...)");
  spec.hf_config = path;
  return spec;
}

}  // namespace memplan
