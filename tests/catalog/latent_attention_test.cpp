// Multi-head latent attention and DeepSeek's layer mix (issue 12, item 2):
// DeepSeek-V2 and V3 configs read to the parameter, the inventory's items and
// the classes layout plugins split them by, and every way a description can be
// wrong. The hand counts are in the preset files (core/data/models/deepseek-*)
// and repeated below; the architecture is DeepSeek's reference model
// (deepseek-ai/DeepSeek-V3 @ 9b4e978, inference/model.py: class MLA, MoE, MLP).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "memplan/core/model.hpp"
#include "model/hf_config.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

std::string fixture_path(const char* folder) {
  return source_dir() + "/tests/catalog/fixtures/" + folder + "/config.json";
}

std::string fixture_text(const char* folder) {
  std::ifstream in(fixture_path(folder));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

ModelSpec fixture(const char* folder) { return read_hf_config(fixture_text(folder), fixture_path(folder)); }

std::string replaced(std::string text, std::string_view from, std::string_view to) {
  const size_t at = text.find(from);
  if (at == std::string::npos) throw std::runtime_error("no '" + std::string(from) + "' in the text");
  return text.replace(at, from.size(), to);
}

// name -> (class, first layer, count, elements)
struct Entry {
  int32_t param_class;
  int32_t layer;
  uint32_t count;
  double elements;
  bool operator==(const Entry&) const = default;
};
std::map<std::string, Entry> items_of(const ModelSpec& spec) {
  std::map<std::string, Entry> items;
  for (const PlanItem& item : parameter_inventory(spec))
    items[std::string(item.name_view())] = Entry{item.param_class, item.layer, item.count, item.elements};
  return items;
}

TEST(LatentAttention, DeepSeekV3ConfigToTheParameter) {
  const ModelSpec v3 = fixture("deepseek-v3");
  // 671,026,419,200: core/data/models/deepseek-v3.toml's hand count
  // (README_WEIGHTS.md: "Total parameters: 671B").
  EXPECT_EQ(count_parameters(parameter_inventory(v3)), 671'026'419'200.0);
  EXPECT_EQ(v3.head_dim, 192);  // qk_nope_head_dim 128 + qk_rope_head_dim 64
  EXPECT_EQ(v3.q_lora_rank, 1536);
  EXPECT_EQ(v3.kv_lora_rank, 512);
  EXPECT_EQ(v3.qk_rope_head_dim, 64);
  EXPECT_EQ(v3.v_head_dim, 128);
  EXPECT_EQ(v3.dense_layers, 3);
  EXPECT_EQ(v3.shared_expert_ffn_hidden, 2048);  // n_shared_experts 1 x moe_intermediate_size
  EXPECT_TRUE(v3.router_bias);
  EXPECT_EQ(v3.max_context, 163840);
  EXPECT_NE(v3.hf_note.find("1 multi-token-prediction module"), std::string::npos) << v3.hf_note;

  const auto items = items_of(v3);
  const int32_t attention = MEMPLAN_CLASS_ATTENTION, latent = MEMPLAN_CLASS_ATTENTION_LATENT;
  EXPECT_EQ(items.at("attn.q_a"), (Entry{latent, 0, 61, 7168.0 * 1536}));
  EXPECT_EQ(items.at("attn.q_a_norm"), (Entry{MEMPLAN_CLASS_NORM, 0, 61, 1536}));
  EXPECT_EQ(items.at("attn.q_b"), (Entry{attention, 0, 61, 1536.0 * 128 * 192}));
  EXPECT_EQ(items.at("attn.kv_a"), (Entry{latent, 0, 61, 7168.0 * (512 + 64)}));
  EXPECT_EQ(items.at("attn.kv_a_norm"), (Entry{MEMPLAN_CLASS_NORM, 0, 61, 512}));
  EXPECT_EQ(items.at("attn.kv_b"), (Entry{attention, 0, 61, 512.0 * 128 * (128 + 128)}));
  EXPECT_EQ(items.at("attn.o"), (Entry{attention, 0, 61, 128.0 * 128 * 7168}));
  EXPECT_EQ(items.count("attn.k") + items.count("attn.v") + items.count("attn.q"), 0u);
  // Layers 0-2 dense, 3-60 MoE (first_k_dense_replace 3).
  EXPECT_EQ(items.at("mlp"), (Entry{MEMPLAN_CLASS_MLP, 0, 3, 3.0 * 7168 * 18432}));
  EXPECT_EQ(items.at("moe.router"), (Entry{MEMPLAN_CLASS_ROUTER, 3, 58, 7168.0 * 256 + 256}));
  EXPECT_EQ(items.at("moe.experts"), (Entry{MEMPLAN_CLASS_EXPERT, 3, 58, 256.0 * 3 * 7168 * 2048}));
  EXPECT_EQ(items.at("moe.shared_expert"), (Entry{MEMPLAN_CLASS_MLP, 3, 58, 3.0 * 7168 * 2048}));
  EXPECT_EQ(items.at("norms"), (Entry{MEMPLAN_CLASS_NORM, 0, 61, 2.0 * 7168}));

  const memplan_model abi = to_abi_model(v3, 0);
  EXPECT_EQ(abi.kv_heads, 128);
  EXPECT_EQ(abi.head_dim, 192);
  EXPECT_EQ(abi.q_lora_rank, 1536);
  EXPECT_EQ(abi.kv_lora_rank, 512);
  EXPECT_EQ(abi.qk_rope_head_dim, 64);
  EXPECT_EQ(abi.v_head_dim, 128);
  EXPECT_EQ(abi.dense_layers, 3);
  EXPECT_EQ(abi.shared_expert_ffn_hidden, 2048);
}

TEST(LatentAttention, DeepSeekV2LiteHasNoQueryLatent) {
  const ModelSpec lite = fixture("deepseek-v2-lite");
  // 15,706,484,224: core/data/models/deepseek-v2-lite.toml's hand count (the model card: 15.7B).
  EXPECT_EQ(count_parameters(parameter_inventory(lite)), 15'706'484'224.0);
  EXPECT_EQ(lite.q_lora_rank, 0);  // "q_lora_rank": null
  EXPECT_EQ(lite.shared_expert_ffn_hidden, 2 * 1408);
  EXPECT_FALSE(lite.router_bias);  // V2's greedy router has no correction bias
  EXPECT_TRUE(lite.hf_note.empty());
  const auto items = items_of(lite);
  EXPECT_EQ(items.at("attn.q"), (Entry{MEMPLAN_CLASS_ATTENTION, 0, 27, 2048.0 * 16 * 192}));
  EXPECT_EQ(items.count("attn.q_a") + items.count("attn.q_b") + items.count("attn.q_a_norm"), 0u);
  EXPECT_EQ(items.at("mlp"), (Entry{MEMPLAN_CLASS_MLP, 0, 1, 3.0 * 2048 * 10944}));
  EXPECT_EQ(items.at("moe.experts"), (Entry{MEMPLAN_CLASS_EXPERT, 1, 26, 64.0 * 3 * 2048 * 1408}));
}

// [model] mtp_layers = 1 counts DeepSeek-V3's multi-token-prediction module
// (README_WEIGHTS.md: model.layers.61, "structure identical to the Main Model
// hidden layers", plus enorm, hnorm, eh_proj and the shared head's norm; the
// embedding and the head are shared): one MoE layer 11,507,286,272 + eh_proj
// 2 x 7168 x 7168 = 102,760,448 + 3 norms of 7168 = 21,504: 11,610,068,224;
// 671,026,419,200 + 11,610,068,224 = 682,636,487,424. With the copies of the
// embedding and the head that the checkpoint stores in layer 61 (2 x
// 926,679,040) that is 684,489,845,504, Hugging Face's "685B".
TEST(LatentAttention, MultiTokenPredictionModule) {
  ModelSpec v3 = fixture("deepseek-v3");
  v3.mtp_layers = 1;
  EXPECT_EQ(count_parameters(parameter_inventory(v3)), 682'636'487'424.0);
  const auto items = items_of(v3);
  EXPECT_EQ(items.at("moe.experts"), (Entry{MEMPLAN_CLASS_EXPERT, 3, 59, 256.0 * 3 * 7168 * 2048}));
  EXPECT_EQ(items.at("attn.kv_b").count, 62u);
  EXPECT_EQ(items.at("mtp.eh_proj"), (Entry{MEMPLAN_CLASS_MLP, 61, 1, 2.0 * 7168 * 7168}));
  EXPECT_EQ(items.at("mtp.norms"), (Entry{MEMPLAN_CLASS_NORM, 61, 1, 3.0 * 7168}));
  EXPECT_EQ(to_abi_model(v3, 0).layers, 62);  // plugins see the module as the 62nd layer
  EXPECT_NE(fixture("deepseek-v3").hf_note.find("set [model] mtp_layers = 1"), std::string::npos);
}

TEST(LatentAttention, PresetsEqualTheConfigs) {
  for (const char* name : {"deepseek-v3", "deepseek-v2-lite"}) {
    SCOPED_TRACE(name);
    const ModelPreset* preset = catalog().find_model(name);
    ASSERT_NE(preset, nullptr);
    const ModelSpec config = fixture(name);
    EXPECT_EQ(items_of(preset->spec), items_of(config));
    const memplan_model a = to_abi_model(preset->spec, 0), b = to_abi_model(config, 0);
    EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0);
  }
}

// DeepSeek-V2 (236B) from its config's shape (inference/configs/config_236B.json
// at 9b4e978): 60 layers, h 5120, 128 heads, q_lora_rank 1536, kv_lora_rank 512,
// 1 dense layer of 12288, 160 experts of 1536 (top 6), 2 shared. Hand count:
// attention q_a 5120 x 1536 = 7,864,320 + 1,536 + q_b 1536 x 24576 =
// 37,748,736 + kv_a 5120 x 576 = 2,949,120 + 512 + kv_b 512 x 32768 =
// 16,777,216 + o 16384 x 5120 = 83,886,080: 149,227,520; norms 10,240. Dense
// MLP 3 x 5120 x 12288 = 188,743,680. MoE: experts 160 x 3 x 5120 x 1536 =
// 3,774,873,600 + shared 3 x 5120 x 3072 = 47,185,920 + router 819,200 =
// 3,822,878,720. Layers: (149,227,520 + 10,240) x 60 + 188,743,680 +
// 59 x 3,822,878,720 = 8,954,265,600 + 188,743,680 + 225,549,844,480 =
// 234,692,853,760; embedding and head 2 x 102,400 x 5120 = 1,048,576,000;
// final norm 5,120: 235,741,434,880 (the paper, arXiv 2405.04434: 236B; no
// preset, and no fixture: the V2-Lite config with these fields changed).
TEST(LatentAttention, DeepSeekV2Shape) {
  std::string text = fixture_text("deepseek-v2-lite");
  for (auto [from, to] : {std::pair<std::string_view, std::string_view>{"\"hidden_size\": 2048", "\"hidden_size\": 5120"},
                          {"\"intermediate_size\": 10944", "\"intermediate_size\": 12288"},
                          {"\"num_hidden_layers\": 27", "\"num_hidden_layers\": 60"},
                          {"\"num_attention_heads\": 16", "\"num_attention_heads\": 128"},
                          {"\"num_key_value_heads\": 16", "\"num_key_value_heads\": 128"},
                          {"\"q_lora_rank\": null", "\"q_lora_rank\": 1536"},
                          {"\"n_routed_experts\": 64", "\"n_routed_experts\": 160"},
                          {"\"moe_intermediate_size\": 1408", "\"moe_intermediate_size\": 1536"}})
    text = replaced(text, from, to);
  EXPECT_EQ(count_parameters(parameter_inventory(read_hf_config(text, "v2.json"))), 235'741'434'880.0);
}

TEST(LatentAttention, ConfigErrors) {
  // Fields that would overflow the sums and products of the reading are refused at the field.
  {
    const std::string lite = fixture_text("deepseek-v2-lite");
    try {
      read_hf_config(replaced(lite, "\"n_shared_experts\": 2", "\"n_shared_experts\": 9223372036854775807"), "c.json");
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "c.json: error: Hugging Face config: \"n_shared_experts\" is "
                                       "9223372036854775807, implausibly large (the limit is 1000000); correct it in "
                                       "the file");
    }
  }
  const std::string v3 = fixture_text("deepseek-v3");
  auto error = [](const std::string& text) {
    try {
      read_hf_config(text, "c.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error(replaced(v3, "\"num_key_value_heads\": 128", "\"num_key_value_heads\": 8")),
            "c.json: error: Hugging Face config: \"num_key_value_heads\" is 8 but \"num_attention_heads\" is 128: "
            "multi-head latent attention up-projects keys and values for every head; make them equal");
  EXPECT_EQ(error(replaced(v3, "\"moe_layer_freq\": 1", "\"moe_layer_freq\": 2")),
            "c.json: error: Hugging Face config: \"moe_layer_freq\" is 2: only every Nth layer after the dense ones "
            "is a MoE layer, which memplan cannot model; set it to 1 or describe the model with [model] keys");
  EXPECT_EQ(error(replaced(v3, "\"attention_bias\": false", "\"attention_bias\": true")),
            "c.json: error: Hugging Face config: \"attention_bias\" is true: memplan models DeepSeek's latent "
            "attention without biases (as every published DeepSeek-V2/V3 config has it); set it to false or describe "
            "the model with [model] keys");
  EXPECT_EQ(error(replaced(v3, "\"kv_lora_rank\": 512,", "")),
            "c.json: error: Hugging Face config: \"kv_lora_rank\" is missing (the key/value latent width; model_type "
            "\"deepseek_v3\" needs it); add it to the file");
  // first_k_dense_replace covering every layer: a dense model (DeepseekV2DecoderLayer builds an MLP everywhere).
  const ModelSpec dense = read_hf_config(replaced(v3, "\"first_k_dense_replace\": 3", "\"first_k_dense_replace\": 61"),
                                         "c.json");
  EXPECT_EQ(dense.experts, 0);
  EXPECT_EQ(dense.dense_layers, 0);
  EXPECT_EQ(dense.ffn_hidden, 18432);
}

// [model] keys: the same model written by hand, and what a hand-written
// description can get wrong.
constexpr std::string_view kScenario = R"(mode = "infer"
[model]
preset = "deepseek-v2-lite"
EXTRA
[batch]
micro_batch = 1
seq_len = 512
[precision]
use = "bf16"
[activations]
use = "none"
)";

TEST(LatentAttention, ModelKeyErrors) {
  auto error = [](std::string_view extra) {
    return error_of(replaced(std::string(kScenario), "EXTRA", extra), "s.toml");
  };
  EXPECT_EQ(error("kv_lora_rank = 0"),
            "s.toml:2:1: error: [model]: 'qk_rope_head_dim' belongs to multi-head latent attention, which "
            "'kv_lora_rank' turns on; add 'kv_lora_rank', or set 'qk_rope_head_dim' to 0");
  EXPECT_EQ(error("dense_layers = 27"),
            "s.toml:4:16: error: [model]: dense_layers 27 must be below layers 27 (at least one layer routes to "
            "experts)");
  EXPECT_EQ(error("qk_rope_head_dim = 192"),
            "s.toml:4:20: error: [model]: qk_rope_head_dim 192 must be below head_dim 192 (head_dim = "
            "qk_nope_head_dim + qk_rope_head_dim)");
  EXPECT_EQ(error("kv_heads = 8"),
            "s.toml:4:12: error: [model]: latent attention up-projects keys and values for every head; kv_heads 8 "
            "must equal heads 16 or be left out");
  EXPECT_EQ(error("v_head_dim = -1"),
            "s.toml:4:14: error: in [model], 'v_head_dim' must be zero (no latent attention) or positive");
  EXPECT_EQ(error("norm = \"layernorm\""),
            "s.toml:4:8: error: [model]: latent attention as modelled normalises its latents with RMSNorm "
            "(DeepSeek-V2/V3); set norm = \"rmsnorm\"");
  EXPECT_EQ(error("qkv_bias = true"),
            "s.toml:2:1: error: [model]: latent attention as modelled has no q/k/v or output biases and no q/k "
            "norms (DeepSeek-V2/V3 have none); remove 'qkv_bias', 'output_bias' or 'qk_norm'");
}

}  // namespace
}  // namespace memplan::testing
