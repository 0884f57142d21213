// The model keys encoders need (issue 3): token-type embeddings, a norm on the
// embeddings, no final norm (post-norm), a pooler, and the output head (none,
// a decoder's LM head, or BERT's masked-LM head). BERT-large's figures are
// transformers' BertModel of google-bert/bert-large-uncased.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "memplan/core/model.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

const ModelSpec& bert() { return catalog().find_model("bert-large-uncased")->spec; }

std::map<std::string, double> elements_by_name(const ModelSpec& spec) {
  std::map<std::string, double> out;
  for (const PlanItem& item : parameter_inventory(spec))
    out[std::string(item.name_view())] += item.elements * item.count;
  return out;
}

// h = 1024, f = 4096, V = 30522, 512 positions, 2 token types.
TEST(ModelKeys, BertLargeInventory) {
  const std::map<std::string, double> items = elements_by_name(bert());
  const std::map<std::string, double> expected = {
      {"embed_tokens", 30522.0 * 1024},
      {"embed_positions", 512.0 * 1024},
      {"embed_token_types", 2.0 * 1024},
      {"embed_norm", 2.0 * 1024},  // LayerNorm: scale and shift
      {"attn.q", 24 * (1024.0 * 1024 + 1024)},
      {"attn.k", 24 * (1024.0 * 1024 + 1024)},
      {"attn.v", 24 * (1024.0 * 1024 + 1024)},
      {"attn.o", 24 * (1024.0 * 1024 + 1024)},
      {"mlp", 24 * (2 * 1024.0 * 4096 + 4096 + 1024)},
      {"norms", 24 * 2 * 2048.0},  // after attention and after the MLP (post-norm)
      {"pooler", 1024.0 * 1024 + 1024},
  };
  EXPECT_EQ(items, expected);  // no final_norm, no lm_head
  EXPECT_EQ(count_parameters(parameter_inventory(bert())), 335'141'888.0);
}

TEST(ModelKeys, EncoderItemsHaveClassesAndNoLayer) {
  int seen = 0;
  for (const PlanItem& item : parameter_inventory(bert())) {
    const std::string name(item.name_view());
    if (name != "embed_token_types" && name != "embed_norm" && name != "pooler") continue;
    const int32_t expected = name == "embed_token_types" ? MEMPLAN_CLASS_POSITION_EMBEDDING
                             : name == "embed_norm"      ? MEMPLAN_CLASS_NORM
                                                         : MEMPLAN_CLASS_OTHER;
    EXPECT_EQ(item.param_class, expected) << name;
    EXPECT_EQ(item.layer, -1) << name;
    EXPECT_EQ(item.count, 1u) << name;
    ++seen;
  }
  EXPECT_EQ(seen, 3);
}

// BertForMaskedLM: no pooler; the prediction head's transform h^2 + h, its
// LayerNorm 2h and the decoder's bias V (the decoder's weight is the token
// embedding): 335,141,888 - 1,049,600 + 1,049,600 + 2,048 + 30,522.
TEST(ModelKeys, MaskedLanguageModelHead) {
  ModelSpec spec = bert();
  spec.pooler = false;
  spec.output_head = OutputHead::mlm;
  EXPECT_EQ(count_parameters(parameter_inventory(spec)), 335'174'458.0);
  const std::map<std::string, double> items = elements_by_name(spec);
  EXPECT_EQ(items.at("mlm_head.transform"), 1024.0 * 1024 + 1024);
  EXPECT_EQ(items.at("mlm_head.norm"), 2048.0);
  EXPECT_EQ(items.at("lm_head.bias"), 30522.0);
  // Untied, the decoder has its own V x h weight.
  spec.tied_embeddings = false;
  EXPECT_EQ(count_parameters(parameter_inventory(spec)), 335'174'458.0 + 30522.0 * 1024);
  EXPECT_EQ(elements_by_name(spec).at("lm_head"), 30522.0 * 1024 + 30522);
}

// Without an output head there is nothing to tie: plugins are told untied, so
// the last pipeline stage keeps no copy of the token embedding.
TEST(ModelKeys, NoHeadSharesNoEmbedding) {
  ASSERT_TRUE(bert().tied_embeddings);
  EXPECT_EQ(to_abi_model(bert(), 0).tied_embeddings, 0);
  ModelSpec spec = bert();
  spec.output_head = OutputHead::mlm;
  EXPECT_EQ(to_abi_model(spec, 0).tied_embeddings, 1);
  spec.output_head = OutputHead::lm;
  EXPECT_EQ(to_abi_model(spec, 0).tied_embeddings, 1);
}

// With RMSNorm, the embedding norm has h weights; final_norm = false removes
// the h of a decoder's final norm.
TEST(ModelKeys, NormKeysOnADecoder) {
  ModelSpec spec = catalog().find_model("llama-2-7b")->spec;
  spec.embedding_norm = true;
  spec.final_norm = false;
  spec.type_vocab = 3;
  spec.pooler = true;
  spec.output_head = OutputHead::none;
  EXPECT_EQ(count_parameters(parameter_inventory(spec)),
            6'738'415'616.0 + 4096 /* embed_norm */ - 4096 /* final_norm */ + 3 * 4096.0 /* token types */ +
                (4096.0 * 4096 + 4096) /* pooler */ - 32000.0 * 4096 /* lm_head */);
}

constexpr std::string_view kScenario = R"(mode = "train"
[model]
preset = "bert-large-uncased"
KEY
[batch]
seq_len = 512
[precision]
use = "mixed-bf16"
[optimizer]
use = "adamw"
[activations]
use = "none"
)";

std::string with(std::string_view key) {
  std::string text(kScenario);
  text.replace(text.find("KEY"), 3, key);
  return text;
}

TEST(ModelKeys, ScenarioOverridesThePresetsEncoderKeys) {
  EXPECT_EQ(evaluate(with("")).breakdown().params_total, 335'141'888.0);
  EXPECT_EQ(evaluate(with("output_head = \"mlm\"\npooler = false")).breakdown().params_total, 335'174'458.0);
  EXPECT_EQ(evaluate(with("type_vocab = 0")).breakdown().params_total, 335'141'888.0 - 2048);
  EXPECT_EQ(evaluate(with("embedding_norm = false")).breakdown().params_total, 335'141'888.0 - 2048);
  EXPECT_EQ(evaluate(with("final_norm = true")).breakdown().params_total, 335'141'888.0 + 2048);
}

// Issue 12: the keys of the families hf_config reads, in a [model] table. A
// Qwen2-MoE-like model: per layer attention 4h^2 + 3h (q, k, v biases), router
// 8h, experts 8 x 3h x 256, shared expert 3h x 512 and its gate h, norms 2h;
// h = 128, 2 layers, vocabulary 1000, untied: (65,536 + 384 + 1,024 + 786,432
// + 196,608 + 128 + 256) x 2 = 2,100,736, + 2 x 128,000 + 128 = 2,356,864.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(ModelKeys, SharedExpertQkNormAndLayerNorms) {
  const std::string model =
      "name = \"m\"\nmode = \"infer\"\n[model]\nlayers = 2\nhidden = 128\nheads = 4\nvocab = 1000\n"
      "qkv_bias = true\ntied_embeddings = false\nshared_expert_ffn_hidden = 512\nshared_expert_gate = true\n"
      "[model.moe]\nexperts = 8\ntop_k = 2\nexpert_ffn_hidden = 256\n[precision]\nuse = \"bf16\"\n"
      "[activations]\nuse = \"none\"\n";
  EXPECT_EQ(evaluate(model).breakdown().params_total, 2'356'864.0);
  // q/k norms per head add 2 x head_dim = 64 per layer; two more norms per layer 2 x 128.
  const std::string normed = replaced(model, "vocab = 1000\n", "vocab = 1000\nqk_norm = \"head\"\nlayer_norms = 4\n");
  EXPECT_EQ(evaluate(normed).breakdown().params_total, 2'356'864.0 + 2 * (64 + 256));
  EXPECT_NE(error_of(replaced(model, "[model.moe]\nexperts = 8\ntop_k = 2\nexpert_ffn_hidden = 256\n", "ffn_hidden = 64\n"),
                     "s.toml")
                .find("a shared expert belongs to a mixture of experts"),
            std::string::npos);
}

// gpt-oss's parameters beyond a Mixtral-like layer (transformers'
// GptOssAttention.sinks, GptOssTopKRouter.bias, GptOssExperts' biases).
TEST(ModelKeys, AttentionSinksRouterAndExpertBiases) {
  const std::string model =
      "name = \"m\"\nmode = \"infer\"\n[model]\nlayers = 2\nhidden = 128\nheads = 4\nvocab = 1000\n"
      "tied_embeddings = false\n[model.moe]\nexperts = 8\ntop_k = 2\nexpert_ffn_hidden = 256\n[precision]\n"
      "use = \"bf16\"\n[activations]\nuse = \"none\"\n";
  // Per layer: attention 4 x 128^2 = 65,536, router 128 x 8 = 1,024, experts
  // 8 x 3 x 128 x 256 = 786,432, norms 256: 853,248; x 2 = 1,706,496; +
  // embedding and head 2 x 1000 x 128 = 256,000 + final norm 128 = 1,962,624.
  EXPECT_EQ(evaluate(model).breakdown().params_total, 1'962'624.0);
  // A sink per head (4), a router bias per expert (8), and per expert a
  // gate_up bias of 2 x 256 and a down bias of 128 (8 x 640 = 5,120): per
  // layer 5,132, x 2 layers.
  const std::string gpt_oss = replaced(model, "vocab = 1000\n",
                                       "vocab = 1000\nattention_sinks = true\nrouter_bias = true\nexpert_bias = true\n");
  EXPECT_EQ(evaluate(gpt_oss).breakdown().params_total, 1'962'624.0 + 2 * (4 + 8 + 5'120));
  const std::string dense = replaced(replaced(model, "[model.moe]\nexperts = 8\ntop_k = 2\nexpert_ffn_hidden = 256\n",
                                              "ffn_hidden = 64\n"),
                                     "vocab = 1000\n", "vocab = 1000\nrouter_bias = true\n");
  EXPECT_EQ(error_of(dense, "s.toml"),
            "s.toml:8:15: error: [model]: 'router_bias' is a bias of a mixture of experts (the router's, or each "
            "expert's projections'); add [model.moe] or set it to false");
}

// embedding_dim: a token embedding narrower than the hidden state (OPT-350m),
// projected in and out of the layers. A decoder of h = 128, f = 512, 2
// layers, V = 1000, e = 32, GELU MLP and LayerNorm without biases: per layer
// 4 x 128^2 + 2 x 128 x 512 + 2 x 256 = 197,120; x 2 = 394,240; embedding
// 1000 x 32 = 32,000; project_in and project_out 2 x 32 x 128 = 8,192; final
// norm 256: 434,688 tied; an untied head adds 32 x 1000.
TEST(ModelKeys, EmbeddingDim) {
  const std::string model =
      "name = \"m\"\nmode = \"infer\"\n[model]\nlayers = 2\nhidden = 128\nheads = 4\nffn_hidden = 512\n"
      "vocab = 1000\nmlp = \"gelu\"\nnorm = \"layernorm\"\ntied_embeddings = true\nembedding_dim = 32\n"
      "[precision]\nuse = \"bf16\"\n[activations]\nuse = \"none\"\n";
  EXPECT_EQ(evaluate(model).breakdown().params_total, 434'688.0);
  EXPECT_EQ(evaluate(replaced(model, "tied_embeddings = true", "tied_embeddings = false")).breakdown().params_total,
            434'688.0 + 32 * 1000.0);
  // As wide as hidden, or 0: no projections, the embedding h wide.
  const double unprojected = 434'688.0 - 8'192 + 1000.0 * (128 - 32);
  EXPECT_EQ(evaluate(replaced(model, "embedding_dim = 32", "embedding_dim = 128")).breakdown().params_total,
            unprojected);
  EXPECT_EQ(evaluate(replaced(model, "embedding_dim = 32", "embedding_dim = 0")).breakdown().params_total,
            unprojected);
  // The inventory: the projections are layer -1 weights of class other, in module order (project_in after the
  // embeddings, project_out after the final norm).
  ModelSpec spec = catalog().find_model("opt-350m")->spec;
  std::vector<std::string> names;
  for (const PlanItem& item : parameter_inventory(spec)) {
    names.emplace_back(item.name_view());
    if (item.name_view().starts_with("project_")) {
      EXPECT_EQ(item.param_class, MEMPLAN_CLASS_OTHER);
      EXPECT_EQ(item.layer, -1);
      EXPECT_EQ(item.elements, 512.0 * 1024);
    }
  }
  EXPECT_EQ(names, (std::vector<std::string>{"embed_tokens", "embed_positions", "project_in", "attn.q", "attn.k",
                                             "attn.v", "attn.o", "mlp", "norms", "project_out"}));
  spec.tied_embeddings = false;
  spec.final_norm = true;
  names.clear();
  for (const PlanItem& item : parameter_inventory(spec)) names.emplace_back(item.name_view());
  EXPECT_EQ(names, (std::vector<std::string>{"embed_tokens", "embed_positions", "project_in", "attn.q", "attn.k",
                                             "attn.v", "attn.o", "mlp", "norms", "final_norm", "project_out",
                                             "lm_head"}));
  EXPECT_EQ(count_parameters(parameter_inventory(spec)), 331'196'416.0 + 2048 + 512.0 * 50272);
}

TEST(ModelKeys, EmbeddingDimErrors) {
  const std::string model =
      "name = \"m\"\nmode = \"infer\"\n[model]\npreset = \"opt-350m\"\nKEY\n[precision]\nuse = \"bf16\"\n"
      "[activations]\nuse = \"none\"\n";
  auto error = [&](const std::string& key) { return error_of(replaced(model, "KEY", key), "s.toml"); };
  EXPECT_EQ(error("embedding_dim = -1"),
            "s.toml:5:17: error: in [model], 'embedding_dim' must be zero (the token embedding as wide as hidden) or "
            "positive");
  EXPECT_EQ(error("embedding_dim = 512.0"),
            "s.toml:5:17: error: in [model], 'embedding_dim' must be an integer, not a float");
  EXPECT_EQ(error("embedding_dim = 2048"),
            "s.toml:5:17: error: [model]: embedding_dim 2048 is wider than hidden 1024; it gives a token embedding "
            "narrower than the hidden state (OPT-350m: 512 with hidden 1024): lower it, or set it to 0 (as wide as "
            "hidden)");
  EXPECT_EQ(error("embedding_dim = 20000000"),
            "s.toml:5:17: error: [model]: 'embedding_dim' = 20000000 is implausibly large (the limit is 10000000); "
            "check the number");
  EXPECT_EQ(error("output_head = \"mlm\""),
            "s.toml:3:1: error: [model]: embedding_dim 512 needs output_head = \"lm\" (the language-model head reads "
            "the projected hidden state back at the embedding's width); set embedding_dim to 0 for an encoder or a "
            "masked-LM head");
  EXPECT_EQ(error("mtp_layers = 1"),
            "s.toml:3:1: error: [model]: embedding_dim 512 with mtp_layers is not modelled (a multi-token-prediction "
            "module projects the hidden-wide embedding); set one of them to 0");
  EXPECT_EQ(error_of("name = \"m\"\nmode = \"infer\"\n[model]\nparams = 3e8\nembedding_dim = 512\n[precision]\n"
                     "use = \"bf16\"\n[activations]\nuse = \"none\"\n",
                     "s.toml"),
            "s.toml:3:1: error: [model] gives both 'params' and architecture keys; give one or the other (a preset or "
            "an hf_config counts as architecture)");
}

TEST(ModelKeys, Errors) {
  EXPECT_EQ(error_of(with("output_head = \"cls\""), "s.toml"),
            "s.toml:4:15: error: in [model], 'output_head' must be \"lm\", \"mlm\" or \"none\", not \"cls\"");
  EXPECT_EQ(error_of(with("type_vocab = -2"), "s.toml"),
            "s.toml:4:14: error: in [model], 'type_vocab' must be zero or positive");
  EXPECT_EQ(error_of(with("pooler = 1"), "s.toml"),
            "s.toml:4:10: error: in [model], 'pooler' must be a boolean (true or false), not an integer");
  EXPECT_EQ(error_of(with("final_logit_softcapping = -30.0"), "s.toml"),
            "s.toml:4:27: error: in [model], 'final_logit_softcapping' must be zero (no soft-capping) or a positive "
            "cap up to 1e6");
  EXPECT_EQ(error_of(with("final_nrom = false"), "s.toml"),
            "s.toml:4:1: error: unknown key 'final_nrom' in [model]. Did you mean 'final_norm'? Accepted keys: "
            "params, layers, hidden, heads, kv_heads, head_dim, ffn_hidden, vocab, embedding_dim, mlp, norm, "
            "tied_embeddings, "
            "qkv_bias, output_bias, mlp_bias, position_embeddings, type_vocab, embedding_norm, final_norm, pooler, "
            "output_head, moe, sliding_window, global_attention_every, max_context, qk_norm, layer_norms, "
            "shared_expert_ffn_hidden, shared_expert_gate, dense_layers, attention_sinks, router_bias, expert_bias, "
            "q_lora_rank, kv_lora_rank, qk_rope_head_dim, v_head_dim, mtp_layers, attn_logit_softcapping, "
            "final_logit_softcapping, norm_scale_fp32, activation, preset, hf_config.");
}

}  // namespace
}  // namespace memplan::testing
